package scenarios

import (
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// Kill the replica that is executing a request: no double execution; the request is marked interrupted with
// Stop / Take over; a person takes over.
func TestKilledReplicaLeavesInterruptedRequestToTakeOver(t *testing.T) {
	// The fake AWS holds the scaling in progress long enough to kill the replica while it waits on it.
	w := world(t, harness.Options{TransitionDelay: 40 * time.Second})
	ctx := t.Context()
	const id = "e2e-crash-1"
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, "capacity scale group="+harness.GPUGroup+" count=2 request-id="+id)
	must(t, w, err)
	plan, err := w.WaitText(ctx, time.Minute, harness.OpsChannel, id)
	must(t, w, err)
	_, err = w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval)
	must(t, w, err)
	click, err := w.Click(ctx, harness.Lead1, harness.OpsChannel, plan.TS, handlers.ActionApprove)
	must(t, w, err)
	executing, err := w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseExecuting)
	must(t, w, err)
	must(t, w, harness.Eventually(ctx, 30*time.Second, func() (bool, error) { return w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster) == 1, nil }))

	victim, ok := w.ReplicaOf(click.ConnID)
	if !ok {
		t.Fatalf("no replica owns connection %s", click.ConnID)
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s (pid %d), which got the approval; the record says replica %s executes", victim.Name, victim.PID(), executing.Replica)

	rec, err := w.WaitPhase(ctx, 3*time.Minute, id, ops.PhaseInterrupted, ops.PhaseSucceeded, ops.PhaseFailed)
	must(t, w, err)
	if rec.Phase != ops.PhaseInterrupted {
		t.Fatalf("after killing %s the request ended %s, want interrupted (was it executing on the other replica?)", victim.Name, rec.Phase)
	}
	// The survivor tells what it found, with Stop and Take over, in the request's message or thread.
	offer, err := w.WaitMessage(ctx, time.Minute, harness.OpsChannel, func(m fakeslack.Message) bool {
		return (m.TS == plan.TS || m.ThreadTS == plan.TS) && harness.HasButton(m, handlers.ActionTakeOver) && harness.HasButton(m, handlers.ActionStop)
	})
	must(t, w, err)
	if n := w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster called %d times, want 1: an interrupted execution is never re-run blindly", n)
	}

	_, err = w.Click(ctx, harness.Lead2, harness.OpsChannel, offer.TS, handlers.ActionTakeOver)
	must(t, w, err)
	rec, err = w.WaitRecord(ctx, 30*time.Second, id, func(r *ops.Record) bool { return r.Owner.ID == harness.Lead2 })
	must(t, w, err)
	if rec.Phase != ops.PhaseInterrupted {
		t.Errorf("after the take-over the request is %s, want it still interrupted until the new owner resumes or stops it", rec.Phase)
	}
	if n := w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster called %d times after the take-over, want 1", n)
	}
	_, err = w.WaitInThread(ctx, 30*time.Second, harness.OpsChannel, plan.TS, harness.Lead2)
	if err != nil {
		t.Errorf("Slack never told who took over: %v", err)
	}
}
