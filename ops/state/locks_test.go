package state_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
)

func TestLockSemantics(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		scope := ops.LockScope{Cluster: "c1", Kind: "capacity", Name: "gpu"}
		a, err := s.Acquire(ctx, scope, "req-a", time.Minute)
		if err != nil || a.Owner != "req-a" || a.Fence < 1 || a.Token == "" {
			t.Fatalf("Acquire = %+v, %v", a, err)
		}
		again, err := s.Acquire(ctx, scope, "req-a", time.Minute)
		if err != nil || again.Token != a.Token || again.Fence != a.Fence {
			t.Fatalf("re-Acquire by the owner = %+v, %v; want the same token and fence as %+v", again, err, a)
		}
		_, err = s.Acquire(ctx, scope, "req-b", time.Minute)
		var held *ops.LockHeldError
		if !errors.As(err, &held) || held.Holder != "req-a" || held.Scope != scope {
			t.Fatalf("Acquire by another owner: %v, want LockHeldError naming req-a", err)
		}
		forged := *a
		forged.Token = "not-the-token"
		if err := s.Renew(ctx, &forged, time.Minute); !errors.Is(err, ops.ErrLockLost) {
			t.Fatalf("Renew with a wrong token: %v, want ErrLockLost", err)
		}
		if err := s.Release(ctx, &forged); err != nil {
			t.Fatalf("Release with a wrong token: %v", err)
		}
		if owner, ok, err := s.Holder(ctx, scope); err != nil || !ok || owner != "req-a" {
			t.Fatalf("after a wrong-token release Holder = %q, %v, %v; want still req-a", owner, ok, err)
		}
		if err := s.Renew(ctx, a, time.Minute); err != nil {
			t.Fatalf("Renew by the holder: %v", err)
		}
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.Holder(ctx, scope); err != nil || ok {
			t.Fatalf("after Release Holder held=%v err=%v", ok, err)
		}
		if err := s.Renew(ctx, a, time.Minute); !errors.Is(err, ops.ErrLockLost) {
			t.Fatalf("Renew after Release: %v, want ErrLockLost", err)
		}
		b, err := s.Acquire(ctx, scope, "req-b", time.Minute)
		if err != nil || b.Fence <= a.Fence {
			t.Fatalf("next holder %+v, %v: want a fence above %d", b, err, a.Fence)
		}
		if _, err := s.Acquire(ctx, scope, "req-c", 0); err == nil {
			t.Fatalf("Acquire with no TTL succeeded; locks must expire")
		}
	})
}

// A holder that stops renewing loses the lock after its TTL; the next holder's fence is larger and the old
// holder's release does nothing to it.
func TestLockExpiresWithoutRenewal(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		scope := ops.LockScope{Cluster: "c1", Namespace: "ml", Kind: "job", Name: "train"}
		const ttl = 150 * time.Millisecond
		old, err := s.Acquire(ctx, scope, "req-old", ttl)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var next *engine.Lock
		opstest.Eventually(t, 5*time.Second, "the lock to lapse", func() bool {
			next, err = s.Acquire(ctx, scope, "req-new", time.Minute)
			return err == nil
		})
		if held := time.Since(start); held < ttl-20*time.Millisecond {
			t.Fatalf("the lock passed on after %s, before its TTL %s", held, ttl)
		}
		if next.Fence <= old.Fence {
			t.Fatalf("fence %d after %d: want larger", next.Fence, old.Fence)
		}
		if err := s.Renew(ctx, old, time.Minute); !errors.Is(err, ops.ErrLockLost) {
			t.Fatalf("old holder's Renew: %v, want ErrLockLost", err)
		}
		if err := s.Release(ctx, old); err != nil {
			t.Fatal(err)
		}
		if owner, _, _ := s.Holder(ctx, scope); owner != "req-new" {
			t.Fatalf("old holder's release freed the new holder's lock: holder %q", owner)
		}
	})
}

func TestLeases(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		const name = "watch/ml-prod-eks"
		steps := []struct {
			name   string
			do     func() (bool, error)
			want   bool
			holder string
		}{
			{"A acquires", func() (bool, error) { return s.AcquireLease(ctx, name, "A", time.Minute) }, true, "A"},
			{"B is refused", func() (bool, error) { return s.AcquireLease(ctx, name, "B", time.Minute) }, false, "A"},
			{"A acquires again (refresh)", func() (bool, error) { return s.AcquireLease(ctx, name, "A", time.Minute) }, true, "A"},
			{"B cannot renew", func() (bool, error) {
				err := s.RenewLease(ctx, name, "B", time.Minute)
				return errors.Is(err, ops.ErrLockLost), nil
			}, true, "A"},
			{"A renews", func() (bool, error) { return true, s.RenewLease(ctx, name, "A", time.Minute) }, true, "A"},
			{"B's release does nothing", func() (bool, error) { return true, s.ReleaseLease(ctx, name, "B") }, true, "A"},
			{"A releases", func() (bool, error) { return true, s.ReleaseLease(ctx, name, "A") }, true, ""},
			{"B acquires", func() (bool, error) { return s.AcquireLease(ctx, name, "B", 100*time.Millisecond) }, true, "B"},
		}
		for _, st := range steps {
			got, err := st.do()
			if err != nil || got != st.want {
				t.Fatalf("%s: %v, %v; want %v", st.name, got, err, st.want)
			}
			h, ok, err := s.LeaseHolder(ctx, name)
			if err != nil || h != st.holder || ok != (st.holder != "") {
				t.Fatalf("%s: LeaseHolder = %q, %v, %v; want %q", st.name, h, ok, err, st.holder)
			}
		}
		opstest.Eventually(t, 5*time.Second, "B's lease to lapse", func() bool {
			ok, err := s.AcquireLease(ctx, name, "A", time.Minute)
			return err == nil && ok
		})
	})
}
