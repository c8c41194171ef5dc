package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
)

// failingTeller fails every Tell of the requests whose id starts with "stuck" (a Slack call that keeps failing
// transiently) and reports the others' told entries.
type failingTeller struct {
	mu    sync.Mutex
	tries map[string]int
	tried chan struct{}
	told  chan string
}

func (f *failingTeller) Tell(_ context.Context, rec *ops.Record, _ int) error {
	f.mu.Lock()
	f.tries[rec.ID()]++
	f.mu.Unlock()
	select {
	case f.tried <- struct{}{}:
	default:
	}
	if strings.HasPrefix(rec.ID(), "stuck") {
		return errors.New("slack chat.postMessage: internal_error")
	}
	select {
	case f.told <- rec.ID():
	default:
	}
	return nil
}

func (f *failingTeller) Settle(context.Context, *ops.Record) error { return nil }

// Requests whose telling keeps failing back off without a teller slot: with as many of them as slots, a healthy
// request is still told, and the failing ones keep being retried.
func TestFailingTellsDoNotHoldTellerSlots(t *testing.T) {
	ctx := ctxT(t)
	c := newCluster(t)
	e := c.engine(t, "r1", quorumPolicy{required: 1}, 0)
	const slots = 8
	for i := range slots {
		if _, err := e.Submit(ctx, scaleRequest(fmt.Sprintf("stuck-%d", i), 2)); err != nil {
			t.Fatal(err)
		}
	}
	ft := &failingTeller{tries: map[string]int{}, tried: make(chan struct{}, 1), told: make(chan string, 64)}
	s := c.store(t)
	defer inBackground(ctx, func(ctx context.Context) {
		e.RunTellers(ctx, s.Outbox(), ft, engine.TellerOptions{Concurrency: slots})
	})()
	// Every stuck request has failed at least once, so each would hold a slot if failing held one.
	for {
		ft.mu.Lock()
		n := len(ft.tries)
		ft.mu.Unlock()
		if n == slots {
			break
		}
		select {
		case <-ft.tried:
		case <-ctx.Done():
			t.Fatalf("only %d of %d stuck requests were tried", n, slots)
		}
	}
	if _, err := e.Submit(ctx, scaleRequest("healthy", 2)); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case id := <-ft.told:
			if id == "healthy" {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the healthy request was never told while %d requests kept failing", slots)
		}
	}
}

// Trimming never drops an entry still to tell: with the audit stream capped at 10, 301 changes nobody told yet
// are all still in the outbox, and all of them are handed to a teller.
func TestOutboxKeepsPendingEntriesPastTheAuditCap(t *testing.T) {
	eachBackend(t, state.Options{KeyPrefix: "trim", AuditMaxLen: 10}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		rec := record("busy", ops.PhaseReceived, "U1", time.Now())
		if _, _, err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		const updates = 300
		for i := range updates {
			if err := s.Update(ctx, rec, rec.Version, audit.Event{RequestID: "busy", Note: "tick"}); err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
		}
		ob := s.Outbox()
		seen := 0
		for seen < updates+1 {
			ds, err := ob.Next(ctx, "r1", 10*time.Millisecond, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 {
				break
			}
			seen += len(ds)
		}
		if seen != updates+1 {
			t.Errorf("the outbox handed out %d entries of %d changes: trimming dropped changes nobody told", seen, updates+1)
		}
	})
}

// gateTeller holds its first Tell until released and reports every entry told.
type gateTeller struct {
	first   sync.Once
	holding chan struct{}
	release chan struct{}
	told    chan int
}

func (g *gateTeller) Tell(_ context.Context, _ *ops.Record, i int) error {
	g.first.Do(func() {
		close(g.holding)
		<-g.release
	})
	g.told <- i
	return nil
}

func (g *gateTeller) Settle(context.Context, *ops.Record) error { return nil }

// A change stored while its request is being told joins that telling and is told: the run that was under way read
// the record before the change, so acknowledging the new entry with it would leave the change untold.
func TestChangeDuringTellingIsTold(t *testing.T) {
	ctx := ctxT(t)
	c := newCluster(t)
	e := c.engine(t, "r1", quorumPolicy{required: 1}, 0)
	rec, err := e.Submit(ctx, scaleRequest("busy", 2))
	if err != nil {
		t.Fatal(err)
	}
	g := &gateTeller{holding: make(chan struct{}), release: make(chan struct{}), told: make(chan int, 64)}
	s := c.store(t)
	rdb := dial(t, c.srv.URL())
	defer inBackground(ctx, func(ctx context.Context) {
		e.RunTellers(ctx, s.Outbox(), g, engine.TellerOptions{Concurrency: 2, Wait: 10 * time.Millisecond})
	})()
	<-g.holding
	pendingBefore, err := rdb.XPending(ctx, "{accept}:outbox", "tellers").Result()
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := e.Cancel(ctx, rec.ID(), requester)
	if err != nil {
		t.Fatal(err)
	}
	for { // the teller read the new entry while the first run is held
		p, err := rdb.XPending(ctx, "{accept}:outbox", "tellers").Result()
		if err != nil {
			t.Fatal(err)
		}
		if p.Count > pendingBefore.Count {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the teller never read the change")
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(g.release)
	last := len(cancelled.History) - 1
	waitFor(t, ctx, g.told, last, fmt.Sprintf("entry %d (the cancel) was never told", last))
}
