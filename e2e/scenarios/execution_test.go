package scenarios

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// longTransition is how long the fake AWS takes to carry out an accepted change in these scenarios: three times
// the Slack-side handling timeout the harness configures (slack.handleTimeout: 20s), as a real HyperPod scale-up
// outlasts every timeout of a Slack interaction.
const longTransition = 60 * time.Second

// approveScale asks to scale the GPU group and approves it as Lead1; it returns the plan message.
func approveScale(t *testing.T, w *harness.World, id string, count int) fakeslack.Message {
	t.Helper()
	ctx := t.Context()
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, fmt.Sprintf("capacity scale group=%s count=%d request-id=%s", harness.GPUGroup, count, id))
	must(t, w, err)
	plan, err := w.WaitText(ctx, time.Minute, harness.OpsChannel, id)
	must(t, w, err)
	_, err = w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval)
	must(t, w, err)
	_, err = w.Click(ctx, harness.Lead1, harness.OpsChannel, plan.TS, handlers.ActionApprove)
	must(t, w, err)
	return plan
}

// toldOnce checks that the request's thread says it succeeded exactly once.
func toldOnce(t *testing.T, w *harness.World, plan fakeslack.Message, id string) {
	t.Helper()
	_, err := w.WaitInThread(t.Context(), time.Minute, harness.OpsChannel, plan.TS, "succeeded")
	must(t, w, err)
	n := 0
	for _, m := range w.Slack.Snapshot().Messages[harness.OpsChannel] {
		if m.ThreadTS == plan.TS && m.TS != plan.TS && strings.HasPrefix(handlers.Unaddressed(m.Text), id+": ") && strings.Contains(strings.ToLower(m.Text), "succeeded") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%s: the thread told %d times that it succeeded, want once", id, n)
	}
}

// A capacity change whose AWS transition lasts three times the Slack-side timeout succeeds and is told once: the
// execution runs on the executors, within its capacity budget, not in the Slack interaction.
func TestCapacityChangeOutlivesSlackTimeout(t *testing.T) {
	w := world(t, harness.Options{TransitionDelay: longTransition})
	const id = "e2e-long-1"
	start := time.Now()
	plan := approveScale(t, w, id, 2)
	rec, err := w.WaitPhase(t.Context(), 4*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted)
	must(t, w, err)
	if rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("the long change ended %s: %v", rec.Phase, rec.Errors)
	}
	if took := time.Since(start); took < longTransition {
		t.Fatalf("succeeded after %s, before the fake AWS's %s transition could finish: the test proves nothing", took, longTransition)
	}
	if n := w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster called %d times, want 1", n)
	}
	toldOnce(t, w, plan, id)
}

// Both replicas are replaced one after the other (SIGTERM, then a new process) while a HyperPod scale is in
// flight: the stopping replica hands its observation over at once, the other resumes it by observing only, and
// the request ends succeeded without anyone taking it over, told once, with exactly one UpdateCluster.
func TestRollingReplacementDuringScale(t *testing.T) {
	w := world(t, harness.Options{TransitionDelay: longTransition})
	ctx := t.Context()
	const id = "e2e-rolling-1"
	plan := approveScale(t, w, id, 2)
	_, err := w.WaitRecord(ctx, time.Minute, id, func(r *ops.Record) bool {
		return r.Execution != nil && !r.Execution.WriteAccepted.IsZero()
	})
	must(t, w, err)
	old := append([]*harness.Replica(nil), w.Replicas...)
	for i, r := range old {
		stopped := time.Now()
		if err := r.Stop(20 * time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", r.Name, err, r.LogTail())
		}
		t.Logf("%s stopped %s after SIGTERM", r.Name, time.Since(stopped).Round(time.Millisecond))
		if _, err := w.StartReplica(ctx, fmt.Sprintf("replica-new-%d", i), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := w.WaitPhase(ctx, 4*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted)
	must(t, w, err)
	if rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("after the rolling replacement the request ended %s: %v", rec.Phase, rec.Errors)
	}
	if rec.Owner.ID != harness.Alice {
		t.Errorf("owner is %s, want Alice: nobody had to take it over", rec.Owner.ID)
	}
	if rec.Execution.Handovers < 1 {
		t.Errorf("the record shows %d hand-overs, want at least 1 (was the scale already done before the first SIGTERM?)", rec.Execution.Handovers)
	}
	if n := w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster called %d times, want exactly 1", n)
	}
	toldOnce(t, w, plan, id)
}

// A replica killed (SIGKILL) while it observes a recorded write: the other replica resumes it once the lease
// lapses, observing only; no second UpdateCluster, nobody has to take it over.
func TestKilledReplicaIsResumedByTheOther(t *testing.T) {
	w := world(t, harness.Options{TransitionDelay: longTransition})
	ctx := t.Context()
	const id = "e2e-crash-1"
	plan := approveScale(t, w, id, 2)
	executing, err := w.WaitRecord(ctx, time.Minute, id, func(r *ops.Record) bool {
		return r.Execution != nil && !r.Execution.WriteAccepted.IsZero()
	})
	must(t, w, err)
	var victim *harness.Replica
	for _, r := range w.Replicas {
		if strings.Contains(r.Log(), executing.Replica) {
			victim = r
		}
	}
	if victim == nil {
		t.Fatalf("no replica logged the engine name %s that executes %s", executing.Replica, id)
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	rec, err := w.WaitPhase(ctx, 4*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted)
	must(t, w, err)
	if rec.Phase != ops.PhaseSucceeded || rec.Replica == executing.Replica {
		t.Fatalf("after killing %s the request ended %s on %s: %v", victim.Name, rec.Phase, rec.Replica, rec.Errors)
	}
	if n := w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster called %d times, want 1: a recorded write is observed, never sent again", n)
	}
	toldOnce(t, w, plan, id)
}

// Twenty node-group changes of a minute each in flight on two replicas; meanwhile other people's slash commands
// and clicks are all acked and answered, none with E_BUSY, and every change succeeds once. The targets (ack within
// 3 s, answer within 5 s) are speed figures: the test logs the slowest of each against them and only fails past a
// liveness bound (30 s), so a loaded machine cannot make it flaky; the benchmark tier measures the ratio properly.
func TestLongChangesKeepSlackResponsive(t *testing.T) {
	w := world(t, harness.Options{TransitionDelay: longTransition})
	ctx := t.Context()
	const n = 20
	t.Cleanup(func() { removeNodegroupNodes(t, w) })
	for i := range n {
		err := w.AWS.AddNodegroup(fakeaws.Nodegroup{Cluster: harness.EKSCluster, Name: fmt.Sprintf("ng-%02d", i),
			InstanceTypes: []string{harness.EKSType}, MinSize: 0, MaxSize: 2, DesiredSize: 0})
		must(t, w, err)
	}
	// A replica's first plan of a kind reads API discovery and the GPU nodes cold; that start-up cost is not what is
	// measured here, so one dry run goes first, before anything is in flight (its time is logged).
	for i := range 2 * len(w.Replicas) {
		name := fmt.Sprintf("warm-up-%d", i)
		warm := time.Now()
		_, err := w.Slash(ctx, harness.Lead2, harness.OpsChannel, "train submit name="+name+" image=public.ecr.aws/docker/library/busybox:latest gpus=8 max-hours=1 dry-run")
		must(t, w, err)
		_, err = w.WaitText(ctx, time.Minute, harness.OpsChannel, name)
		must(t, w, err)
		t.Logf("dry run %s, idle, answered after %s", name, time.Since(warm).Round(time.Millisecond))
	}
	plans := make([]fakeslack.Message, n)
	for i := range n {
		id := fmt.Sprintf("e2e-ng-%02d", i)
		_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, fmt.Sprintf("capacity scale group=ng-%02d count=1 request-id=%s", i, id))
		must(t, w, err)
		plans[i], err = w.WaitText(ctx, time.Minute, harness.OpsChannel, id)
		must(t, w, err)
		_, err = w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval)
		must(t, w, err)
	}
	// Twenty plan messages at once take Slack's per-channel pace (1 post/s) and chat.update's (50/min) to show their
	// buttons; the lead clicks each once it shows, as a person would.
	for i := range n {
		_, err := w.WaitMessage(ctx, 2*time.Minute, harness.OpsChannel, func(m fakeslack.Message) bool {
			return m.TS == plans[i].TS && harness.HasButton(m, handlers.ActionApprove)
		})
		must(t, w, err)
	}
	const ackTarget, answerTarget, liveness = 3 * time.Second, 5 * time.Second, 30 * time.Second
	var mu sync.Mutex
	var slow []string
	var maxAck, maxAnswer time.Duration
	measure := func(what string, d fakeslack.Delivery, answered func(context.Context) error) {
		start := time.Now()
		ack, err := d.Ack(ctx)
		actx, cancel := context.WithTimeout(ctx, liveness)
		defer cancel()
		aerr := answered(actx)
		took := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		maxAck, maxAnswer = max(maxAck, ack.Latency), max(maxAnswer, took)
		switch {
		case err != nil || ack.Latency > liveness:
			slow = append(slow, fmt.Sprintf("%s: ack %v after %s", what, err, ack.Latency))
		case aerr != nil:
			slow = append(slow, fmt.Sprintf("%s: not answered within %s: %v", what, liveness, aerr))
		}
		if ack.Latency > ackTarget || took > answerTarget {
			t.Logf("%s: acked after %s, answered after %s (targets %s / %s)", what, ack.Latency.Round(time.Millisecond),
				took.Round(time.Millisecond), ackTarget, answerTarget)
		}
	}
	// The approvals are the clicks: each is acked, and recorded, while the earlier changes are in flight.
	for i := range n {
		id := fmt.Sprintf("e2e-ng-%02d", i)
		d, err := w.Click(ctx, harness.Lead1, harness.OpsChannel, plans[i].TS, handlers.ActionApprove)
		must(t, w, err)
		measure("approve "+id, d, func(ctx context.Context) error {
			return harness.Eventually(ctx, liveness, func() (bool, error) {
				r, err := w.Record(ctx, id)
				return err == nil && r.Phase != ops.PhaseAwaitingApproval, err
			})
		})
	}
	must(t, w, harness.Eventually(ctx, time.Minute, func() (bool, error) {
		return w.AWS.Calls(fakeaws.OpEKSUpdateNodegroupConfig) == n, nil
	}))
	// Another engineer's dry runs while the twenty changes are in flight.
	for i := range 10 {
		name := fmt.Sprintf("dry-%02d", i)
		d, err := w.Slash(ctx, harness.Lead2, harness.OpsChannel, "train submit name="+name+" image=public.ecr.aws/docker/library/busybox:latest gpus=8 max-hours=1 dry-run")
		must(t, w, err)
		measure("dry run "+name, d, func(ctx context.Context) error {
			_, err := w.WaitText(ctx, liveness, harness.OpsChannel, name)
			return err
		})
	}
	t.Logf("while %d one-minute changes were in flight: slowest ack %s (target %s), slowest answer %s (target %s)",
		n, maxAck.Round(time.Millisecond), ackTarget, maxAnswer.Round(time.Millisecond), answerTarget)
	for _, e := range w.Slack.Snapshot().Ephemerals {
		if strings.Contains(e.Text+string(e.Blocks), string(ops.CodeBusy)) || strings.Contains(e.Text, "busy right now") {
			slow = append(slow, "told busy: "+e.Text)
		}
	}
	for _, s := range slow {
		t.Error(s)
	}
	for i := range n {
		id := fmt.Sprintf("e2e-ng-%02d", i)
		rec, err := w.WaitPhase(ctx, 4*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted)
		must(t, w, err)
		if rec.Phase != ops.PhaseSucceeded {
			t.Errorf("%s ended %s: %v", id, rec.Phase, rec.Errors)
		}
	}
	if c := w.AWS.Calls(fakeaws.OpEKSUpdateNodegroupConfig); c != n {
		t.Errorf("UpdateNodegroupConfig called %d times, want %d", c, n)
	}
}

// removeNodegroupNodes deletes the API server nodes of the EKS node groups a scenario added, so no later scenario
// counts them.
func removeNodegroupNodes(t *testing.T, w *harness.World) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes, err := w.Plane.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "eks.amazonaws.com/nodegroup"})
	if err != nil {
		t.Errorf("list the node groups' nodes: %v", err)
		return
	}
	for _, n := range nodes.Items {
		if err := w.Plane.RemoveNode(ctx, n.Name); err != nil {
			t.Errorf("remove node %s: %v", n.Name, err)
		}
	}
}

// Lost UpdateCluster answer (5xx after apply): one UpdateCluster reaches AWS, the request ends succeeded, told
// once. The bot reads the change back instead of letting the SDK send UpdateCluster again (which AWS would answer
// with ConflictException while the first one runs).
func TestLostUpdateClusterAnswer(t *testing.T) {
	w := world(t, harness.Options{TransitionDelay: 3 * time.Second})
	ctx := t.Context()
	const id = "e2e-lost-answer-1"
	w.AWS.Inject(fakeaws.Fault{Op: fakeaws.OpSageMakerUpdateCluster, When: fakeaws.FaultAfter, Status: 500,
		Code: "InternalFailure", Message: "We encountered an internal error. Please try again."})
	plan := approveScale(t, w, id, 2)
	rec, err := w.WaitPhase(ctx, 4*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted)
	must(t, w, err)
	if rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("the request whose UpdateCluster answer was lost ended %s: %v", rec.Phase, rec.Errors)
	}
	if n, applied := w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster), w.AWS.Applied(fakeaws.OpSageMakerUpdateCluster); n != 1 || applied != 1 {
		t.Errorf("UpdateCluster reached AWS %d times and took effect %d times, want 1 and 1", n, applied)
	}
	hp, _ := w.AWS.HyperPodCluster(harness.HyperPod)
	if g := hp.InstanceGroups[0]; g.Count != 2 || hp.Status != "InService" {
		t.Errorf("fake AWS: status %s, %s targets %d; want InService with 2", hp.Status, g.Name, g.Count)
	}
	for _, told := range []string{"answer to the change was lost", "so UpdateCluster took effect"} {
		_, err = w.WaitInThread(ctx, time.Minute, harness.OpsChannel, plan.TS, told)
		must(t, w, err)
	}
	toldOnce(t, w, plan, id)
}
