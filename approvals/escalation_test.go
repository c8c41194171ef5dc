package approvals

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Whoever an escalation asks may act on it: every person CheckVoter lets vote on an escalated request may also see
// it (CheckView), which every button and the Home ask first. Before the escalation the second group sees nothing it
// could not see anyway; after it a member of that group — listed, or through one of its user groups — sees the
// request though in neither its channel nor its first group (issue 32 point 1: the escalation asked people who
// could press neither Approve nor Deny).
func TestEscalationLetsTheSecondGroupSee(t *testing.T) {
	ctx := context.Background()
	for _, membership := range []bool{false, true} {
		p, dir, _ := newPolicy(t, func(c *config.Config) {
			withNudges(c)
			c.Approvals.RequireChannelMembership = membership
			c.Approvals.Groups["oncall"] = config.ApproverGroup{UserGroups: []string{"S0PLATFORM"}}
		})
		// The escalation asks its group in the approvals channel: there they are.
		dir.set(func(d *directory) { d.channels["C0APPROVE"] = append(d.channels["C0APPROVE"], "U0SRE1", "U0PLAT") })
		for _, to := range []struct{ group, member string }{{"sre", "U0SRE1"}, {"oncall", "U0PLAT"}} {
			rec := record("U0ALICE", ops.RiskHigh, "leads", false, "C0OPS")
			rec.Approval.EscalateTo = to.group
			wantCode(t, p.CheckView(ctx, rec, human(to.member)), ops.CodeNotAuthorized, "may not see request req-1")
			rec.Approval.Escalated = true
			for _, who := range []string{to.member, "U0LEAD1", "U0LEAD2", "U0LEADG", "U0SRE1", "U0PLAT", "U0BOB", "U0ALICE"} {
				if p.CheckVoter(ctx, rec, human(who)) != nil {
					continue
				}
				if err := p.CheckView(ctx, rec, human(who)); err != nil {
					t.Errorf("membership %t, escalated to %s: %s may vote but not see the request: %v", membership, to.group, who, err)
				}
			}
			wantCode(t, p.CheckVoter(ctx, rec, human(to.member)), "")
			wantCode(t, p.CheckView(ctx, rec, human(to.member)), "")
			wantCode(t, p.CheckView(ctx, rec, human("U0BOB")), ops.CodeNotAuthorized, "may not see request req-1")
		}
	}
}
