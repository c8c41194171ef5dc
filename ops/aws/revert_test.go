package aws

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
)

// TestRevertHyperPodScale: reverting a scale of a HyperPod group from 2 to 5 makes exactly one UpdateCluster,
// back to 2, however often it is asked; the two requests are linked both ways.
func TestRevertHyperPodScale(t *testing.T) {
	f := newFixture(t, fixtureOptions{gpuCount: 2})
	orig, err := f.engine.Submit(ctxT(t), scaleRequest("scale-up", testCluster, "gpu", 5))
	if err != nil || orig.Phase != ops.PhaseSucceeded {
		t.Fatalf("scale up: phase %v, err %v", orig, err)
	}
	if u := orig.Plan.Undo; !u.Revertible() || u.Operation != OpScaleCapacity || u.Params.IntOr("count", -1) != 2 {
		t.Fatalf("recorded undo = %+v, want scale-capacity count=2", u)
	}
	before := f.srv.Calls(fakeaws.OpSageMakerUpdateCluster)
	ask := ops.Request{Initiator: human("U0BOB"), Origin: "button"}
	rev, err := f.engine.Revert(ctxT(t), orig.ID(), ask)
	if err != nil || rev.Phase != ops.PhaseSucceeded {
		t.Fatalf("revert: %+v, err %v", rev, err)
	}
	// A second click, or a retried call, finds the revert and asks for nothing more.
	again, err := f.engine.Revert(ctxT(t), orig.ID(), ask)
	if err == nil || again != nil || codeOf(err) != ops.CodeNotRevertible || !strings.Contains(err.Error(), rev.ID()) {
		t.Fatalf("second revert = %v, %v; want E_NOT_REVERTIBLE naming %s", again, err, rev.ID())
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerUpdateCluster) - before; n != 1 {
		t.Errorf("UpdateCluster calls for the revert = %d, want 1", n)
	}
	hp, _ := f.srv.HyperPodCluster("ml-hp")
	for _, g := range hp.InstanceGroups {
		if g.Name == "gpu" && g.Count != 2 {
			t.Errorf("gpu count after the revert = %d, want 2", g.Count)
		}
	}
	if rev.Request.Reverts != orig.ID() || rev.Request.Operation != OpScaleCapacity || rev.Request.Initiator.ID != "U0BOB" {
		t.Errorf("revert request = %+v", rev.Request)
	}
	got, err := f.engine.Get(ctxT(t), orig.ID())
	must(t, err)
	if got.RevertedBy != rev.ID() || got.Phase != ops.PhaseSucceeded {
		t.Errorf("reverted record: revertedBy %q phase %s, want %q succeeded", got.RevertedBy, got.Phase, rev.ID())
	}
	if len(rev.Plan.Warnings) != 0 {
		t.Errorf("an unchanged target warns %q", rev.Plan.Warnings)
	}
}

// TestRevertAfterLaterScale: a revert of a scale the group changed since (a later request) says so in its plan and
// raises its risk.
func TestRevertAfterLaterScale(t *testing.T) {
	f := newFixture(t, fixtureOptions{gpuCount: 2})
	orig, err := f.engine.Submit(ctxT(t), scaleRequest("scale-up", testCluster, "gpu", 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.engine.Submit(ctxT(t), scaleRequest("scale-more", testCluster, "gpu", 6)); err != nil {
		t.Fatal(err)
	}
	rev, err := f.engine.Revert(ctxT(t), orig.ID(), ops.Request{Initiator: human("U0BOB")})
	if err != nil {
		t.Fatalf("revert: %v", err)
	}
	w := strings.Join(rev.Plan.Warnings, "\n")
	for _, want := range []string{"changed since scale-up", "InstanceCount is 6, not the 5 it left", "request scale-more (scale-capacity) changed"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %q", w, want)
		}
	}
	var reasons []string
	for _, r := range rev.Plan.Risk.Reasons {
		reasons = append(reasons, r.Text)
	}
	if !strings.Contains(strings.Join(reasons, "\n"), "the target changed since scale-up") || rev.Plan.Risk.Level < ops.RiskHigh {
		t.Errorf("risk %s %q: want high at least (a scale down, raised) naming the change", rev.Plan.Risk.Level, reasons)
	}
}
