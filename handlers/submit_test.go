package handlers

import (
	"context"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// ackRecorder is the runtime's ack of one submission: in time (the modal shows the answer) or not.
type ackRecorder struct {
	inTime bool
	calls  int
	resp   *slack.ViewSubmissionResponse
}

func (a *ackRecorder) ack(r *slack.ViewSubmissionResponse) bool {
	a.calls++
	if a.calls > 1 {
		return false
	}
	a.resp = r
	return a.inTime
}

// glassSubmission is alice's submit of the break-glass modal opened on request id.
func (f *glassFixture) glassSubmission(t *testing.T, id, reason string) slack.InteractionCallback {
	t.Helper()
	f.click(t, "U0ALICE", "C0OPS", ActionBreakGlass, id)
	v, ok := f.poster.takeView()
	if !ok {
		t.Fatalf("no break-glass modal opened on %s", id)
	}
	var sub slack.InteractionCallback
	sub.Type, sub.User.ID = slack.InteractionTypeViewSubmission, "U0ALICE"
	sub.View.CallbackID, sub.View.PrivateMetadata = BreakGlassCallback, v.PrivateMetadata
	sub.View.State = &slack.ViewState{Values: map[string]map[string]slack.BlockAction{glassBlock: {glassAction: {Value: reason}}}}
	return sub
}

// A modal's submit the engine refuses is answered in the modal (response_action errors under the reason, with the
// code, the rule and the next step) when the ack is still in time, and privately when the runtime had to close the
// modal first; the form's own check (no reason) is answered in the modal without asking the engine; an accepted
// submit closes the modal. The ack is given once.
func TestModalSubmitRefusedInTheModal(t *testing.T) {
	ctx := context.Background()
	f := newGlassFixture(t)
	f.slash(t, "U0ALICE", "req-1")
	f.slash(t, "U0ALICE", "req-2")

	empty := &ackRecorder{inTime: true}
	if err := f.a.Submit(ctx, f.glassSubmission(t, "req-1", ""), empty.ack); err != nil {
		t.Fatal(err)
	}
	if empty.calls != 1 || empty.resp == nil || !strings.Contains(empty.resp.Errors[glassBlock], "say why") {
		t.Fatalf("an empty reason was acked %d time(s) with %+v, want the form's refusal under the reason", empty.calls, empty.resp)
	}
	accepted := &ackRecorder{inTime: true}
	if err := f.a.Submit(ctx, f.glassSubmission(t, "req-1", "web is down"), accepted.ack); err != nil {
		t.Fatal(err)
	}
	if accepted.calls != 1 || accepted.resp != nil || f.get(t, "req-1").BreakGlass == nil {
		t.Fatalf("the accepted break-glass was acked %d time(s) with %+v, want once, empty (the modal closes)", accepted.calls, accepted.resp)
	}

	refused := &ackRecorder{inTime: true}
	if err := f.a.Submit(ctx, f.glassSubmission(t, "req-2", "still down"), refused.ack); err != nil {
		t.Fatal(err)
	}
	e := ""
	if refused.resp != nil {
		e = refused.resp.Errors[glassBlock]
	}
	if refused.calls != 1 || refused.resp == nil || refused.resp.ResponseAction != slack.RAErrors ||
		!strings.Contains(e, "E_BREAK_GLASS_UNACKNOWLEDGED") || !strings.Contains(e, "req-1") || !strings.Contains(e, "press Acknowledge") {
		t.Fatalf("the second break-glass was acked %d time(s) with %+v, want E_BREAK_GLASS_UNACKNOWLEDGED under the reason, naming req-1 and the next step", refused.calls, refused.resp)
	}
	if got := f.lastEphemeral("U0ALICE"); strings.Contains(got, "E_BREAK_GLASS_UNACKNOWLEDGED") {
		t.Errorf("the refusal shown in the modal was told privately too: %q", got)
	}

	// Too late for the modal: the refusal is told privately.
	late := &ackRecorder{inTime: false}
	if err := f.a.Submit(ctx, f.glassSubmission(t, "req-2", "still down"), late.ack); err != nil {
		t.Fatal(err)
	}
	if got := f.lastEphemeral("U0ALICE"); !strings.Contains(got, "E_BREAK_GLASS_UNACKNOWLEDGED") {
		t.Errorf("a refusal the modal could not show was told %q, want E_BREAK_GLASS_UNACKNOWLEDGED privately", got)
	}
	if rec := f.get(t, "req-2"); rec.Phase != ops.PhaseAwaitingApproval {
		t.Errorf("req-2 is %s after refused break-glasses", rec.Phase)
	}
}

// A refusal of a field the form has goes under that field's input; others under the form's first input.
func TestModalRefusalUnderItsField(t *testing.T) {
	s := submission{block: grantTargetBlock, fields: grantFieldBlocks}
	resp := modalRefusal(s, ops.Errors{
		ops.Errorf(ops.CodeInvalidArgument, "hours", "give at most 8 hours", "a grant lasts at most 8 hours, not 9"),
		ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead", "you may not approve it"),
	})
	if !strings.Contains(resp.Errors[grantHoursBlock], "E_INVALID_ARGUMENT hours: a grant lasts at most 8 hours, not 9 — give at most 8 hours") ||
		!strings.Contains(resp.Errors[grantTargetBlock], "E_NOT_AUTHORIZED: you may not approve it — ask a lead") || len(resp.Errors) != 2 {
		t.Errorf("the refusal was shown as %v", resp.Errors)
	}
}
