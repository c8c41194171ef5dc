package handlers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// The requester of R (U0MLENG, no approver) cannot take R back from the lead who took it over, so cannot resume
// it; the refusal names the rule and the way out, and the requester's Stop still works.
func TestTakeOverBackByRequesterRefused(t *testing.T) {
	ctx := context.Background()
	f := newMatrixFixture(t)
	if err := f.click(ctx, "U0LEAD", ActionTakeOver); err != nil {
		t.Fatal(err)
	}
	if got := f.r(t).Owner.ID; got != "U0LEAD" {
		t.Fatalf("owner after the lead's Take over is %s", got)
	}
	f.poster.sent = nil
	if err := f.click(ctx, "U0MLENG", ActionTakeOver); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(f.poster.sent)
	for _, want := range []string{string(ops.CodeNotAuthorized), "only approvers", "use Stop"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the requester's Take over answered %s, want it to say %q", raw, want)
		}
	}
	if got := f.r(t).Owner.ID; got != "U0LEAD" {
		t.Fatalf("owner after the requester's Take over is %s, want U0LEAD", got)
	}
	if err := f.click(ctx, "U0MLENG", ActionStop); err != nil {
		t.Fatal(err)
	}
	if got := f.r(t).Phase; got != ops.PhaseCancelled {
		t.Errorf("after the requester's Stop R is %s, want cancelled", got)
	}
}
