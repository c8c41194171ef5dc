package approvals

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Requirement refuses a plan above the agent's scope.maxRisk (E_OUT_OF_SCOPE, checkRisk); otherwise it returns the
// approval the first matching rule of approvals.rules asks for (matching on the plan's
// risk level, the operation, cluster, namespace, initiator kind and profile), with its expiry counted from now.
//
// When no rule matches, the request is refused (E_NOT_AUTHORIZED) rather than given a default: a default quorum or
// approver group would be policy the operator never wrote, and zero approvals would let an uncovered high-risk
// change through. The error names what was not covered, so the gap in the rules is fixed once.
//
// A rule's breakGlass is offered (Approval.BreakGlass) on a person's request whose requester is in the on-call
// group now (breakGlassOf, mayBeOnCall): only the requester may break glass, so a request of anybody else offers none.
//
// A rule's remindAfter and escalateAfter are counted from now too (Approval.RemindAt, Approval.EscalateAt); the
// escalation names the second group and who it lists, as it is configured now.
//
// A request with requiresApproval that matches a rule asking for none gets one approval from the rule's group, or
// else from the first group any rule names, within the rule's expiry (default 1h): the request may only raise what
// policy asks for, and an approval that nobody could give would never end.
func (p *Policy) Requirement(ctx context.Context, req ops.Request, plan *ops.Plan) (ops.Approval, error) {
	if plan == nil {
		return ops.Approval{}, ops.Errorf(ops.CodeInternal, "", "retry; if it persists, check the bot's log",
			"no plan to decide the approvals of request %s", req.ID)
	}
	if err := p.checkRisk(req, plan); err != nil {
		return ops.Approval{}, err
	}
	risk := plan.Risk.Level.String()
	kind := string(p.kindOf(req.Initiator))
	for i := range p.cfg.Approvals.Rules {
		r := &p.cfg.Approvals.Rules[i]
		if r.Matches(risk, req.Operation, req.Target.Cluster, req.Target.Namespace, kind, profileOf(req)) {
			a, err := p.approvalOf(i, r, req, plan)
			if err == nil && a.BreakGlass != "" && !p.mayBeOnCall(ctx, a.BreakGlass, req.Initiator) {
				a.BreakGlass = "" // nobody else may break glass on it: its message offers none
			}
			return a, err
		}
	}
	return ops.Approval{}, ops.Errorf(ops.CodeNotAuthorized, "",
		"ask a platform admin to add a rule to approvals.rules that covers it (a last rule without matchers covers everything)",
		"no approval rule covers %s risk %s on %s/%s by %s %s with profile %s", risk, req.Operation, req.Target.Cluster,
		req.Target.Namespace, kind, req.Initiator.ID, profileOf(req))
}

func (p *Policy) approvalOf(i int, r *config.ApprovalRule, req ops.Request, plan *ops.Plan) (ops.Approval, error) {
	desc := describeRule(i, r)
	a := ops.Approval{Required: r.Required, Approvers: r.Approvers, AllowSelfApproval: r.AllowSelfApproval, Rule: desc}
	if a.Required == 0 && req.RequiresApproval {
		a.Required, a.AllowSelfApproval = 1, false
		if a.Approvers == "" {
			a.Approvers = p.primaryGroup()
		}
		if a.Approvers == "" {
			return ops.Approval{}, ops.Errorf(ops.CodeNotAuthorized, "controls.requiresApproval",
				"ask a platform admin to define a group in approvals.groups and name it in a rule, or send the request without requiresApproval",
				"the request asks for approval, but no approver group is configured to give it")
		}
		a.Rule = fmt.Sprintf("%s; raised to 1 of %s by the request's requiresApproval", desc, a.Approvers)
	}
	if a.Required == 0 {
		return a, nil
	}
	g, ok := p.cfg.Approvals.Groups[a.Approvers]
	if !ok {
		return ops.Approval{}, ops.Errorf(ops.CodeNotAuthorized, "",
			fmt.Sprintf("ask a platform admin to name a group of approvals.groups in approvals.rules[%d].approvers", i),
			"rule %d needs %d approval(s) but names no defined approver group (%q)", i+1, a.Required, a.Approvers)
	}
	a.ApproverUsers, a.ApproverUserGroups = g.Users, g.UserGroups
	now := p.clock.Now()
	a.ExpiresAt = now.Add(expiry(r))
	if d := r.RemindAfter.Std(); d > 0 {
		a.RemindAt = now.Add(d)
	}
	if esc, ok := p.cfg.Approvals.Groups[r.EscalateTo]; ok && r.EscalateAfter > 0 {
		a.EscalateAt, a.EscalateTo = now.Add(r.EscalateAfter.Std()), r.EscalateTo
		a.EscalateUsers, a.EscalateUserGroups = esc.Users, esc.UserGroups
	}
	a.BreakGlass = breakGlassOf(r, req, plan)
	a.NoGrants = !r.GrantsAllowed()
	return a, nil
}

// mayBeOnCall reports whether who may be in the on-call group now: listed, a member of one of its user groups, or
// unknown because a user group could not be read (the click checks again, and refuses what it cannot confirm).
func (p *Policy) mayBeOnCall(ctx context.Context, group string, who ops.Initiator) bool {
	g, ok := p.cfg.Approvals.Groups[group]
	if !ok {
		return false
	}
	in, err := p.inGroup(ctx, g, who.ID)
	return in || err != nil
}

// breakGlassOf is the on-call group that may break glass on req under rule r: its breakGlass, for a person's
// request, and for a critical-risk plan only when r lists critical among its risks (a rule that covers every risk
// does not hand critical changes to one person by omission).
func breakGlassOf(r *config.ApprovalRule, req ops.Request, plan *ops.Plan) string {
	if r.BreakGlass == "" || req.Initiator.Kind != ops.Human {
		return ""
	}
	if plan.Risk.Level >= ops.RiskCritical && !slices.Contains(r.Risk, config.RiskCritical) {
		return ""
	}
	return r.BreakGlass
}

// primaryGroup is the first approver group a rule names, in the order the operator wrote the rules.
func (p *Policy) primaryGroup() string {
	for _, r := range p.cfg.Approvals.Rules {
		if _, ok := p.cfg.Approvals.Groups[r.Approvers]; ok {
			return r.Approvers
		}
	}
	return ""
}

func expiry(r *config.ApprovalRule) time.Duration {
	if d := r.ExpiresAfter.Std(); d > 0 {
		return d
	}
	return config.DefaultApprovalExpiry.Std()
}

// describeRule renders a rule for the plan message, e.g. "rule 2: risk high|medium → 1 of leads, 1h".
func describeRule(i int, r *config.ApprovalRule) string {
	var on []string
	for _, m := range []struct {
		name   string
		values []string
	}{{"risk", r.Risk}, {"operation", r.Operation}, {"cluster", r.Cluster}, {"namespace", r.Namespace}, {"profile", r.Profile}} {
		if len(m.values) > 0 {
			on = append(on, m.name+" "+strings.Join(m.values, "|"))
		}
	}
	if r.Initiator != "" {
		on = append(on, "initiator "+r.Initiator)
	}
	if len(on) == 0 {
		on = []string{"any request"}
	}
	out := "no approval"
	if r.Required > 0 {
		out = fmt.Sprintf("%d of %s, %s", r.Required, r.Approvers, config.Duration(expiry(r)))
		if r.AllowSelfApproval {
			out += ", self-approval allowed below high risk"
		}
		if r.RemindAfter > 0 {
			out += ", reminder after " + r.RemindAfter.String()
		}
		if r.EscalateAfter > 0 && r.EscalateTo != "" {
			out += fmt.Sprintf(", %s also asked after %s", r.EscalateTo, r.EscalateAfter)
		}
		if r.BreakGlass != "" {
			out += ", " + r.BreakGlass + " may break glass"
		}
	}
	return fmt.Sprintf("rule %d: %s → %s", i+1, strings.Join(on, ", "), out)
}
