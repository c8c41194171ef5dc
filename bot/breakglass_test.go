package bot

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// Break-glass on two replicas sharing a real Redis, through Slack, on a clock that ticks as a real one does (a
// frozen fake clock hid issue 31: the entry that broke glass was told as a plain approval, no notice posted): alice,
// on call, breaks glass on her medium-risk request and it runs without a lead's vote; the approvals channel gets one
// notice (told once across the replicas) mentioning the leads with the badge, her reason and Acknowledge; the
// request's thread says it was approved by break-glass, with the reason, and its plan message carries the badge. Her
// second break-glass is refused in its modal, naming the first, until lead2 (a lead through the user group S0LEADS)
// presses Acknowledge on the notice; the notice then says who acknowledged it, and the same modal goes through.
func TestBreakGlassOnTwoReplicas(t *testing.T) {
	h := startWith(t, harnessOptions{replica: "a", edit: glassOnCall, tick: true})
	h.launchSecond(harnessOptions{replica: "b", edit: glassOnCall, tick: true})

	view := h.openGlass("glass-1")
	if errs := modalErrors(t, h.submitGlass(view, "w1 is down for customers <!channel>")); errs != nil {
		t.Fatalf("the break-glass was refused: %v", errs)
	}
	rec := h.waitPhase("glass-1", ops.PhaseSucceeded)
	if rec.Approval.Received() != 1 || rec.BreakGlass == nil || rec.BreakGlass.Reason != "w1 is down for customers <!channel>" {
		t.Fatalf("glass-1 ran with %d vote(s), break-glass %+v; want alice's alone, with her reason", rec.Approval.Received(), rec.BreakGlass)
	}
	notice := h.waitGlassTold("glass-1", "w1 is down for customers")

	// The second one is refused in its modal, which stays open.
	second := h.openGlass("glass-2")
	errs := modalErrors(t, h.submitGlass(second, "w2 too"))
	if e := errs["reason"]; !strings.Contains(e, "E_BREAK_GLASS_UNACKNOWLEDGED") || !strings.Contains(e, "glass-1") || !strings.Contains(e, "Acknowledge") {
		t.Fatalf("the second break-glass showed %v in its modal, want E_BREAK_GLASS_UNACKNOWLEDGED naming glass-1 and who acknowledges it", errs)
	}
	if !h.viewOpen(second.ID) {
		t.Error("the modal closed on the refusal")
	}
	if rec := h.record("glass-2"); rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("glass-2 is %s after a refused break-glass, want awaiting approval", rec.Phase)
	}
	if runs := h.ops["scale-widget"].runs.Load(); runs != 1 {
		t.Fatalf("scale-widget ran %d times, want once (glass-1)", runs)
	}

	h.acknowledgeGlass(notice, "glass-1")
	if rec := h.record("glass-1"); rec.BreakGlass.AcknowledgedBy == nil || rec.BreakGlass.AcknowledgedBy.ID != userLead2 {
		t.Fatalf("glass-1's break-glass acknowledged by %+v, want lead2", rec.BreakGlass.AcknowledgedBy)
	}
	// The modal still open goes through now.
	if errs := modalErrors(t, h.submitGlass(second, "w2 too")); errs != nil {
		t.Fatalf("the break-glass after the acknowledgement was refused: %v", errs)
	}
	h.waitPhase("glass-2", ops.PhaseSucceeded)
	h.waitGlassTold("glass-2", "w2 too")
	if n := len(mentioning(topLevel(h.srv.Snapshot(), chApprove), handlers.GlassBadge)); n != 2 {
		t.Errorf("%d break-glass notices for two break-glasses", n)
	}
}

// The notice's chat.postMessage is stored by Slack but its answer lost (a 500 after the post): the outbox finds the
// notice it posted instead of posting it again, remembers it, and the lead's Acknowledge updates that one notice.
func TestBreakGlassNoticeLostAnswerPostsOnce(t *testing.T) {
	h := startWith(t, harnessOptions{replica: "a", edit: glassOnCall, tick: true})
	h.launchSecond(harnessOptions{replica: "b", edit: glassOnCall, tick: true})

	view := h.openGlass("glass-lost")
	lost := h.srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: chApprove, Status: http.StatusInternalServerError, After: true})
	if errs := modalErrors(t, h.submitGlass(view, "w1 is down")); errs != nil {
		t.Fatalf("the break-glass was refused: %v", errs)
	}
	notice := h.waitGlassTold("glass-lost", "w1 is down")
	if lost() != 1 {
		t.Fatalf("the fault answered %d posts, want the notice's", lost())
	}
	h.waitPhase("glass-lost", ops.PhaseSucceeded)
	h.acknowledgeGlass(notice, "glass-lost")
	s := h.srv.Snapshot()
	if n := len(mentioning(topLevel(s, chApprove), handlers.GlassBadge)); n != 1 {
		t.Fatalf("the approvals channel holds %d break-glass notices after a lost answer, want 1", n)
	}
	plan := mentioning(topLevel(s, chOps), "glass-lost")[0]
	if n := len(mentioning(threadReplies(s, chOps, plan.TS), "approved by")); n != 1 {
		t.Errorf("the thread holds %d break-glass replies, want 1", n)
	}
}

// glassOnCall puts alice on call for the medium-risk rule (1 of leads).
func glassOnCall(c *config.Config) {
	c.Approvals.Groups["oncall"] = config.ApproverGroup{Users: []string{userAlice}}
	c.Approvals.Rules[1].BreakGlass = "oncall" // high and medium: 1 of leads
}

// openGlass has alice ask for a scale with request id id and press Break glass… on its plan message; it returns
// the modal that opened.
func (h *harness) openGlass(id string) fakeslack.View {
	t := h.t
	t.Helper()
	h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
	s := h.waitFor("the plan of "+id, func(s fakeslack.Snapshot) bool {
		m := mentioning(topLevel(s, chOps), id)
		return len(m) == 1 && hasButton(m[0], handlers.ActionBreakGlass)
	})
	views := len(s.Views)
	h.click(userAlice, chOps, mentioning(topLevel(s, chOps), id)[0].TS, handlers.ActionBreakGlass)
	s = h.waitFor("the break-glass modal", func(s fakeslack.Snapshot) bool { return len(s.Views) == views+1 })
	v := s.Views[views]
	if v.CallbackID != handlers.BreakGlassCallback {
		t.Fatalf("the click opened %q", v.CallbackID)
	}
	return v
}

// submitGlass submits the break-glass modal with reason as alice and returns its ack.
func (h *harness) submitGlass(v fakeslack.View, reason string) fakeslack.Ack {
	h.t.Helper()
	return h.submitView(v, userAlice, map[string]map[string]any{"reason": {"glass_reason": fakeslack.TextValue(reason)}})
}

func (h *harness) viewOpen(id string) bool {
	for _, v := range h.srv.Snapshot().Views {
		if v.ID == id {
			return !v.Closed
		}
	}
	return false
}

// waitGlassTold waits until the break-glass of id is told everywhere: a notice in the approvals channel that
// mentions every lead (the user group, then lead1), with the badge, the reason and Acknowledge; a reply in the
// request's thread saying it was approved by break-glass, with the reason; the badge on its plan message. It returns
// the notice.
func (h *harness) waitGlassTold(id, reason string) fakeslack.Message {
	t := h.t
	t.Helper()
	s := h.waitFor("the break-glass of "+id+" told", func(s fakeslack.Snapshot) bool {
		plan := mentioning(topLevel(s, chOps), id)
		return len(mentioning(mentioning(topLevel(s, chApprove), handlers.GlassBadge), id)) > 0 && len(plan) == 1 &&
			len(mentioning(threadReplies(s, chOps, plan[0].TS), handlers.GlassBadge)) > 0 && strings.Contains(string(plan[0].Blocks), handlers.GlassBadge)
	})
	notices := mentioning(mentioning(topLevel(s, chApprove), handlers.GlassBadge), id)
	if len(notices) != 1 || !strings.HasPrefix(notices[0].Text, "<!subteam^S0LEADS> <@U0LEAD1> ") ||
		!strings.Contains(string(notices[0].Blocks), reason) || !hasButton(notices[0], handlers.ActionAcknowledgeGlass) {
		t.Fatalf("the approvals channel holds %d break-glass notices of %s (%s), want one mentioning the leads, with the reason and Acknowledge", len(notices), id, strings.Join(texts(notices), " | "))
	}
	if strings.Contains(string(notices[0].Blocks), `\u003c!channel`) {
		t.Errorf("the notice carries the reason unescaped: %s", notices[0].Blocks)
	}
	plan := mentioning(topLevel(s, chOps), id)[0]
	replies := mentioning(threadReplies(s, chOps, plan.TS), handlers.GlassBadge)
	if len(replies) != 1 || !strings.Contains(string(replies[0].Blocks), "approved by") || !strings.Contains(string(replies[0].Blocks), reason) {
		t.Errorf("the thread of %s holds %d break-glass replies (%s), want one saying it was approved by break-glass, with the reason", id, len(replies), strings.Join(texts(replies), " | "))
	}
	return notices[0]
}

// acknowledgeGlass has lead2 press Acknowledge on notice and waits until the notice says so, without its button,
// and alice is told in the thread of id.
func (h *harness) acknowledgeGlass(notice fakeslack.Message, id string) {
	h.t.Helper()
	h.click(userLead2, chApprove, notice.TS, handlers.ActionAcknowledgeGlass)
	h.waitFor("the acknowledged notice and alice told", func(s fakeslack.Snapshot) bool {
		n, _ := s.Message(chApprove, notice.TS)
		plan := mentioning(topLevel(s, chOps), id)
		told := false
		for _, r := range s.Thread(chOps, plan[0].TS) {
			told = told || strings.HasPrefix(r.Text, "<@U0ALICE> ") && strings.Contains(r.Text, "acknowledged")
		}
		return !hasButton(n, handlers.ActionAcknowledgeGlass) && strings.Contains(string(n.Blocks), "Acknowledged") &&
			strings.Contains(string(n.Blocks), `\u003c@U0LEAD2\u003e`) && told
	})
}
