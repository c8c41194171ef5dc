package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// memOutbox is an in-memory engine.Outbox that hands every pending entry to every consumer once: as when a consumer
// claims the entries of one it thought silent while that one is still telling them, the worst case of the real
// consumer group. It counts, per entry, the consumers that acknowledged it.
type memOutbox struct {
	mu      sync.Mutex
	n       int
	pending []*engine.Delivery
	handed  map[string]map[string]bool // consumer → entry
	acked   map[string]int             // entry → acknowledgements
	told    map[string]int
}

func newMemOutbox() *memOutbox {
	return &memOutbox{handed: map[string]map[string]bool{}, acked: map[string]int{}, told: map[string]int{}}
}

// add appends an entry for request id, as the store does with every change; it returns the entry's id.
func (o *memOutbox) add(id string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	d := &engine.Delivery{RequestID: id, Entry: fmt.Sprint(o.n)}
	o.pending = append(o.pending, d)
	return d.Entry
}

func (o *memOutbox) Next(ctx context.Context, consumer string, wait time.Duration, max int) ([]*engine.Delivery, error) {
	deadline := time.Now().Add(wait)
	for {
		o.mu.Lock()
		if o.handed[consumer] == nil {
			o.handed[consumer] = map[string]bool{}
		}
		var out []*engine.Delivery
		for _, d := range o.pending {
			if len(out) < max && !o.handed[consumer][d.Entry] {
				o.handed[consumer][d.Entry] = true
				c := *d
				out = append(out, &c)
			}
		}
		o.mu.Unlock()
		if len(out) > 0 || ctx.Err() != nil || time.Now().After(deadline) {
			return out, nil
		}
		sleepCtx(ctx, 5*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (o *memOutbox) Done(_ context.Context, ds ...*engine.Delivery) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, d := range ds {
		o.acked[d.Entry]++
		o.pending = slices.DeleteFunc(o.pending, func(p *engine.Delivery) bool { return p.Entry == d.Entry })
	}
	return nil
}

func (o *memOutbox) Told(_ context.Context, id string) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.told[id], nil
}

func (o *memOutbox) SetTold(_ context.Context, id string, n int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.told[id] = n
	return nil
}

// heldByAll says whether every pending entry was handed to each of the consumers.
func (o *memOutbox) heldByAll(consumers ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, d := range o.pending {
		for _, c := range consumers {
			if !o.handed[c][d.Entry] {
				return false
			}
		}
	}
	return true
}

func (o *memOutbox) acks(entry string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.acked[entry]
}

// sink is a Teller, shared by the replicas as Slack is, that remembers what it told per request; fail makes every Tell of a request fail,
// before runs first in every Tell.
type sink struct {
	mu      sync.Mutex
	told    map[string][]string // request → "entry i to phase, by replica"
	settled map[string]int
	fail    string
	before  func(rec *ops.Record, i int)
}

func newSink() *sink { return &sink{told: map[string][]string{}, settled: map[string]int{}} }

func (s *sink) Tell(_ context.Context, rec *ops.Record, i int) error {
	if s.before != nil {
		s.before(rec, i)
	}
	if rec.ID() == s.fail {
		return errors.New("Slack says channel_not_found")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.told[rec.ID()] = append(s.told[rec.ID()], fmt.Sprintf("%d %s", i, rec.History[i].To))
	return nil
}

func (s *sink) Settle(_ context.Context, rec *ops.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled[rec.ID()]++
	return nil
}

func (s *sink) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.told[id])
}

func (s *sink) settles(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled[id]
}

// runTellers runs an engine's tellers until the test ends.
func runTellers(t *testing.T, e *engine.Engine, ob engine.Outbox, tl engine.Teller, opts engine.TellerOptions) {
	t.Helper()
	runUntilEnd(t, "the tellers", func(ctx context.Context) { e.RunTellers(ctx, ob, tl, opts) })
}

// twoReplicas are two engines sharing one store and one locker, as two replicas share Redis.
func twoReplicas(t *testing.T) (r1, r2 *engine.Engine) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	cat := ops.NewCatalog()
	cat.Register(widget{})
	store, locks := opstest.NewStore(), opstest.NewLocker(clock)
	mk := func(name string) *engine.Engine {
		return engine.New(cat, store, locks, onePerson{clock}, engine.Options{Replica: name, Clock: clock})
	}
	return mk("r1"), mk("r2")
}

// TestTellersRaceTellsOnce: two replicas' tellers get the same outbox entries at once (a claim racing the
// consumer that holds them); every history entry is told once, in order, and both acknowledge the entry. A later
// transition is told once too.
func TestTellersRaceTellsOnce(t *testing.T) {
	r1, r2 := twoReplicas(t)
	rec := submit(t, r1, "req-1")
	ob, s := newMemOutbox(), newSink()
	first := ob.add("req-1")
	// Every Tell waits until both replicas hold every pending entry: the other one tries while this one tells.
	s.before = func(*ops.Record, int) {
		for deadline := time.Now().Add(10 * time.Second); !ob.heldByAll("r1", "r2") && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	opts := engine.TellerOptions{Wait: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	runTellers(t, r1, ob, s, opts)
	runTellers(t, r2, ob, s, opts)
	want := []string{"0 received", "1 planned", "2 awaiting-approval"}
	opstest.Eventually(t, 10*time.Second, "both replicas to acknowledge the entry", func() bool { return ob.acks(first) == 2 })
	if got := s.of("req-1"); !slices.Equal(got, want) {
		t.Fatalf("told %q, want each entry once, in order: %q", got, want)
	}
	if n, _ := ob.Told(t.Context(), "req-1"); n != 3 || s.settles("req-1") == 0 {
		t.Fatalf("told count %d, settles %d; want 3 and the plan message settled", n, s.settles("req-1"))
	}
	// The denial, stored by the other replica, is told once too.
	if _, err := r2.Deny(t.Context(), rec.ID(), lee); err != nil {
		t.Fatal(err)
	}
	second := ob.add("req-1")
	opstest.Eventually(t, 10*time.Second, "the denial to be told and acknowledged by both", func() bool {
		return ob.acks(second) == 2 && len(s.of("req-1")) >= 4
	})
	if got := s.of("req-1"); !slices.Equal(got, append(want, "3 denied")) {
		t.Fatalf("told %q, want the denial once after the rest", got)
	}
}

// TestTellerFailureIsolated: a request whose telling fails every time (its channel is gone) is retried with
// backoff and reported, while another request is told at once, even with one telling slot; the failing
// request's entry stays pending and nothing of it counts as told.
func TestTellerFailureIsolated(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	cat := ops.NewCatalog()
	cat.Register(widget{})
	store, locks := opstest.NewStore(), opstest.NewLocker(clock)
	var mu sync.Mutex
	var reports []string
	e := engine.New(cat, store, locks, onePerson{clock}, engine.Options{Replica: "r1", Clock: clock,
		OnError: func(id string, err error) {
			mu.Lock()
			reports = append(reports, id+": "+err.Error())
			mu.Unlock()
		}})
	submit(t, e, "stuck")
	ok := submit(t, e, "ok")
	ob, s := newMemOutbox(), newSink()
	s.fail = "stuck"
	stuck := ob.add("stuck")
	runTellers(t, e, ob, s, engine.TellerOptions{Concurrency: 1, Wait: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	failures := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range reports {
			if strings.HasPrefix(r, "stuck: tell: ") && strings.Contains(r, "channel_not_found") {
				n++
			}
		}
		return n
	}
	opstest.Eventually(t, 10*time.Second, "stuck's telling to fail and be retried", func() bool { return failures() >= 2 })
	okEntry := ob.add("ok")
	opstest.Eventually(t, 10*time.Second, "ok to be told while stuck keeps failing", func() bool {
		return ob.acks(okEntry) == 1 && len(s.of("ok")) == 3
	})
	if _, err := e.Deny(t.Context(), ok.ID(), lee); err != nil {
		t.Fatal(err)
	}
	again := ob.add("ok")
	opstest.Eventually(t, 10*time.Second, "ok's denial to be told", func() bool { return ob.acks(again) == 1 })
	if got := s.of("ok"); len(got) != 4 || got[3] != "3 denied" {
		t.Fatalf("ok told %q, want its four entries", got)
	}
	if n, _ := ob.Told(t.Context(), "stuck"); n != 0 || len(s.of("stuck")) != 0 || ob.acks(stuck) != 0 {
		t.Fatalf("stuck: told count %d, told %q, acks %d; want nothing told and its entry pending", n, s.of("stuck"), ob.acks(stuck))
	}
	opstest.Eventually(t, 10*time.Second, "stuck to be retried still", func() bool { return failures() >= 3 })
}
