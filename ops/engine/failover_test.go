package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// guardedWidget checks its lock right before its one write, as every real operation does, and counts the writes
// that got through; await, when set, is where its observation waits after the write.
type guardedWidget struct {
	widget
	writes *atomic.Int32
	await  chan struct{}
}

func (g guardedWidget) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return nil, errors.New("guardedWidget executes in steps")
}

func (g guardedWidget) Write(ctx context.Context, _ *ops.Request, _ *ops.Plan, x ops.Execution) ([]byte, error) {
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	g.writes.Add(1)
	return []byte(`"written"`), nil
}

func (g guardedWidget) Await(ctx context.Context, _ *ops.Request, _ *ops.Plan, _ []byte, _ ops.Execution) (*ops.Result, error) {
	if g.await != nil {
		select {
		case <-g.await:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	return &ops.Result{Summary: "scaled"}, nil
}

// failoverKit is an engine on the in-memory kit whose locker can be made to answer "unreachable", with a short lock
// TTL so that an outage longer than the engine's patience (a third of it) is quick to show.
func failoverKit(t *testing.T, op ops.Operation, ttl time.Duration) (*engine.Engine, *opstest.Locker, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	cat := ops.NewCatalog()
	cat.Register(op)
	locker := opstest.NewLocker(clock)
	e := engine.New(cat, opstest.NewStore(), locker, onePerson{clock}, engine.Options{Replica: "r1", Clock: clock, LockTTL: ttl})
	return e, locker, clock
}

// A state store failing over while a request is about to write (its lock check unanswered a few times) delays the
// write; it neither fails the request nor writes twice. An outage longer than the patience fails it closed, with
// nothing written.
func TestGuardWaitsOutAFailover(t *testing.T) {
	cases := []struct {
		name     string
		failures int
		phase    ops.Phase
		writes   int32
	}{
		{"three unanswered checks", 3, ops.PhaseSucceeded, 1},
		{"an outage longer than a third of the lock TTL", 1 << 20, ops.PhaseFailed, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var writes atomic.Int32
			e, locker, _ := failoverKit(t, guardedWidget{writes: &writes}, 3*time.Second)
			rec := submit(t, e, "req-1")
			locker.FailChecks(tc.failures)
			got, _ := e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
			if got == nil || got.Phase != tc.phase {
				t.Fatalf("record %+v, want %s", got, tc.phase)
			}
			if n := writes.Load(); n != tc.writes {
				t.Errorf("%d writes got through, want %d", n, tc.writes)
			}
			if tc.phase == ops.PhaseFailed {
				if last := got.Errors[len(got.Errors)-1]; last.Code != ops.CodeStateUnavailable || last.Next == "" {
					t.Errorf("failed with %+v, want %s with a next step", last, ops.CodeStateUnavailable)
				}
			}
		})
	}
}

// A lock renewal that the state store does not answer during a failover is asked again: the observation goes on
// and ends succeeded. A lock really lost still stops the execution.
func TestRenewalWaitsOutAFailover(t *testing.T) {
	var writes atomic.Int32
	await := make(chan struct{})
	e, locker, clock := failoverKit(t, guardedWidget{writes: &writes, await: await}, 30*time.Second)
	rec := submit(t, e, "req-1")
	done := make(chan *ops.Record, 1)
	go func() {
		got, _ := e.Approve(context.WithoutCancel(t.Context()), rec.ID(), lee, rec.Approval.PlanHash)
		done <- got
	}()
	opstest.Eventually(t, 5*time.Second, "the write", func() bool { return writes.Load() == 1 })
	locker.FailRenewals(3)
	before := locker.Renewals()
	// The renewal ticker is on the fake clock: a third of the TTL later it renews, unanswered three times, then
	// answered while the locks still hold.
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil { // the renewal ticker
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	opstest.Eventually(t, 5*time.Second, "a renewal after the failover", func() bool { return locker.Renewals() > before })
	close(await)
	select {
	case got := <-done:
		if got == nil || got.Phase != ops.PhaseSucceeded {
			t.Fatalf("record %+v, want succeeded: a failover of three answers cancelled the execution", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the execution did not end")
	}
}

// The release of the scope before the outcome is stored goes unanswered (Redis failing over): the executor
// releases it again once the outcome is stored, so whoever reads "succeeded" may change the same object at once
// instead of waiting out the lock's TTL.
func TestScopeReleaseWaitsOutAFailover(t *testing.T) {
	var writes atomic.Int32
	e, locker, _ := failoverKit(t, guardedWidget{writes: &writes}, 30*time.Second)
	rec := submit(t, e, "req-1")
	scope := widget{}.Spec().Lock(rec.Request)
	locker.FailReleases(1)
	got, _ := e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
	if got == nil || got.Phase != ops.PhaseSucceeded {
		t.Fatalf("record %+v, want succeeded", got)
	}
	if holder, held, _ := locker.Holder(t.Context(), scope); held {
		t.Errorf("the scope %s is still held by %s after the outcome was stored", scope, holder)
	}
}

// recheckedWidget is a guardedWidget whose contract check (Recheck) cannot reach the state store the first
// unreachable times, as a re-plan reading Redis during a failover.
type recheckedWidget struct {
	guardedWidget
	unreachable *atomic.Int32
}

func (r recheckedWidget) Recheck(context.Context, *ops.Request, *ops.Plan) (string, error) {
	if r.unreachable.Add(-1) >= 0 {
		return "", ops.ErrStateUnavailable
	}
	return "", nil
}

// A contract check that cannot reach the state store leaves the request executing with nothing sent, to be
// delivered again; the next delivery writes it once and it succeeds. Before, it ended failed.
func TestContractCheckWaitsOutAFailover(t *testing.T) {
	var writes, unreachable atomic.Int32
	e, _, _ := failoverKit(t, recheckedWidget{guardedWidget{writes: &writes}, &unreachable}, 3*time.Second)
	rec := submit(t, e, "req-1")
	unreachable.Store(1)
	got, _ := e.Approve(t.Context(), rec.ID(), lee, rec.Approval.PlanHash)
	if got == nil || got.Phase != ops.PhaseExecuting || writes.Load() != 0 {
		t.Fatalf("after the unreachable check: %+v with %d writes, want executing with none", got, writes.Load())
	}
	got, err := e.Execute(t.Context(), rec.ID())
	if err != nil || got.Phase != ops.PhaseSucceeded || writes.Load() != 1 {
		t.Fatalf("delivered again: %v, %+v with %d writes; want succeeded with one", err, got, writes.Load())
	}
}
