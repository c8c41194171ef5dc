package scenarios

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
)

// Capacity scale of an instance group: plan with cost, approval, fake AWS transitions, kwok nodes appear, the
// thread reports the new count; `/hp status` shows them.
func TestCapacityScaleAddsNodes(t *testing.T) {
	w := world(t, harness.Options{TransitionDelay: 3 * time.Second})
	ctx := t.Context()
	const id = "e2e-scale-1"
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, "capacity scale group="+harness.GPUGroup+" count=3 request-id="+id)
	must(t, w, err)
	plan, err := w.WaitText(ctx, time.Minute, harness.OpsChannel, id, "scale-capacity")
	must(t, w, err)
	rec, err := w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval)
	must(t, w, err)
	want := 2 * harness.GPUPrice
	if rec.Plan == nil || math.Abs(rec.Plan.Cost.HourlyDelta-want) > 0.01 {
		t.Errorf("plan cost = %+v, want Δ $%.2f/h (2 × %s)", rec.Plan, want, harness.GPUType)
	}
	if plan, err = w.WaitCurrent(ctx, 30*time.Second, harness.OpsChannel, plan.TS, "126.59"); err != nil {
		t.Errorf("plan message does not show the Δ cost $126.59/h: %v", err)
	}
	if w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster) != 0 {
		t.Fatalf("UpdateCluster called %d times before approval", w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster))
	}

	_, err = w.Click(ctx, harness.Lead1, harness.OpsChannel, plan.TS, handlers.ActionApprove)
	must(t, w, err)
	_, err = w.WaitPhase(ctx, 2*time.Minute, id, ops.PhaseSucceeded)
	must(t, w, err)
	if err := w.Nodes.Err(); err != nil {
		t.Fatalf("mirroring AWS nodes into the API server: %v", err)
	}
	nodes, err := w.ClusterNodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("API server nodes of %s = %v (%v), want 3", harness.GPUGroup, nodes, err)
	}
	if n := w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster called %d times, want 1", n)
	}
	hp, _ := w.AWS.HyperPodCluster(harness.HyperPod)
	if g := hp.InstanceGroups[0]; g.CurrentCount != 3 || hp.Status != "InService" {
		t.Errorf("fake AWS: status %s, %s current %d; want InService with 3", hp.Status, g.Name, g.CurrentCount)
	}
	_, err = w.WaitInThread(ctx, 30*time.Second, harness.OpsChannel, plan.TS, "from 1 to 3")
	must(t, w, err)
	// HyperPod's cluster events of the scale are told in the thread, each once, whichever replica observed it.
	_, err = w.WaitInThread(ctx, 30*time.Second, harness.OpsChannel, plan.TS, "HyperPod: instance group "+harness.GPUGroup+": scaling completed: 3 instances")
	must(t, w, err)
	for _, words := range []string{"scaling started: 1 to 3 instances", "scaling completed: 3 instances"} {
		if n := repliesSaying(w, plan.TS, words); n != 1 {
			t.Errorf("the thread has %d replies saying %q, want 1", n, words)
		}
	}

	for _, n := range nodes {
		if _, err := plane.WaitNodeReady(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	_, err = w.Slash(ctx, harness.Alice, harness.OpsChannel, "status")
	must(t, w, err)
	_, err = w.WaitText(ctx, time.Minute, harness.OpsChannel, harness.Cluster, "3/3 nodes ready")
	must(t, w, err)
}

// repliesSaying counts the replies in the thread of ts whose text holds words.
func repliesSaying(w *harness.World, ts, words string) int {
	n := 0
	for _, m := range w.Slack.Snapshot().Messages[harness.OpsChannel] {
		if m.ThreadTS == ts && m.TS != ts && !m.Deleted && strings.Contains(harness.MessageText(m), words) {
			n++
		}
	}
	return n
}
