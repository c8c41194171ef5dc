package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// Every stored change of a request wakes whoever watches it through the feed, on any store over the same Redis (a
// replica each), and nothing else does.
func TestFeedWakesOnEveryStoredChange(t *testing.T) {
	eachBackend(t, state.Options{KeyPrefix: "changes"}, func(t *testing.T, s *state.Store, rdb redis.UniversalClient) {
		ctx := ctxT(t)
		feed, _ := runFeed(t, state.New(rdb, state.Options{KeyPrefix: "changes"})) // another replica's store

		changed, unwatch := feed.Watch("req-1")
		defer unwatch()
		quiet, unwatchQuiet := feed.Watch("req-2")
		defer unwatchQuiet()

		rec := record("req-1", ops.PhaseReceived, "U1", epoch)
		if _, _, err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		waitSignal(t, changed, "req-1's creation")
		next := rec.Clone()
		next.Phase = ops.PhasePlanned
		if err := s.Update(ctx, next, rec.Version, audit.Event{RequestID: "req-1"}); err != nil {
			t.Fatal(err)
		}
		waitSignal(t, changed, "req-1's update")
		select {
		case <-quiet:
			t.Error("req-2 was woken by req-1's changes")
		default:
		}
	})
}

// Pub/Sub keeps nothing for a subscriber that was away: when Redis comes back, the feed follows again and wakes every
// watcher, so a change stored while it was away is read.
func TestFeedResyncsAfterRedisRestarts(t *testing.T) {
	srv := redistest.Start(t)
	rdb := dial(t, srv.URL())
	s := state.New(rdb, state.Options{KeyPrefix: "resync"})
	ctx := ctxT(t)
	feed, resynced := runFeed(t, s)
	changed, unwatch := feed.Watch("req-away")
	defer unwatch()

	srv.Restart()
	waitSignal(t, resynced, "a resync after Redis went away")
	waitSignal(t, changed, "the watcher woken by that resync")

	// And the feed follows again: a change stored now wakes the watcher.
	for len(changed) > 0 {
		<-changed
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		rec := record("req-away", ops.PhaseReceived, "U1", epoch)
		if _, _, err := s.Create(ctx, rec); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("Redis did not come back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitSignal(t, changed, "req-away's creation after the restart")
}

// runFeed follows s's changes until the test ends and returns the feed once it follows them, with a channel that
// receives each later resync.
func runFeed(t *testing.T, s *state.Store) (*engine.Feed, <-chan struct{}) {
	t.Helper()
	feed := engine.NewFeed(s, nil)
	ctx, stop := context.WithCancel(context.Background())
	resynced := make(chan struct{}, 8)
	stopListening := feed.Listen(func(id string) {
		if id == "" {
			select {
			case resynced <- struct{}{}:
			default:
			}
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		feed.Run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
		stopListening()
	})
	waitSignal(t, resynced, "the resync when the subscription starts")
	return feed, resynced
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("no signal for %s", what)
	}
}
