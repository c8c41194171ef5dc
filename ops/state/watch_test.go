package state_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/state"
)

func TestSubscriptions(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		job := ops.ObjectRef{Cluster: "c1", Namespace: "ml", APIVersion: "batch/v1", Kind: "Job", Name: "train"}
		other := ops.ObjectRef{Cluster: "c1", Namespace: "ml", APIVersion: "apps/v1", Kind: "Deployment", Name: "serve"}
		subA := ops.WatchSubscription{ID: "req-a", Channel: "C1", Message: "1.1", Thread: "1.0"}
		subB := ops.WatchSubscription{ID: "req-b", Channel: "D2", Message: "2.1"}
		for _, sub := range []ops.WatchSubscription{subB, subA} {
			if err := s.Subscribe(ctx, job, sub); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Subscribe(ctx, other, subA); err != nil {
			t.Fatal(err)
		}
		if err := s.Subscribe(ctx, job, ops.WatchSubscription{Channel: "C1"}); err == nil {
			t.Fatalf("a subscription without a request id was accepted")
		}
		subs, err := s.Subscriptions(ctx, job)
		if err != nil || !slices.Equal(subs, []ops.WatchSubscription{subA, subB}) {
			t.Fatalf("Subscriptions = %v, %v", subs, err)
		}
		watched := func() []ops.ObjectRef {
			objs, err := s.WatchedObjects(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			if n, err := s.WatchedCount(ctx, "c1"); err != nil || n != int64(len(objs)) {
				t.Fatalf("WatchedCount = %d, %v; want %d, the objects WatchedObjects lists", n, err, len(objs))
			}
			return objs
		}
		if got := watched(); len(got) != 2 || !slices.Contains(got, job) || !slices.Contains(got, other) {
			t.Fatalf("WatchedObjects = %v", got)
		}
		if ok, err := s.Tell(ctx, job, "", "running"); err != nil || !ok {
			t.Fatalf("first Tell: %v, %v", ok, err)
		}
		if err := s.Unsubscribe(ctx, job, "req-a"); err != nil {
			t.Fatal(err)
		}
		if got := watched(); !slices.Contains(got, job) {
			t.Fatalf("job unwatched while req-b still subscribes: %v", got)
		}
		if err := s.Unsubscribe(ctx, job, "req-b"); err != nil {
			t.Fatal(err)
		}
		if got := watched(); slices.Contains(got, job) || !slices.Contains(got, other) {
			t.Fatalf("after the last unsubscribe WatchedObjects = %v", got)
		}
		if told, _ := s.LastTold(ctx, job); told != "" {
			t.Fatalf("an unwatched object kept its last state told %q", told)
		}
	})
}

func TestTellOnce(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		job := ops.ObjectRef{Cluster: "c1", Namespace: "ml", Kind: "Job", Name: "train"}
		steps := []struct {
			from, to string
			want     bool
			last     string
		}{
			{"", "pending", true, "pending"},
			{"", "pending", false, "pending"}, // a second replica, or a restart, sees it told
			{"pending", "running", true, "running"},
			{"pending", "failed", false, "running"}, // stale view: another transition came first
			{"running", "running", false, "running"},
			{"running", "completed", true, "completed"},
		}
		for _, st := range steps {
			ok, err := s.Tell(ctx, job, st.from, st.to)
			if err != nil || ok != st.want {
				t.Fatalf("Tell(%q→%q) = %v, %v; want %v", st.from, st.to, ok, err, st.want)
			}
			if last, err := s.LastTold(ctx, job); err != nil || last != st.last {
				t.Fatalf("after %q→%q LastTold = %q, %v; want %q", st.from, st.to, last, err, st.last)
			}
		}
		// Many replicas racing on one transition: exactly one tells it.
		racer := ops.ObjectRef{Cluster: "c1", Namespace: "ml", Kind: "Job", Name: "raced"}
		var told atomic.Int64
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if ok, err := s.Tell(ctx, racer, "", "running"); err == nil && ok {
					told.Add(1)
				}
			})
		}
		wg.Wait()
		if told.Load() != 1 {
			t.Fatalf("transition told %d times, want once", told.Load())
		}
	})
}
