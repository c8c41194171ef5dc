package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// toldSink records what it was told: one line per subscription and change.
type toldSink struct {
	mu    sync.Mutex
	lines []string
	// onWatched, when set, runs before a change is recorded.
	onWatched func()
}

func (s *toldSink) Watched(ctx context.Context, sub ops.WatchSubscription, c ops.WatchChange) error {
	if s.onWatched != nil {
		s.onWatched()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("told %s with a dead context: %w", sub.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, fmt.Sprintf("%s %s %s→%s", sub.ID, c.Object.Name, c.From, c.To))
	return nil
}

func (s *toldSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

// clusterObjects is the cluster as the protocol reads it when a subscription catches up.
type clusterObjects struct{ states map[string]string }

func (o clusterObjects) WatchedObject(t ops.Target, kind, name string) (ops.ObjectRef, error) {
	if kind != "" && kind != "job" {
		return ops.ObjectRef{}, ops.Errorf(ops.CodeInvalidArgument, "kind", "use kind=job", "cannot watch objects of kind %q", kind)
	}
	return ops.ObjectRef{Cluster: t.Cluster, Namespace: t.Namespace, APIVersion: "batch/v1", Kind: "Job", Name: name}, nil
}

func (o clusterObjects) Watchable(obj ops.ObjectRef) bool { return obj.Kind == "Job" }

func (o clusterObjects) ObserveWatched(_ context.Context, obj ops.ObjectRef) (string, string, bool, error) {
	st, ok := o.states[obj.Name]
	return st, "", ok, nil
}

type oneCluster struct{}

func (oneCluster) Resolve(t ops.Target) (ops.Target, error) {
	if t.Cluster == "" {
		t.Cluster = "c1"
	}
	if t.Cluster != "c1" {
		return t, ops.Errorf(ops.CodeUnknownCluster, "cluster", "use cluster=c1", "cluster %q is not registered", t.Cluster)
	}
	if t.Namespace == "" {
		t.Namespace = "ml"
	}
	return t, nil
}

// replicas returns n protocols sharing one Redis, as replicas do, each with its own sink; count is the last
// number of watched objects any of them reported.
func replicas(t *testing.T, n int, objects clusterObjects) (ws []*engine.Watches, sinks []*toldSink, count func() int64) {
	t.Helper()
	store := opstest.NewRedisStore(t).Store
	var mu sync.Mutex
	var last int64 = -1
	for range n {
		sink := &toldSink{}
		sinks = append(sinks, sink)
		ws = append(ws, engine.NewWatches(engine.WatchOptions{Store: store, Objects: objects, Targets: oneCluster{}, Sink: sink,
			Clusters: []string{"c1"}, OnCount: func(n int64) { mu.Lock(); last = n; mu.Unlock() },
			OnError: func(c ops.WatchChange, err error) { t.Errorf("telling %s→%s: %v", c.Object.Name, c.To, err) }}))
	}
	return ws, sinks, func() int64 { mu.Lock(); defer mu.Unlock(); return last }
}

func job(name string) ops.ObjectRef {
	return ops.ObjectRef{Cluster: "c1", Namespace: "ml", APIVersion: "batch/v1", Kind: "Job", Name: name}
}

func mustWatch(t *testing.T, w *engine.Watches, obj ops.ObjectRef, id string) {
	t.Helper()
	if err := w.Watch(context.Background(), obj, ops.WatchSubscription{ID: id, Channel: "C1", Message: id + ".1", Thread: id + ".1"}); err != nil {
		t.Fatal(err)
	}
}

// Two replicas both see every change (and a restarted watcher re-emits the current one): each state is told once
// to each subscription, with the state told before as From, whatever the replica saw.
func TestWatchesTellEachStateOnceAcrossReplicas(t *testing.T) {
	ws, sinks, _ := replicas(t, 2, clusterObjects{})
	a, b := ws[0], ws[1]
	obj := job("train")
	mustWatch(t, a, obj, "req-1")
	mustWatch(t, b, obj, "watch:C2")
	ctx := context.Background()
	for _, c := range []ops.WatchChange{
		{Object: obj, From: "", To: "running"},
		{Object: obj, From: "pending", To: "running"},
		{Object: obj, From: "running", To: "completed"},
		{Object: obj, From: "", To: "completed"}, // a watcher after a restart
	} {
		a.Transition(ctx, c)
		b.Transition(ctx, c)
	}
	got := append(sinks[0].got(), sinks[1].got()...)
	slices.Sort(got)
	want := []string{"req-1 train →running", "req-1 train running→completed", "watch:C2 train →running", "watch:C2 train running→completed"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("told %q\nwant %q", got, want)
	}
}

// A change of an object nobody watches is not claimed: who subscribes later hears the state from the cluster, and
// a second subscription hears the last state told, alone.
func TestWatchesCatchUp(t *testing.T) {
	ws, sinks, _ := replicas(t, 1, clusterObjects{states: map[string]string{"train": "running"}})
	w, sink := ws[0], sinks[0]
	obj := job("train")
	w.Transition(context.Background(), ops.WatchChange{Object: obj, To: "running"})
	if got := sink.got(); len(got) != 0 {
		t.Fatalf("told %q about an object nobody watches", got)
	}
	mustWatch(t, w, obj, "req-1")
	mustWatch(t, w, obj, "req-2")
	mustWatch(t, w, job("later"), "req-3") // not created yet: nothing to tell
	want := []string{"req-1 train →running", "req-2 train →running"}
	if got := sink.got(); !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
}

// Telling "deleted" ends the object's subscriptions; unwatching removes one and says whether there was one; the
// count follows.
func TestWatchesDeletedAndUnwatch(t *testing.T) {
	ws, sinks, count := replicas(t, 1, clusterObjects{})
	w, sink := ws[0], sinks[0]
	ctx := context.Background()
	gone, kept := job("gone"), job("kept")
	mustWatch(t, w, gone, "req-1")
	mustWatch(t, w, kept, "watch:C1")
	if n := count(); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	w.Transition(ctx, ops.WatchChange{Object: gone, From: "running", To: ops.WatchDeleted})
	w.Transition(ctx, ops.WatchChange{Object: gone, To: "running"}) // a name reused: nobody watches it any more
	if got, want := sink.got(), []string{"req-1 gone →deleted"}; !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
	if n := count(); n != 1 {
		t.Fatalf("count = %d after deleted, want 1", n)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"watch:C2", false}, {"watch:C1", true}, {"watch:C1", false}} {
		if had, err := w.Unwatch(ctx, kept, tc.id); err != nil || had != tc.want {
			t.Fatalf("Unwatch(%s) = %v, %v; want %v", tc.id, had, err, tc.want)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("count = %d after unwatch, want 0", n)
	}
}

// A claimed state is ours to tell: a watcher stopping while it is told does not cut the telling short.
func TestWatchesTellClaimedStateAfterTheWatcherStops(t *testing.T) {
	ws, sinks, _ := replicas(t, 1, clusterObjects{})
	w, sink := ws[0], sinks[0]
	obj := job("train")
	mustWatch(t, w, obj, "req-1")
	mustWatch(t, w, obj, "req-2")
	ctx, stop := context.WithCancel(context.Background())
	sink.onWatched = stop
	w.Transition(ctx, ops.WatchChange{Object: obj, To: "running"})
	want := []string{"req-1 train →running", "req-2 train →running"}
	if got := sink.got(); !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
}

// Resolve fills the defaults and refuses what cannot be watched with the field and the next step.
func TestWatchesResolve(t *testing.T) {
	ws, _, _ := replicas(t, 1, clusterObjects{})
	w := ws[0]
	if got, err := w.Resolve(ops.WatchTarget{Name: "train"}); err != nil || got != job("train") {
		t.Fatalf("Resolve = %+v, %v; want %+v", got, err, job("train"))
	}
	for _, tc := range []struct {
		target ops.WatchTarget
		field  string
	}{
		{ops.WatchTarget{Cluster: "c9", Name: "train"}, "cluster"},
		{ops.WatchTarget{Kind: "cronjob", Name: "train"}, "kind"},
	} {
		_, err := w.Resolve(tc.target)
		var oe *ops.Error
		if !errors.As(err, &oe) || oe.Field != tc.field || oe.Next == "" {
			t.Errorf("Resolve(%+v) = %v; want a refusal naming %s and a next step", tc.target, err, tc.field)
		}
	}
}
