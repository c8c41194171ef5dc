package approvals

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// withOnCall adds the on-call group oncall (U0ONCALL1 and user group S0ONCALL) and lets it break glass on rule 2
// (critical, listed explicitly) and rule 4 (high and medium), and on the last rule (agents' low risk) to show that
// an agent's request never gets it.
func withOnCall(c *config.Config) {
	c.Approvals.Groups["oncall"] = config.ApproverGroup{Users: []string{"U0ONCALL1"}, UserGroups: []string{"S0ONCALL"}}
	c.Approvals.Rules[1].BreakGlass = "oncall"
	c.Approvals.Rules[3].BreakGlass = "oncall"
}

// The requirement names the on-call group for a person's request its rule lets break glass, and says so in the
// rule's description; a critical plan only under a rule that lists critical, an agent's request never, and a plan
// over a budget's higher approval never.
func TestRequirementCarriesBreakGlass(t *testing.T) {
	ctx := context.Background()
	p, dir, _ := newPolicy(t, func(c *config.Config) {
		withOnCall(c)
		c.Approvals.Rules = append([]config.ApprovalRule{{Cluster: []string{"ml-dev"}, Approvers: "sre", Required: 1, BreakGlass: "oncall"}},
			c.Approvals.Rules...)
		c.Approvals.Rules[4].OverBudget = &config.OverBudget{Approvers: "leads", Required: 2}
	})
	req := ops.Request{ID: "req-1", Operation: "scale-inference", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Initiator: human("U0ONCALL1")}
	tests := []struct {
		name    string
		cluster string
		level   ops.Level
		agent   bool
		want    string
	}{
		{"high risk under a rule with breakGlass", "ml-prod-eks", ops.RiskHigh, false, "oncall"},
		{"critical under a rule listing critical", "ml-prod-eks", ops.RiskCritical, false, "oncall"},
		{"critical under a rule for every risk", "ml-dev", ops.RiskCritical, false, ""},
		{"high under the same rule", "ml-dev", ops.RiskHigh, false, "oncall"},
		{"an agent's request", "ml-prod-eks", ops.RiskHigh, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			r.Target.Cluster = tc.cluster
			if tc.agent {
				r.Initiator = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}
			}
			a, err := p.Requirement(ctx, r, &ops.Plan{Risk: ops.Risk{Level: tc.level}})
			if err != nil {
				t.Fatal(err)
			}
			if a.BreakGlass != tc.want {
				t.Errorf("break-glass group %q, want %q (rule %s)", a.BreakGlass, tc.want, a.Rule)
			}
		})
	}
	dir.set(func(d *directory) { d.groups["S0ONCALL"] = []string{"U0ONCALL2"} })
	notOnCall := req
	notOnCall.Initiator = human("U0BOB")
	if a, err := p.Requirement(ctx, notOnCall, &ops.Plan{Risk: ops.Risk{Level: ops.RiskHigh}}); err != nil || a.BreakGlass != "" {
		t.Errorf("a request of bob, not on call, offers break-glass %q (%v); only its requester may, so none", a.BreakGlass, err)
	}
	a, err := p.Requirement(ctx, req, &ops.Plan{Risk: ops.Risk{Level: ops.RiskHigh}})
	if want := "rule 5: risk high|medium → 1 of leads, 1h, oncall may break glass"; err != nil || a.Rule != want {
		t.Errorf("rule %q (%v), want %q", a.Rule, err, want)
	}
	over, ok, err := p.OverBudget(ctx, req, &ops.Plan{Risk: ops.Risk{Level: ops.RiskHigh}})
	if err != nil || !ok || over.BreakGlass != "" {
		t.Errorf("over-budget approval %+v (%v, %v), want one nobody may break glass on", over, ok, err)
	}
}

// Breaking glass is checked against the on-call group as configured at the click: a listed user or a member of
// one of its user groups may; anybody else, an agent, a group no longer configured or a user group that cannot
// be read may not. A lead (the request's approver group) acknowledges; the on-call person who is no lead does not.
func TestCheckBreakGlassAndAcknowledge(t *testing.T) {
	ctx := context.Background()
	p, dir, _ := newPolicy(t, withOnCall)
	dir.set(func(d *directory) { d.groups["S0ONCALL"] = []string{"U0ONCALL2"} })
	rec := record("U0ONCALL1", ops.RiskHigh, "leads", false, "C0OPS")
	rec.Approval.BreakGlass = "oncall"
	wantCode(t, p.CheckBreakGlass(ctx, rec, human("U0ONCALL1")), "")
	wantCode(t, p.CheckBreakGlass(ctx, rec, human("U0ONCALL2")), "")
	wantCode(t, p.CheckBreakGlass(ctx, rec, human("U0BOB")), ops.CodeNotAuthorized, "U0BOB is not on call", "oncall", "approvals.groups.oncall")
	wantCode(t, p.CheckBreakGlass(ctx, rec, ops.Initiator{Kind: ops.Human, ID: "U0AGENT"}), ops.CodeNotAuthorized, "agents never")
	failing, fdir, _ := newPolicy(t, withOnCall)
	fdir.set(func(d *directory) { d.failing["S0ONCALL"] = true })
	wantCode(t, failing.CheckBreakGlass(ctx, rec, human("U0ONCALL2")), ops.CodeNotAuthorized, "could not confirm")
	gone := rec.Clone()
	gone.Approval.BreakGlass = "pager"
	wantCode(t, p.CheckBreakGlass(ctx, gone, human("U0ONCALL1")), ops.CodeNotAuthorized, "approvals.groups.pager is not configured")

	wantCode(t, p.CheckAcknowledge(ctx, rec, human("U0LEAD1")), "")
	wantCode(t, p.CheckAcknowledge(ctx, rec, human("U0ONCALL1")), ops.CodeNotAuthorized, "not in approver group leads")
	wantCode(t, p.CheckAcknowledge(ctx, rec, ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}), ops.CodeNotAuthorized, "never")
}
