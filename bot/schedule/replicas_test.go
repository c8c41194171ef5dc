package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/report"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// newStateStore is the Redis-backed store the bot uses, on a redis-server of this test.
func newStateStore(t *testing.T, srv *redistest.Server, prefix string) *state.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return state.New(rdb, state.Options{KeyPrefix: prefix})
}

func TestReplicasPostEachTickOnce(t *testing.T) {
	srv := redistest.Start(t)
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 7, 10, 0, 30, 0, time.UTC))
	rep := config.Report{Name: "every-minute", Schedule: "* * * * *", Timezone: "UTC", Sections: []string{}}
	const grace = 20 * time.Second // the 10:00 tick is already late at the start
	cfg := testConfig(rep)
	pubs := []*recPublisher{newPublisher(), newPublisher()}
	for i, pub := range pubs {
		// each replica has its own Redis connection, as separate processes do
		start(t, Options{Config: cfg, Claimer: newStateStore(t, srv, "hyperops-test"), Builder: clockBuilder{clock: clock},
			Publisher: pub, Clock: clock, Grace: grace, Log: testLog(t, fmt.Sprintf("replica-%d", i))})
	}
	total := func() (reports, notices int) {
		for _, p := range pubs {
			for _, e := range p.all() {
				if e.notice != "" {
					notices++
				} else {
					reports++
				}
			}
		}
		return
	}
	for tick := 1; tick <= 2; tick++ {
		waitIdle(t, clock, 2)
		clock.Advance(clock.Now().Truncate(time.Minute).Add(time.Minute).Sub(clock.Now()))
		select {
		case <-pubs[0].events:
		case <-pubs[1].events:
		case <-time.After(10 * time.Second):
			t.Fatalf("tick %d: nothing posted", tick)
		}
		waitIdle(t, clock, 2) // both replicas finished the tick
		if r, n := total(); r != tick || n != 0 {
			t.Fatalf("after tick %d: %d reports and %d notices, want %d and 0", tick, r, n, tick)
		}
	}
	// A third replica that was down at both ticks starts now: it posts no late duplicates and misses nothing.
	late := newPublisher()
	start(t, Options{Config: cfg, Claimer: newStateStore(t, srv, "hyperops-test"), Builder: clockBuilder{clock: clock},
		Publisher: late, Clock: clock, Grace: grace})
	waitIdle(t, clock, 3)
	if n := len(late.all()); n != 0 {
		t.Errorf("the late replica posted %d times", n)
	}
	for _, p := range pubs {
		for _, e := range p.all() {
			if len(e.chart) == 0 || !e.report.Shows(report.SectionChart) {
				t.Errorf("report at %v posted without its chart", e.report.At)
			}
		}
	}
}
