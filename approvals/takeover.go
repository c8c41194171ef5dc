package approvals

import (
	"context"
	"fmt"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// CheckTakeOver reports whether who may become the owner of the request (and so resume it): a person in the
// request's approver group (with approvals.requireChannelMembership, also in its channel), or in the
// approvals.operators group. Being the requester grants nothing here: the requester may Stop their request, not
// take it back from the lead who took it over.
func (p *Policy) CheckTakeOver(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	groupName := p.approverGroup(rec)
	if err := p.checkPerson(who, groupName); err != nil {
		return err
	}
	if g, ok := p.cfg.Approvals.Groups[p.cfg.Approvals.Operators]; ok && p.cfg.Approvals.Operators != "" {
		if in, _ := p.inGroup(ctx, g, who.ID); in {
			return nil
		}
	}
	err := p.checkGroup(ctx, rec, who, groupName)
	if err == nil && p.cfg.Approvals.RequireChannelMembership {
		err = p.checkChannel(ctx, rec, who)
	}
	if err == nil {
		return nil
	}
	ue := ops.AsError(err)
	ue.Message = "only approvers can take over requests: " + ue.Message
	if ue.Err == nil { // a membership that could not be read keeps its own next step (retry)
		ue.Next = p.takeOverNext(groupName, rec, who)
	}
	return ue
}

func (p *Policy) takeOverNext(groupName string, rec *ops.Record, who ops.Initiator) string {
	ask := "ask a person in approver group " + groupName
	if op := p.cfg.Approvals.Operators; op != "" {
		ask += " or in operators group " + op
	}
	ask += " to take it over"
	if who.ID == rec.Request.Initiator.ID {
		return ask + "; to end your request, use Stop"
	}
	return fmt.Sprintf("%s, or a platform admin to add you to approvals.groups.%s", ask, groupName)
}

var _ engine.TakeOverPolicy = (*Policy)(nil)
