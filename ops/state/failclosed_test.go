package state_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// Every call fails with ErrStateUnavailable when Redis is gone, and works again once it is back.
func TestRedisDownIsStateUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	// No command retries and a small pool, so that calls with Redis down fail at once rather than after retries.
	s := state.New(dial(t, srv.URL()+"?max_retries=-1&pool_size=2"), state.Options{})
	ctx := ctxT(t)
	scope := ops.LockScope{Cluster: "c1", Kind: "capacity", Name: "gpu"}
	obj := ops.ObjectRef{Cluster: "c1", Kind: "Job", Name: "j"}
	lock := &engine.Lock{Scope: scope, Owner: "r", Token: "t", Fence: 1}
	calls := []struct {
		name string
		call func() error
	}{
		{"Ping", func() error { return s.Ping(ctx) }},
		{"Create", func() error { _, _, err := s.Create(ctx, record("r1", ops.PhaseReceived, "U1", epoch)); return err }},
		{"Get", func() error { _, err := s.Get(ctx, "r1"); return err }},
		{"Update", func() error { return s.Update(ctx, record("r1", ops.PhasePlanned, "U1", epoch), 1, audit.Event{}) }},
		{"List", func() error { _, err := s.List(ctx, engine.ListQuery{}); return err }},
		{"Acquire", func() error { _, err := s.Acquire(ctx, scope, "r1", time.Second); return err }},
		{"Holder", func() error { _, _, err := s.Holder(ctx, scope); return err }},
		{"Renew", func() error { return s.Renew(ctx, lock, time.Second) }},
		{"Release", func() error { return s.Release(ctx, lock) }},
		{"Seen", func() error { _, err := s.Seen(ctx, "event", "e1"); return err }},
		{"AcquireLease", func() error { _, err := s.AcquireLease(ctx, "l", "A", time.Second); return err }},
		{"RenewLease", func() error { return s.RenewLease(ctx, "l", "A", time.Second) }},
		{"ReleaseLease", func() error { return s.ReleaseLease(ctx, "l", "A") }},
		{"LeaseHolder", func() error { _, _, err := s.LeaseHolder(ctx, "l"); return err }},
		{"Subscribe", func() error { return s.Subscribe(ctx, obj, ops.WatchSubscription{ID: "r1"}) }},
		{"Unsubscribe", func() error { return s.Unsubscribe(ctx, obj, "r1") }},
		{"Subscriptions", func() error { _, err := s.Subscriptions(ctx, obj); return err }},
		{"WatchedObjects", func() error { _, err := s.WatchedObjects(ctx, "c1"); return err }},
		{"Tell", func() error { _, err := s.Tell(ctx, obj, "", "running"); return err }},
		{"LastTold", func() error { _, err := s.LastTold(ctx, obj); return err }},
		{"ClaimTick", func() error { _, err := s.ClaimTick(ctx, "r", epoch); return err }},
		{"AddSample", func() error { return s.AddSample(ctx, "s", epoch, []byte("1"), 5) }},
		{"Samples", func() error { _, err := s.Samples(ctx, "s"); return err }},
		{"CacheGet", func() error { _, _, err := s.CacheGet(ctx, "k"); return err }},
		{"CacheSet", func() error { return s.CacheSet(ctx, "k", []byte("v"), time.Second) }},
		{"Audit", func() error { _, err := s.Audit(ctx, 5); return err }},
	}
	srv.Stop()
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, ops.ErrStateUnavailable) {
			t.Errorf("%s with Redis down: %v, want ErrStateUnavailable", c.name, err)
			continue
		}
		if code := ops.AsError(err).Code; code != ops.CodeStateUnavailable {
			t.Errorf("%s: code %s, want %s", c.name, code, ops.CodeStateUnavailable)
		}
	}
	srv.Restart()
	// go-redis stops dialling after repeated failures and probes once a second until Redis answers again.
	opstest.Eventually(t, 10*time.Second, "the client to reconnect", func() bool { return s.Ping(ctx) == nil })
	for _, c := range calls {
		if err := c.call(); errors.Is(err, ops.ErrStateUnavailable) {
			t.Errorf("%s after Redis came back: %v", c.name, err)
		}
	}
}

func TestTimeoutIsStateUnavailable(t *testing.T) {
	s := state.New(dial(t, redistest.Start(t).URL()), state.Options{})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := s.Ping(ctx)
	if !errors.Is(err, ops.ErrStateUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ping past its deadline: %v, want ErrStateUnavailable wrapping DeadlineExceeded", err)
	}
}

func TestDialUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	cases := []struct {
		name, url string
		wantState bool
	}{
		{"nothing listening", srv.URL(), true},
		{"not a redis URL", "http://localhost", false},
	}
	for _, c := range cases {
		_, err := state.Dial(ctxT(t), c.url)
		if err == nil || errors.Is(err, ops.ErrStateUnavailable) != c.wantState {
			t.Errorf("%s: Dial error %v, want state unavailable=%v", c.name, err, c.wantState)
		}
	}
}

// Every key carries the prefix and a TTL, except the streams: the audit stream is capped, the outbox and the
// execution queue delete each entry once handled.
func TestKeysArePrefixedAndExpire(t *testing.T) {
	const maxLen = 10
	eachBackend(t, state.Options{KeyPrefix: "hp-test", AuditMaxLen: maxLen}, func(t *testing.T, s *state.Store, rdb redis.UniversalClient) {
		ctx := ctxT(t)
		touchEverything(t, s)
		rec := record("busy", ops.PhaseReceived, "U1", time.Now())
		if _, _, err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			if err := s.Update(ctx, rec, rec.Version, audit.Event{RequestID: "busy", Note: "tick"}); err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
		}
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]bool{}
		for _, k := range keys {
			if !strings.HasPrefix(k, "{hp-test}:") {
				t.Errorf("key %q lacks the prefix", k)
				continue
			}
			kinds[strings.SplitN(k, ":", 3)[1]] = true
			ttl, err := rdb.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if k == "{hp-test}:audit" || k == "{hp-test}:outbox" || k == "{hp-test}:exec" {
				if ttl > 0 {
					t.Errorf("the stream %s expires (%s); an expiry would drop entries still to handle", k, ttl)
				}
				continue
			}
			if ttl <= 0 {
				t.Errorf("key %q has no TTL (%s)", k, ttl)
			}
		}
		for _, want := range []string{"req", "idx", "phase", "audit", "lock", "fence", "lease", "seen", "tick", "subs", "told", "watched", "samples", "cache"} {
			if !kinds[want] {
				t.Errorf("no %q key was written; the check did not cover it", want)
			}
		}
		// MAXLEN ~ trims whole stream nodes (100 entries by default), so the cap is approximate.
		if n, err := rdb.XLen(ctx, "{hp-test}:audit").Result(); err != nil || n > maxLen+100 {
			t.Errorf("audit stream holds %d entries after 301 events, want at most about %d", n, maxLen)
		}
	})
}

// touchEverything writes every kind of key the store has.
func touchEverything(t *testing.T, s *state.Store) {
	t.Helper()
	ctx := ctxT(t)
	obj := ops.ObjectRef{Cluster: "c1", Namespace: "ml", Kind: "Job", Name: "j"}
	steps := []error{
		func() error {
			_, _, err := s.Create(ctx, record("r1", ops.PhaseReceived, "U1", time.Now()))
			return err
		}(),
		func() error {
			_, err := s.Acquire(ctx, ops.LockScope{Cluster: "c1", Kind: "k"}, "r1", time.Minute)
			return err
		}(),
		func() error { _, err := s.AcquireLease(ctx, "watch/c1", "A", time.Minute); return err }(),
		func() error { _, err := s.Seen(ctx, "envelope", "e1"); return err }(),
		func() error { _, err := s.ClaimTick(ctx, "daily", epoch); return err }(),
		s.Subscribe(ctx, obj, ops.WatchSubscription{ID: "r1", Channel: "C1"}),
		func() error { _, err := s.Tell(ctx, obj, "", "running"); return err }(),
		s.AddSample(ctx, "nodes", epoch, []byte("4"), 10),
		s.CacheSet(ctx, "price", []byte("1"), time.Minute),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}
