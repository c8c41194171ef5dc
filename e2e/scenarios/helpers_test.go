package scenarios

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// submit runs a slash command as Alice under request id and waits until it succeeded, approving it as Lead1 when
// policy asks for an approval. It is for a scenario's set-up steps, whose approvals are not what it tests.
func submit(t *testing.T, w *harness.World, id, text string) *ops.Record {
	t.Helper()
	ctx := t.Context()
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, text+" request-id="+id)
	must(t, w, err)
	rec, err := w.WaitPhase(ctx, time.Minute, id, ops.PhaseSucceeded, ops.PhaseAwaitingApproval)
	must(t, w, err)
	if rec.Phase == ops.PhaseAwaitingApproval {
		t.Logf("set-up request %s needs an approval: risk %+v", id, rec.Plan.Risk)
		msg := waitApprovable(t, w, harness.OpsChannel, id)
		_, err = w.Click(ctx, harness.Lead1, harness.OpsChannel, msg.TS, handlers.ActionApprove)
		must(t, w, err)
		rec, err = w.WaitPhase(ctx, time.Minute, id, ops.PhaseSucceeded)
		must(t, w, err)
	}
	return rec
}

// waitApprovable waits for the plan message of request id to offer Approve: it is posted at the request's first
// entry (received) and updated as the request moves on, so the message found first may not have its buttons yet.
func waitApprovable(t *testing.T, w *harness.World, channel, id string) fakeslack.Message {
	t.Helper()
	msg, err := w.WaitMessage(t.Context(), time.Minute, channel, func(m fakeslack.Message) bool {
		return m.ThreadTS == "" && strings.Contains(harness.MessageText(m), id) && harness.HasButton(m, handlers.ActionApprove)
	})
	must(t, w, err)
	return msg
}
