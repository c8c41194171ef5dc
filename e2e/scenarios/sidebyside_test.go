package scenarios

import (
	"fmt"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// Twenty one-minute node-group changes approved together on two replicas run side by side, not in waves of
// what the executor slots allow (execution.workers 16, perCluster 4 per replica): an execution whose write is
// accepted gives its slots back while it waits for AWS (issue 21). Every UpdateNodegroupConfig reaches AWS
// before the first change can have finished, each is sent once, and each thread is told it succeeded once. The
// time from the first approval to the last thread told is logged (the acceptance figure: within 90 s).
func TestLongChangesRunSideBySide(t *testing.T) {
	w := world(t, harness.Options{TransitionDelay: longTransition})
	ctx := t.Context()
	const n = 20
	t.Cleanup(func() { removeNodegroupNodes(t, w) })
	for i := range n {
		err := w.AWS.AddNodegroup(fakeaws.Nodegroup{Cluster: harness.EKSCluster, Name: fmt.Sprintf("side-%02d", i),
			InstanceTypes: []string{harness.EKSType}, MinSize: 0, MaxSize: 2, DesiredSize: 0})
		must(t, w, err)
	}
	plans := make([]fakeslack.Message, n)
	for i := range n {
		id := fmt.Sprintf("e2e-side-%02d", i)
		_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, fmt.Sprintf("capacity scale group=side-%02d count=1 request-id=%s", i, id))
		must(t, w, err)
		plans[i], err = w.WaitText(ctx, time.Minute, harness.OpsChannel, id)
		must(t, w, err)
		_, err = w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval)
		must(t, w, err)
	}
	// The plan messages take Slack's per-channel pace to show their buttons; the lead approves once all show,
	// one click after the other.
	for i := range n {
		_, err := w.WaitMessage(ctx, 2*time.Minute, harness.OpsChannel, func(m fakeslack.Message) bool {
			return m.TS == plans[i].TS && harness.HasButton(m, handlers.ActionApprove)
		})
		must(t, w, err)
	}
	approved := time.Now()
	for i := range n {
		d, err := w.Click(ctx, harness.Lead1, harness.OpsChannel, plans[i].TS, handlers.ActionApprove)
		must(t, w, err)
		_, err = d.Ack(ctx)
		must(t, w, err)
	}
	clicked := time.Since(approved)
	// All twenty writes reach AWS while every change still waits for its minute-long transition: none waited for
	// a slot another change held while only waiting.
	must(t, w, harness.Eventually(ctx, longTransition/2, func() (bool, error) {
		return w.AWS.Calls(fakeaws.OpEKSUpdateNodegroupConfig) == n, nil
	}))
	allSent := time.Since(approved)
	for i := range n {
		id := fmt.Sprintf("e2e-side-%02d", i)
		rec, err := w.Record(ctx, id)
		must(t, w, err)
		if rec.Phase != ops.PhaseExecuting || rec.Execution == nil || rec.Execution.WriteAccepted.IsZero() {
			t.Errorf("%s is %s once all twenty writes reached AWS, want executing with its write accepted", id, rec.Phase)
		}
	}
	// Done as the records say, then as each thread tells it: the threads share the channel's chat.postMessage
	// budget (1/s across replicas), so telling twenty requests' steps takes its own time.
	var done, told, firstDone, gap time.Duration
	doneAt := make([]time.Duration, n)
	for i := range n {
		id := fmt.Sprintf("e2e-side-%02d", i)
		rec, err := w.WaitPhase(ctx, 4*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted)
		must(t, w, err)
		doneAt[i] = rec.UpdatedAt.Sub(approved)
		done = max(done, doneAt[i])
		if firstDone == 0 || doneAt[i] < firstDone {
			firstDone = doneAt[i]
		}
		if rec.Phase != ops.PhaseSucceeded {
			t.Errorf("%s ended %s: %v", id, rec.Phase, rec.Errors)
		}
	}
	for i := range n {
		id := fmt.Sprintf("e2e-side-%02d", i)
		m, err := w.WaitInThread(ctx, 4*time.Minute, harness.OpsChannel, plans[i].TS, id+": ", "succeeded")
		must(t, w, err)
		told = max(told, m.PostedAt.Sub(approved))
		gap = max(gap, m.PostedAt.Sub(approved)-doneAt[i])
		toldOnce(t, w, plans[i], id)
	}
	if c := w.AWS.Calls(fakeaws.OpEKSUpdateNodegroupConfig); c != n {
		t.Errorf("UpdateNodegroupConfig called %d times, want %d", c, n)
	}
	t.Logf("%d changes of %s each on %d replicas: approved over %s, all written %s after the first approval, done from %s to %s after it, all told done %s after it (told at most %s after its own end)",
		n, longTransition, len(w.Replicas), clicked.Round(time.Millisecond), allSent.Round(time.Millisecond), firstDone.Round(time.Second),
		done.Round(time.Second), told.Round(time.Second), gap.Round(time.Second))
}
