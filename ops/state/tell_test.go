package state_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// flakyOutbox is the store's outbox whose first SetTold fails, as a Redis cut right after a reply was posted.
type flakyOutbox struct {
	engine.Outbox
	mu     sync.Mutex
	failed bool
}

func (o *flakyOutbox) SetTold(ctx context.Context, id string, n int) error {
	o.mu.Lock()
	fail := !o.failed
	o.failed = true
	o.mu.Unlock()
	if fail {
		return errors.New("dial tcp: connection refused")
	}
	return o.Outbox.SetTold(ctx, id, n)
}

// countingTeller counts how often each history entry was told.
type countingTeller struct {
	mu   sync.Mutex
	told map[int]int
}

func (c *countingTeller) Tell(_ context.Context, _ *ops.Record, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.told[i]++
	return nil
}

func (c *countingTeller) Settle(context.Context, *ops.Record) error { return nil }

// A reply posted whose told counter could not be stored is not posted again by the same replica when it retries:
// the fault matrix caught "approved" told twice after Redis was cut for five seconds mid-telling.
func TestTellerRetryDoesNotRetellWhatItTold(t *testing.T) {
	c := newCluster(t)
	s := c.store(t)
	e := c.engine(t, "r1", quorumPolicy{required: 0}, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := e.Submit(ctx, scaleRequest("tell-once", 3))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("submit: %v, %v", err, rec)
	}
	ob := &flakyOutbox{Outbox: s.Outbox()}
	tl := &countingTeller{told: map[int]int{}}
	stop := inBackground(ctx, func(ctx context.Context) {
		e.RunTellers(ctx, ob, tl, engine.TellerOptions{Wait: 100 * time.Millisecond})
	})
	for {
		n, err := s.Outbox().Told(ctx, "tell-once")
		if err == nil && n == len(rec.History) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the entries were never all told: %d of %d (%v)", n, len(rec.History), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := range rec.History {
		if tl.told[i] != 1 {
			t.Errorf("entry %d (%s→%s) told %d times, want once", i, rec.History[i].From, rec.History[i].To, tl.told[i])
		}
	}
}
