package handlers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// nudgedRecord is sampleRecord waiting since t0 for 2 of leads (U0LEAD1 voted), reminded at +10m and escalated to
// managers at +20m, with entry 1 the reminder and entry 2 the escalation.
func nudgedRecord() *ops.Record {
	rec := tellingRecord(ops.PhaseAwaitingApproval)
	a := &rec.Approval
	a.ApproverUsers, a.ApproverUserGroups = []string{"U0LEAD1", "U0LEAD2"}, []string{"S0LEADS"}
	a.RemindAt, a.Reminded, a.RemindUsers = t0.Add(10*time.Minute), true, []string{"U0LEAD2", "U0LEADG"}
	a.EscalateAt, a.EscalateTo, a.Escalated = t0.Add(20*time.Minute), "managers", true
	a.EscalateUsers, a.EscalateUserGroups = []string{"U0MGR1"}, []string{"S0MGRS"}
	rec.History = []ops.Transition{
		{From: ops.PhasePlanned, To: ops.PhaseAwaitingApproval, At: t0, By: rec.Request.Initiator, Kind: ops.KindPhase},
		{From: ops.PhaseAwaitingApproval, To: ops.PhaseAwaitingApproval, At: t0.Add(10 * time.Minute), Kind: ops.KindReminder,
			Note: "reminded: 1 of 2 approvals so far"},
		{From: ops.PhaseAwaitingApproval, To: ops.PhaseAwaitingApproval, At: t0.Add(20 * time.Minute), Kind: ops.KindEscalation,
			Note: "escalated to managers: 1 of 2 approvals so far"},
	}
	return rec
}

func TestNudgeGolden(t *testing.T) {
	rec := nudgedRecord()
	reminder := ReminderReply(rec, rec.History[1])
	golden(t, "reminder_reply", Rendered{Msg: reminder})
	noneResolved := rec.Clone()
	noneResolved.Approval.RemindUsers = nil
	golden(t, "reminder_reply_unresolved", Rendered{Msg: ReminderReply(noneResolved, rec.History[1])})
	esc := EscalationMessage(testCatalog(), rec, rec.History[2])
	checkLimits(t, esc)
	golden(t, "escalation_message", Rendered{Msg: esc})
	golden(t, "escalation_reply", Rendered{Msg: EscalationReply(rec, "C0APPROVALS")})
	if !strings.HasPrefix(reminder.Text, "<@U0LEAD2> <@U0LEADG> ") || strings.Contains(reminder.Text, "U0LEAD1") {
		t.Errorf("the reminder's notification is %q: want who has not voted first, not the lead who did", reminder.Text)
	}
	if !strings.HasPrefix(esc.Text, "<!subteam^S0MGRS> <@U0MGR1> ") || !strings.Contains(blocksJSON(esc), ActionApprove) {
		t.Errorf("the escalation is %q: want the second group mentioned first, and the Approve button", esc.Text)
	}
}

// The reminder and the escalation are told once each however often they are told again (a retry, a second
// replica), each as a new message that mentions who must act: the reminder in the request's thread; the
// escalation as a new message in the approvals channel with the buttons (then kept up to date like the plan
// message) and a note in the thread. An escalation whose answer was lost (500 after Slack posted it) is found, not
// posted again. Neither is told once the request was decided.
func TestNudgesToldOnceAsNewMessages(t *testing.T) {
	ctx := context.Background()
	srv, a, b := twoReplicas(t)
	rec := nudgedRecord()
	first := rec.Clone()
	first.History = first.History[:1]
	if err := a.Teller().Tell(ctx, first, 0); err != nil {
		t.Fatal(err)
	}
	srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: "C0APPROVALS", Status: http.StatusInternalServerError, After: true})
	for i := 1; i <= 2; i++ {
		if i == 2 {
			if err := a.Teller().Tell(ctx, rec, i); err == nil {
				t.Fatal("Tell succeeded although Slack answered 500")
			}
		}
		for _, h := range []*Handler{a, a, b} {
			if err := h.Teller().Tell(ctx, rec, i); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
	}
	plan := srv.Messages("C0OPS")[0]
	thread := replies(srv, "C0OPS", plan.TS)
	if len(thread) != 2 || !strings.HasPrefix(thread[0].Text, "<@U0LEAD2> <@U0LEADG> ") || !strings.Contains(thread[1].Text, "escalated to managers") {
		t.Fatalf("the thread holds %d replies (%+v), want the reminder mentioning who has not voted, then the escalation note", len(thread), thread)
	}
	asked := srv.Messages("C0APPROVALS")
	if len(asked) != 1 || !strings.HasPrefix(asked[0].Text, "<!subteam^S0MGRS> <@U0MGR1> ") {
		t.Fatalf("the approvals channel holds %+v, want one escalation message mentioning managers", asked)
	}
	if !a.isPlanMessage(ctx, rec.ID(), "C0APPROVALS", asked[0].TS) {
		t.Error("the escalation message is not kept as a plan message: its buttons would not follow the request")
	}
	approved := rec.Clone()
	approved.Phase, approved.Version = ops.PhaseApproved, rec.Version+1
	if err := a.Teller().Settle(ctx, approved); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages("C0APPROVALS")[0]; len(got.Revisions) == 0 || strings.Contains(string(got.Blocks), ActionApprove) {
		t.Error("the escalation message was not brought up to date when the request was approved")
	}
	// Decided before they are told: nothing more is posted.
	late := nudgedRecord()
	late.Request.ID, late.Phase = "req-late", ops.PhaseApproved
	for i := range late.History {
		if err := a.Teller().Tell(ctx, late, i); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.Messages("C0APPROVALS")); n != 1 {
		t.Errorf("the approvals channel holds %d messages, want no escalation of a decided request", n)
	}
}
