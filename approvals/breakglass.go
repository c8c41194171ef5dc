package approvals

import (
	"context"
	"fmt"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

var _ engine.BreakGlassPolicy = (*Policy)(nil)

// CheckBreakGlass implements engine.BreakGlassPolicy: who, the requester, is a person (an ID registered as an agent
// never is) in the on-call group the request's rule named (Approval.BreakGlass), as that group is configured now —
// checked on every click, never trusted from the button. A membership that cannot be read refuses.
func (p *Policy) CheckBreakGlass(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	if p.kindOf(who) != ops.Human {
		return ops.Errorf(ops.CodeNotAuthorized, "", askGroup(rec.Approval.Approvers), "%s cannot break glass: agents never do", display(who))
	}
	name := rec.Approval.BreakGlass
	group, ok := p.cfg.Approvals.Groups[name]
	if name == "" || !ok {
		return ops.Errorf(ops.CodeNotAuthorized, "", askGroup(rec.Approval.Approvers),
			"request %s names no on-call group that may break glass (approvals.groups.%s is not configured)", rec.ID(), name)
	}
	in, err := p.inGroup(ctx, group, who.ID)
	switch {
	case in:
		return nil
	case err != nil:
		return ops.Wrap(err, ops.CodeNotAuthorized, "", "retry in a minute; if it persists, check the bot's Slack scope usergroups:read and its log",
			"could not confirm that %s is in on-call group %s: a Slack user group could not be read", display(who), name)
	}
	return ops.Errorf(ops.CodeNotAuthorized, "",
		fmt.Sprintf("wait for %s to approve it, or ask a platform admin to add you to approvals.groups.%s", rec.Approval.Approvers, name),
		"%s is not on call: only members of %s (%s) may break glass on %s", display(who), name, describeGroup(group), rec.ID())
}

// CheckAcknowledge implements engine.BreakGlassPolicy: a lead is a person in the request's approver group (listed, or
// through one of its user groups), as configured now.
func (p *Policy) CheckAcknowledge(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	groupName := p.approverGroup(rec)
	if err := p.checkPerson(who, groupName); err != nil {
		return err
	}
	return p.checkGroup(ctx, rec, who, groupName)
}
