package approvals

import (
	"context"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
)

// Admit is the gate: every path by which a request becomes approved asks it, with the request as it is now (its
// rule, its current plan). It checks, in one place:
//   - an agent's plan is within the agent's scope (scope.maxRisk), whichever path approves it;
//   - votes: the voter whose vote reaches the quorum may vote on this request now (CheckVoter: group, escalation,
//     channel membership, self-approval, risk);
//   - a grant: its giver is not the requester, the request falls under the rule the grant was given under, the
//     request is one a grant may approve at all, and the giver may vote on it now (CheckVoter);
//   - break-glass: the requester, on call in the group the rule names (CheckBreakGlass);
//   - no approval required (by the rule, or a re-plan before the write): the current approval asks for none.
//
// The budget for the plan is the engine's half of the gate (engine.Engine.admit).
func (p *Policy) Admit(ctx context.Context, rec *ops.Record, d engine.Decision) error {
	if rec.Plan != nil {
		if err := p.checkRisk(rec.Request, rec.Plan); err != nil {
			return err
		}
	}
	switch d.Path {
	case ops.ByVotes:
		return p.CheckVoter(ctx, rec, d.By)
	case ops.ByGrant:
		return p.admitGrant(ctx, rec, d.Grant)
	case ops.ByBreakGlass:
		return p.CheckBreakGlass(ctx, rec, d.By)
	case ops.ByPolicy, ops.ByReplan:
		if rec.Approval.Required > 0 {
			return ops.Errorf(ops.CodeNotAuthorized, "", "ask its approvers ("+rec.Approval.Approvers+")",
				"request %s needs %d approval(s) by its rule (%s); it cannot be approved without them", rec.ID(),
				rec.Approval.Required, rec.Approval.Rule)
		}
		return nil
	}
	return ops.Errorf(ops.CodeNotAuthorized, "", "ask its approvers", "request %s cannot be approved by %q", rec.ID(), d.Path)
}

// admitGrant admits grant g on rec: the grant is its giver's standing vote, given under one rule.
func (p *Policy) admitGrant(ctx context.Context, rec *ops.Record, g *grants.Grant) error {
	refuse := func(format string, args ...any) error {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask its approvers to vote", format, args...)
	}
	a := rec.Approval
	switch {
	case g == nil:
		return refuse("no grant was named for request %s", rec.ID())
	case g.GivenBy.ID == rec.Request.Initiator.ID:
		return refuse("grant %s was given by %s, who asked for %s: nobody approves their own request by a grant", g.ID, display(g.GivenBy), rec.ID())
	case g.Approvers != a.Approvers || g.Rule != "" && g.Rule != a.Rule: // grants given before rules were recorded name only the group
		return refuse("grant %s was given under rule %q, and request %s falls under %q", g.ID, g.Rule, rec.ID(), a.Rule)
	case a.Required != 1 || a.NoGrants || a.OverBudget || rec.Request.RequiresApproval:
		return refuse("request %s needs more than one lead's approval (%s): no grant approves it", rec.ID(), a.Rule)
	case rec.Plan.Risk.Level >= ops.RiskCritical:
		return refuse("request %s is critical risk: no grant approves it", rec.ID())
	}
	return p.CheckVoter(ctx, rec, g.GivenBy)
}

// Features are the parts of the policy beyond who may ask and vote: budgets, break-glass, take-over, reminders.
func (p *Policy) Features() engine.PolicyFeatures {
	return engine.PolicyFeatures{Budgets: p, OverBudget: p, BudgetViews: p, TeamBudgets: p, BreakGlass: p, TakeOver: p, Approvers: p}
}
