package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// withEscalation makes lead3 (in the approvals channel only, never in C0OPS) the group "sre", which the high and
// medium rule asks after 30 minutes.
func withEscalation(c *config.Config) {
	c.Approvals.Groups["sre"] = config.ApproverGroup{Users: []string{userLead3}}
	for i, r := range c.Approvals.Rules {
		if len(r.Risk) > 0 && r.Risk[0] == "high" {
			c.Approvals.Rules[i].EscalateAfter, c.Approvals.Rules[i].EscalateTo = config.Duration(30*time.Minute), "sre"
		}
	}
}

// TestEscalatedGroupActs: once a request waited past escalateAfter, the sweep asks the escalateTo group in the
// approvals channel; its member — in neither the request's channel nor its approver group — finds it waiting for
// them on their Home, presses Approve on the escalation message, and the request runs (issue 32 point 1: the
// escalation asked people whom every button refused, since they could not see the request, and whose Home never
// listed it).
func TestEscalatedGroupActs(t *testing.T) {
	h := startWith(t, harnessOptions{edit: withEscalation})
	h.openHome(userLead3)
	h.slash(userAlice, chOps, "widget scale name=esc count=1") // $60/h: medium, 1 of leads within 1h
	s := h.waitFor("the plan message", func(s fakeslack.Snapshot) bool {
		m := topLevel(s, chOps)
		return len(m) == 1 && hasButton(m[0], handlers.ActionApprove)
	})
	id := requestID(t, topLevel(s, chOps)[0])
	if homeShows(s, userLead3, id) {
		t.Fatalf("lead3's Home lists %s before the escalation: %s", id, s.Homes[userLead3].Blocks)
	}

	// The sweep runs on the fake clock: move it past escalateAfter, then tick it on until the escalation is told.
	h.clock.Advance(30 * time.Minute)
	var asked fakeslack.Message
	h.waitUntil("the escalation message in the approvals channel", func() bool {
		for _, m := range topLevel(h.srv.Snapshot(), chApprove) {
			if strings.Contains(m.Text+string(m.Blocks), "Escalated") && hasButton(m, handlers.ActionApprove) {
				asked = m
				return true
			}
		}
		h.clock.Advance(time.Second)
		return false
	})
	if rec := h.record(id); !rec.Approval.Escalated || rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("request %s escalated %t, want escalated and awaiting approval", rec.Phase, rec.Approval.Escalated)
	}
	if _, err := h.srv.WaitFor(h.ctx(), func(s fakeslack.Snapshot) bool {
		return homeShows(s, userLead3, "home:waiting:"+id) && homeShows(s, userLead3, handlers.ActionApprove)
	}); err != nil {
		t.Errorf("lead3's Home does not list %s waiting for them, with Approve: %s", id, h.srv.Snapshot().Homes[userLead3].Blocks)
	}

	h.click(userLead3, chApprove, asked.TS, handlers.ActionApprove)
	var rec *ops.Record
	h.waitUntil("the request run, or lead3 refused", func() bool {
		rec = h.recordOrNil(id)
		return rec != nil && rec.Phase == ops.PhaseSucceeded || ephemeralWith(h.srv.Snapshot(), userLead3, "E_")
	})
	if rec == nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("lead3's Approve was refused: %+v", h.srv.Snapshot().Ephemerals)
	}
	if runs := h.ops["scale-widget"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
	if !hasVote(rec, userLead3) {
		t.Errorf("the approval is %+v, want lead3's vote", rec.Approval)
	}
	s = h.waitFor("the request gone from lead3's Waiting", func(s fakeslack.Snapshot) bool {
		return !homeShows(s, userLead3, "home:waiting:"+id)
	})
	for _, e := range s.Ephemerals {
		if e.User == userLead3 {
			t.Errorf("lead3 was refused or told privately: %s", e.Text)
		}
	}
	assertAcksFast(t, s)
}

func hasVote(rec *ops.Record, user string) bool {
	for _, v := range rec.Approval.Votes {
		if v.Voter.ID == user && v.Approve {
			return true
		}
	}
	return false
}
