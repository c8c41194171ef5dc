package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// An Approve click counts for the plan its message showed: after the plan changed, the old button, and a button
// posted before values carried the plan hash, are refused with "the plan changed, look again", the message is
// redrawn with the current plan's button, and a click on that one approves.
func TestApproveBindsToTheShownPlan(t *testing.T) {
	ctx := context.Background()
	f := newMatrixFixture(t)
	earlier := "req-r@0ld" // drawn when R had an earlier plan (a re-plan since found the cluster changed)
	for _, value := range []string{earlier, "req-r"} {
		f.poster.sent = nil
		if err := f.clickValue(ctx, "U0LEAD", ActionApprove, value); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(f.poster.sent)
		for _, want := range []string{string(ops.CodeStalePlan), "the plan changed, look again", "click Approve there again", ApproveValue(f.r(t))} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("click with %q answered %s, want it to say %q (the refusal, and the message redrawn)", value, raw, want)
			}
		}
		if r := f.r(t); r.Phase != ops.PhaseAwaitingApproval || len(r.Approval.Votes) != 0 {
			t.Fatalf("click with %q: R is %s with votes %+v, want awaiting approval with none", value, r.Phase, r.Approval.Votes)
		}
	}
	if err := f.clickValue(ctx, "U0LEAD", ActionApprove, ApproveValue(f.r(t))); err != nil {
		t.Fatal(err)
	}
	if r := f.r(t); r.Phase != ops.PhaseSucceeded || len(r.Approval.Votes) != 1 || r.Approval.Votes[0].PlanHash != r.Plan.Hash {
		t.Errorf("the click on the redrawn message left R %s with votes %+v, want it run on the lead's vote (%s)", r.Phase, r.Approval.Votes, f.poster.last(t))
	}
}
