package bot

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// Break-glass on two replicas sharing a real Redis, through Slack: alice, on call, breaks glass on her medium-risk
// request and it runs without a lead's vote; the approvals channel gets one notice (told once across the replicas)
// mentioning the leads with the badge and her reason; her second break-glass is refused naming the first until
// lead2 (a lead through the user group S0LEADS) presses Acknowledge on the notice; then it goes through.
func TestBreakGlassOnTwoReplicas(t *testing.T) {
	edit := func(c *config.Config) {
		c.Approvals.Groups["oncall"] = config.ApproverGroup{Users: []string{userAlice}}
		c.Approvals.Rules[1].BreakGlass = "oncall" // high and medium: 1 of leads
	}
	h := startWith(t, harnessOptions{replica: "a", edit: edit})
	b := h.launch(harnessOptions{replica: "b", edit: edit})
	t.Cleanup(func() { b.stop(t) })
	h.waitConnected(2)

	breakGlass := func(id, reason string) {
		t.Helper()
		h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
		s := h.waitFor("the plan of "+id, func(s fakeslack.Snapshot) bool {
			return len(mentioning(topLevel(s, chOps), id)) == 1 && hasButton(mentioning(topLevel(s, chOps), id)[0], handlers.ActionBreakGlass)
		})
		views := len(s.Views)
		h.click(userAlice, chOps, mentioning(topLevel(s, chOps), id)[0].TS, handlers.ActionBreakGlass)
		s = h.waitFor("the break-glass modal", func(s fakeslack.Snapshot) bool { return len(s.Views) == views+1 })
		view := s.Views[views]
		if view.CallbackID != handlers.BreakGlassCallback {
			t.Fatalf("the click opened %q", view.CallbackID)
		}
		if _, err := h.srv.SubmitView(h.ctx(), fakeslack.Submission{ViewID: view.ID, User: userAlice,
			Values: map[string]map[string]any{"reason": {"glass_reason": fakeslack.TextValue(reason)}}}); err != nil {
			t.Fatal(err)
		}
	}

	breakGlass("glass-1", "w1 is down for customers")
	rec := h.waitPhase("glass-1", ops.PhaseSucceeded)
	if rec.Approval.Received() != 1 || rec.BreakGlass == nil || rec.BreakGlass.Reason != "w1 is down for customers" {
		t.Fatalf("glass-1 ran with %d vote(s), break-glass %+v; want alice's alone, with her reason", rec.Approval.Received(), rec.BreakGlass)
	}
	s := h.waitFor("the break-glass reply in the thread", func(s fakeslack.Snapshot) bool {
		plan := mentioning(topLevel(s, chOps), "glass-1")
		return len(plan) == 1 && len(mentioning(s.Thread(chOps, plan[0].TS), handlers.GlassBadge)) > 0
	})
	notices := mentioning(topLevel(s, chApprove), handlers.GlassBadge)
	if len(notices) != 1 || !strings.HasPrefix(notices[0].Text, "<!subteam^S0LEADS> <@U0LEAD1> ") ||
		!strings.Contains(string(notices[0].Blocks), "w1 is down for customers") || !hasButton(notices[0], handlers.ActionAcknowledgeGlass) {
		t.Fatalf("the approvals channel holds %d break-glass notices (%+v), want one mentioning the leads, with the reason and Acknowledge", len(notices), notices)
	}

	breakGlass("glass-2", "w2 too")
	h.waitFor("the refusal of the second break-glass", func(s fakeslack.Snapshot) bool {
		return ephemeralWith(s, userAlice, "E_BREAK_GLASS_UNACKNOWLEDGED") && ephemeralWith(s, userAlice, "glass-1")
	})
	if rec := h.record("glass-2"); rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("glass-2 is %s after a refused break-glass, want awaiting approval", rec.Phase)
	}
	if runs := h.ops["scale-widget"].runs.Load(); runs != 1 {
		t.Fatalf("scale-widget ran %d times, want once (glass-1)", runs)
	}

	h.click(userLead2, chApprove, notices[0].TS, handlers.ActionAcknowledgeGlass)
	h.waitFor("the acknowledged notice and alice told", func(s fakeslack.Snapshot) bool {
		n, _ := s.Message(chApprove, notices[0].TS)
		plan := mentioning(topLevel(s, chOps), "glass-1")
		told := false
		for _, r := range s.Thread(chOps, plan[0].TS) {
			told = told || strings.HasPrefix(r.Text, "<@U0ALICE> ") && strings.Contains(r.Text, "acknowledged")
		}
		return !hasButton(n, handlers.ActionAcknowledgeGlass) && strings.Contains(string(n.Blocks), "Acknowledged") && told
	})
	if rec := h.record("glass-1"); rec.BreakGlass.AcknowledgedBy == nil || rec.BreakGlass.AcknowledgedBy.ID != userLead2 {
		t.Fatalf("glass-1's break-glass acknowledged by %+v, want lead2", rec.BreakGlass.AcknowledgedBy)
	}
	h.click(userAlice, chOps, mentioning(topLevel(h.srv.Snapshot(), chOps), "glass-2")[0].TS, handlers.ActionBreakGlass)
	s = h.waitFor("the modal again", func(s fakeslack.Snapshot) bool { return len(s.Views) == 3 })
	if _, err := h.srv.SubmitView(h.ctx(), fakeslack.Submission{ViewID: s.Views[2].ID, User: userAlice,
		Values: map[string]map[string]any{"reason": {"glass_reason": fakeslack.TextValue("w2 too")}}}); err != nil {
		t.Fatal(err)
	}
	h.waitPhase("glass-2", ops.PhaseSucceeded)
	if n := len(mentioning(topLevel(h.srv.Snapshot(), chApprove), handlers.GlassBadge)); n > 2 {
		t.Errorf("%d break-glass notices for two break-glasses", n)
	}
}
