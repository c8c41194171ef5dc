package approvals

import (
	"context"
	"fmt"
	"slices"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

var (
	_ engine.BudgetPolicy       = (*Policy)(nil)
	_ engine.OverBudgetApproval = (*Policy)(nil)
	_ engine.BudgetViewer       = (*Policy)(nil)
	_ engine.TeamBudgetLister   = (*Policy)(nil)
)

// Budgets returns the spend budgets (budgets[] in config) that cover req: its initiator's (an agent by name, a
// person by user ID, a team by Slack user group membership), each narrowed to a cluster when it names one, and the
// budgets of its cluster as a whole. A team's membership that cannot be read refuses the request (fail closed):
// its budget could not be counted.
func (p *Policy) Budgets(ctx context.Context, req ops.Request) ([]ops.BudgetLimit, error) {
	var out []ops.BudgetLimit
	for i := range p.cfg.Budgets {
		b := &p.cfg.Budgets[i]
		if b.Cluster != "" && b.Cluster != req.Target.Cluster {
			continue
		}
		ok, err := p.covers(ctx, b, req.Initiator)
		if err != nil {
			return nil, ops.Wrap(err, ops.CodeStateUnavailable, "budget",
				"retry shortly; if it persists, check the bot's Slack access (usergroups:read)",
				"could not read the members of team %s, so budget %s could not be checked; nothing was changed", b.UserGroup, b.Name)
		}
		if ok {
			out = append(out, BudgetLimit(i, b))
		}
	}
	return out, nil
}

// BudgetsOf returns every budget the viewer's requests count against on any cluster, for /hp budget, the Home and
// get_budget. An agent sees only those on the clusters its scope lets it target (agents[].scope.clusters): a
// budget narrowed to another cluster counts nothing it may ask for, and its use is what others spend there.
// Budgets are per cluster, never per namespace, so an agent scoped to namespaces still sees its clusters' budgets,
// which count its requests too.
func (p *Policy) BudgetsOf(ctx context.Context, who ops.Initiator) ([]ops.BudgetLimit, error) {
	var scope *config.AgentScope
	if a, ok := p.cfg.Agent(who.ID); ok {
		scope = &a.Scope
	}
	var out []ops.BudgetLimit
	for i := range p.cfg.Budgets {
		b := &p.cfg.Budgets[i]
		if scope != nil && b.Cluster != "" && !scope.AllowsCluster(b.Cluster) {
			continue
		}
		ok, err := p.covers(ctx, b, who)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, BudgetLimit(i, b))
		}
	}
	return out, nil
}

// TeamBudgets returns the budgets of teams (a userGroup's) that count requests on cluster: those narrowed to it and
// those on every cluster, for the capacity report's spend per team.
func (p *Policy) TeamBudgets(_ context.Context, cluster string) ([]ops.BudgetLimit, error) {
	var out []ops.BudgetLimit
	for i := range p.cfg.Budgets {
		b := &p.cfg.Budgets[i]
		if b.UserGroup != "" && (b.Cluster == "" || b.Cluster == cluster) {
			out = append(out, BudgetLimit(i, b))
		}
	}
	return out, nil
}

func (p *Policy) covers(ctx context.Context, b *config.SpendBudget, who ops.Initiator) (bool, error) {
	switch {
	case b.Agent != "":
		a, ok := p.cfg.Agent(who.ID)
		return ok && a.Name == b.Agent, nil
	case b.User != "":
		return who.ID == b.User, nil
	case b.UserGroup != "":
		if who.Kind != ops.Human {
			return false, nil
		}
		members, err := p.userGroupMembers(ctx, b.UserGroup)
		return slices.Contains(members, who.ID), err
	}
	return true, nil // a cluster's budget covers everyone there
}

// BudgetLimit is budget i of config as the engine counts it.
func BudgetLimit(i int, b *config.SpendBudget) ops.BudgetLimit {
	holder := "cluster " + b.Cluster
	switch {
	case b.Agent != "":
		holder = b.Agent
	case b.User != "":
		holder = b.User
	case b.UserGroup != "":
		holder = "team " + b.UserGroup
	}
	if b.Cluster != "" && (b.Agent != "" || b.User != "" || b.UserGroup != "") {
		holder += " on " + b.Cluster
	}
	zone := b.TimeZone
	if zone == "UTC" {
		zone = ""
	}
	return ops.BudgetLimit{Name: b.Name, Path: fmt.Sprintf("budgets[%d]", i), Holder: holder, Window: ops.BudgetWindow(b.Window),
		Zone: zone, Limit: ops.Amount{Cost: b.Limits.Cost, GPUHours: b.Limits.GPUHours, GPUs: float64(b.Limits.GPUs)}}
}

// OverBudget returns the higher approval the matching rule's overBudget asks for a plan over a budget; ok is false
// when the rule has none, and the plan is then refused.
func (p *Policy) OverBudget(_ context.Context, req ops.Request, plan *ops.Plan) (ops.Approval, bool, error) {
	risk := plan.Risk.Level.String()
	kind := string(p.kindOf(req.Initiator))
	for i := range p.cfg.Approvals.Rules {
		r := &p.cfg.Approvals.Rules[i]
		if !r.Matches(risk, req.Operation, req.Target.Cluster, req.Target.Namespace, kind, profileOf(req)) {
			continue
		}
		if r.OverBudget == nil {
			return ops.Approval{}, false, nil
		}
		higher := *r
		higher.Approvers, higher.Required, higher.AllowSelfApproval = r.OverBudget.Approvers, r.OverBudget.Required, false
		higher.BreakGlass = "" // going over a budget is never one person's call
		a, err := p.approvalOf(i, &higher, req, plan)
		return a, err == nil, err
	}
	return ops.Approval{}, false, nil
}
