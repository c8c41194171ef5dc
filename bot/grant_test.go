package bot

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/grants"
)

// menuValue is the value of the plan message's overflow option for action ("<action>:<request id>").
func menuValue(t *testing.T, m fakeslack.Message, action string) string {
	t.Helper()
	var blocks []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Options  []struct {
				Value string `json:"value"`
			} `json:"options"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		for _, el := range b.Elements {
			for _, o := range el.Options {
				if el.ActionID == handlers.ActionMore && strings.HasPrefix(o.Value, action+":") {
					return o.Value
				}
			}
		}
	}
	t.Fatalf("the message %s has no %s in its menu: %s", m.TS, action, m.Blocks)
	return ""
}

// modalErrors reads the errors a view_submission's ack showed in the modal (response_action errors), by block.
func modalErrors(t *testing.T, a fakeslack.Ack) map[string]string {
	t.Helper()
	var resp struct {
		Action string            `json:"response_action"`
		Errors map[string]string `json:"errors"`
	}
	if len(a.Payload) > 0 {
		if err := json.Unmarshal(a.Payload, &resp); err != nil {
			t.Fatal(err)
		}
	}
	if resp.Action != "errors" {
		return nil
	}
	return resp.Errors
}

// grantForm is the grant form's inputs as Slack sends them, the prefilled values with changes.
func grantForm(changes map[string]string) map[string]map[string]any {
	v := map[string]string{"grant_target": "ml", "grant_size": "1", "grant_hourly": "60", "grant_total": "0", "grant_uses": "5", "grant_hours": "2"}
	for k, x := range changes {
		v[k] = x
	}
	out := map[string]map[string]any{}
	for k, x := range v {
		out[k] = map[string]any{"value": fakeslack.TextValue(x)}
	}
	return out
}

// A standing grant given from Slack, on two replicas sharing a real Redis (issue 31): the lead picks "Approve and
// allow similar…" in the plan message's menu, and the form opens through views.open, which Slack (and the fake)
// refuses for a title over 24 characters; a submit the engine refuses (alice withdrew the request while lead1 filled
// the form) shows the refusal in the modal, which stays open; on the next request the form's submit approves it and
// gives the grant, lead1 is told privately what they gave; alice's next matching request is approved by the grant
// without a vote, its thread and plan message say so, and the use is told in the thread the grant was given in.
func TestGrantFromThePlanMessageMenu(t *testing.T) {
	edit := func(c *config.Config) {}
	h := startWith(t, harnessOptions{replica: "a", edit: edit, tick: true})
	h.launchSecond(harnessOptions{replica: "b", edit: edit, tick: true})

	plan := func(id string) fakeslack.Message {
		t.Helper()
		h.slash(userAlice, chOps, "widget scale name=w1 count=1 request-id="+id)
		s := h.waitFor("the plan of "+id, func(s fakeslack.Snapshot) bool {
			m := mentioning(topLevel(s, chOps), id)
			return len(m) == 1 && hasButton(m[0], handlers.ActionGrant)
		})
		return mentioning(topLevel(s, chOps), id)[0]
	}
	openForm := func(m fakeslack.Message) fakeslack.View {
		t.Helper()
		views := len(h.srv.Snapshot().Views)
		if _, err := h.srv.ChooseOverflow(h.ctx(), fakeslack.Choice{User: userLead1, Channel: chOps, MessageTS: m.TS,
			ActionID: handlers.ActionMore, Value: menuValue(t, m, handlers.ActionGrant)}); err != nil {
			t.Fatal(err)
		}
		s := h.waitFor("the grant form", func(s fakeslack.Snapshot) bool { return len(s.Views) > views })
		v := s.Views[views]
		if v.CallbackID != handlers.GrantCallback || v.Title != handlers.GrantModalTitle || v.User != userLead1 {
			t.Fatalf("the menu opened %q titled %q for %s, want the grant form for lead1", v.CallbackID, v.Title, v.User)
		}
		return v
	}
	submit := func(v fakeslack.View, changes map[string]string) fakeslack.Ack {
		t.Helper()
		return h.submitView(v, userLead1, grantForm(changes))
	}
	viewOpen := func(id string) bool {
		for _, v := range h.srv.Snapshot().Views {
			if v.ID == id {
				return !v.Closed
			}
		}
		return false
	}

	// A submit the engine refuses: alice withdrew the request meanwhile.
	first := plan("grant-0")
	form := openForm(first)
	if _, err := h.srv.ChooseOverflow(h.ctx(), fakeslack.Choice{User: userAlice, Channel: chOps, MessageTS: first.TS,
		ActionID: handlers.ActionMore, Value: menuValue(t, first, handlers.ActionCancel)}); err != nil {
		t.Fatal(err)
	}
	h.waitPhase("grant-0", ops.PhaseCancelled)
	errs := modalErrors(t, submit(form, nil))
	if e := errs["grant_target"]; !strings.Contains(e, "E_INVALID_PHASE") || !strings.Contains(e, "cancelled") || !strings.Contains(e, "request show") {
		t.Fatalf("the refused submit showed %v in the modal, want E_INVALID_PHASE under the first input, saying it is cancelled and what to do", errs)
	}
	if !viewOpen(form.ID) {
		t.Error("the modal closed on a refusal: the lead cannot read it")
	}
	// The form's own check is in the modal too: a grant of 9 hours.
	form = openForm(plan("grant-1"))
	if errs := modalErrors(t, submit(form, map[string]string{"grant_hours": "9"})); !strings.Contains(errs["grant_hours"], "at most 8 hours") {
		t.Fatalf("9 hours showed %v in the modal, want the rule under hours", errs)
	}
	if rec := h.record("grant-1"); rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("grant-1 is %s after a refused form", rec.Phase)
	}

	// Accepted: the request is approved and the grant given.
	if errs := modalErrors(t, submit(form, nil)); errs != nil {
		t.Fatalf("the form was refused: %v", errs)
	}
	rec := h.waitPhase("grant-1", ops.PhaseSucceeded)
	if len(rec.Approval.Votes) != 1 || rec.Approval.Votes[0].Voter.ID != userLead1 {
		t.Fatalf("grant-1 ran on the votes %+v, want lead1's", rec.Approval.Votes)
	}
	grantID := grants.ID("grant-1")
	h.waitFor("lead1 told of the grant", func(s fakeslack.Snapshot) bool { return ephemeralWith(s, userLead1, grantID) })
	if viewOpen(form.ID) {
		t.Error("the accepted form is still open")
	}

	// The next matching request of alice is approved by the grant.
	h.slash(userAlice, chOps, "widget scale name=w1 count=1 request-id=grant-2")
	used := h.waitPhase("grant-2", ops.PhaseSucceeded)
	if used.Grant == nil || used.Grant.Grant != grantID || used.Grant.GivenBy.ID != userLead1 || len(used.Approval.Votes) != 0 {
		t.Fatalf("grant-2 ran with grant %+v and votes %+v, want grant %s given by lead1, no vote", used.Grant, used.Approval.Votes, grantID)
	}
	s := h.waitFor("grant-2's thread, its plan message and grant-1's thread", func(s fakeslack.Snapshot) bool {
		m := mentioning(topLevel(s, chOps), "grant-2")
		if len(m) != 1 || !strings.Contains(string(m[0].Blocks), "Approved by grant") {
			return false
		}
		g := mentioning(topLevel(s, chOps), "grant-1")
		return len(mentioning(s.Thread(chOps, m[0].TS), "Approved by grant")) > 0 &&
			len(g) == 1 && len(mentioning(s.Thread(chOps, g[0].TS), "approved `grant-2`")) == 1
	})
	if n := len(mentioning(s.Thread(chOps, mentioning(topLevel(s, chOps), "grant-1")[0].TS), "approved `grant-2`")); n != 1 {
		t.Errorf("the grant's use was told %d times in grant-1's thread, want once", n)
	}
	if runs := h.ops["scale-widget"].runs.Load(); runs != 2 {
		t.Errorf("scale-widget ran %d times, want twice (grant-1, grant-2)", runs)
	}
	assertAcksFast(t, h.srv.Snapshot())
}
