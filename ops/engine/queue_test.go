package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// memQueue is an in-memory engine.Queue: entries in order, each delivered to one consumer, counted per request.
type memQueue struct {
	mu        sync.Mutex
	n         int
	entries   chan *engine.Delivery
	delivered map[string]int
	done      map[string]int
}

func newMemQueue() *memQueue {
	return &memQueue{entries: make(chan *engine.Delivery, 1024), delivered: map[string]int{}, done: map[string]int{}}
}

func (q *memQueue) Enqueue(_ context.Context, id string) error {
	q.mu.Lock()
	q.n++
	d := &engine.Delivery{RequestID: id, Entry: fmt.Sprint(q.n)}
	q.mu.Unlock()
	q.entries <- d
	return nil
}

func (q *memQueue) Next(ctx context.Context, _ string, wait time.Duration) (*engine.Delivery, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case d := <-q.entries:
		q.mu.Lock()
		q.delivered[d.RequestID]++
		q.mu.Unlock()
		return d, nil
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, nil
	}
}

func (q *memQueue) Touch(context.Context, string, *engine.Delivery) error { return nil }

func (q *memQueue) Done(_ context.Context, d *engine.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.done[d.RequestID]++
	return nil
}

func (q *memQueue) deliveries(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.delivered[id]
}

// runExecutors runs the engine's executors until the test ends.
func runExecutors(t *testing.T, e *engine.Engine, opts engine.ExecutorOptions) {
	t.Helper()
	runUntilEnd(t, "the executors", func(ctx context.Context) { _ = e.RunExecutors(ctx, opts) })
}

// runUntilEnd runs run in the background until the test ends; then it cancels run's context and fails the test if
// run has not returned within 10 s (what names it in the failure).
func runUntilEnd(t *testing.T, what string, run func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { run(ctx); close(stopped) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Error(what + " did not stop")
		}
	})
}

func phaseOf(t *testing.T, e *engine.Engine, id string) ops.Phase {
	t.Helper()
	rec, err := e.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Phase
}

func approve(t *testing.T, k *stepKit, rec *ops.Record) {
	t.Helper()
	got, err := k.e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
	if err != nil || got.Phase != ops.PhaseApproved {
		t.Fatalf("approve %s: %v, %+v; want approved (queued)", rec.ID(), err, got)
	}
}

// TestQueuePanicFailsOnlyThatRequest: an execution that panics fails its request with E_INTERNAL and a next
// step, reports the stack, frees the widget's lock, and the next request on the queue (the same widget) runs.
func TestQueuePanicFailsOnlyThatRequest(t *testing.T) {
	q := newMemQueue()
	var mu sync.Mutex
	var reports []string
	k := newStepKit(t, nil, engine.Options{Queue: q, OnError: func(id string, err error) {
		mu.Lock()
		reports = append(reports, id+": "+err.Error())
		mu.Unlock()
	}})
	k.w.panics = "boom"
	first, second := k.submit(t, "boom", "c", "w"), k.submit(t, "next", "c", "w")
	approve(t, k, first)
	approve(t, k, second)
	runExecutors(t, k.e, engine.ExecutorOptions{Workers: 1, Poll: 10 * time.Millisecond})
	opstest.Eventually(t, 10*time.Second, "both requests to end", func() bool {
		return phaseOf(t, k.e, "boom") == ops.PhaseFailed && phaseOf(t, k.e, "next") == ops.PhaseSucceeded
	})
	rec, _ := k.e.Get(t.Context(), "boom")
	ue := rec.Errors[len(rec.Errors)-1]
	if ue.Code != ops.CodeInternal || ue.Next == "" || !strings.Contains(ue.Message, "widget driver bug") {
		t.Fatalf("panicked request's error %+v, want E_INTERNAL naming the panic, with a next step", ue)
	}
	if tr := last(rec); tr.To != ops.PhaseFailed || tr.By.Kind != ops.System {
		t.Fatalf("last history entry %+v, want failed by the system", tr)
	}
	if calls, effective := k.w.writes(); len(calls) != 2 || calls[0] != "boom" || calls[1] != "next" || effective != 1 {
		t.Fatalf("writes %v (effective %d), want boom then next, one effective", calls, effective)
	}
	if h := k.holder(t, widgetW); h != "" {
		t.Fatalf("lock held by %q after both ended", h)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || !strings.HasPrefix(reports[0], "boom: panic while executing: widget driver bug") || !strings.Contains(reports[0], "goroutine") {
		t.Fatalf("reports %q, want the panic of boom with its stack", reports)
	}
}

// TestQueuePerClusterLimit: with one execution per cluster, a second request on a cluster waits (it is not even
// started) while the first one writes, and a request on another cluster runs meanwhile.
func TestQueuePerClusterLimit(t *testing.T) {
	q := newMemQueue()
	var gate *opstest.Gate
	k := newStepKit(t, func(o ops.Operation) ops.Operation {
		var h *opstest.HookedOp
		h, gate = opstest.GateWrite(o, "a1")
		return h
	}, engine.Options{Queue: q})
	k.w.size["w2"], k.w.size["w3"] = 1, 1
	a1, a2, b1 := k.submit(t, "a1", "a", "w"), k.submit(t, "a2", "a", "w2"), k.submit(t, "b1", "b", "w3")
	runExecutors(t, k.e, engine.ExecutorOptions{Workers: 4, PerCluster: 1, Poll: 10 * time.Millisecond})
	var open sync.Once
	t.Cleanup(func() { open.Do(gate.Open) }) // before the executors stop, when the test fails early
	approve(t, k, a1)
	select {
	case <-gate.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("a1's write never began")
	}
	approve(t, k, a2)
	approve(t, k, b1)
	opstest.Eventually(t, 10*time.Second, "b1 on another cluster to succeed while a1 writes", func() bool {
		return phaseOf(t, k.e, "b1") == ops.PhaseSucceeded
	})
	// a2 was taken from the queue and put back, more than once, without starting.
	opstest.Eventually(t, 10*time.Second, "a2 to be delivered and put back", func() bool { return q.deliveries("a2") >= 3 })
	if p := phaseOf(t, k.e, "a2"); p != ops.PhaseApproved {
		t.Fatalf("a2 is %s while a1 holds cluster a's one slot, want approved (waiting)", p)
	}
	if calls, _ := k.w.writes(); len(calls) != 1 || calls[0] != "b1" {
		t.Fatalf("writes %v while a1 waits at its gate, want only b1's", calls)
	}
	open.Do(gate.Open)
	opstest.Eventually(t, 10*time.Second, "a1 and then a2 to succeed", func() bool {
		return phaseOf(t, k.e, "a1") == ops.PhaseSucceeded && phaseOf(t, k.e, "a2") == ops.PhaseSucceeded
	})
	if calls, _ := k.w.writes(); len(calls) != 3 || calls[1] != "a1" || calls[2] != "a2" {
		t.Fatalf("writes %v, want b1, a1, a2", calls)
	}
}
