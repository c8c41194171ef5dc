package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// ApproverResolver is a Policy that can say who may vote on a request now, its approver groups' user groups
// resolved to their members (approvals.Policy implements it). The sweep asks it whom a reminder mentions; without
// it, or when it fails, the reminder mentions the group as configured.
type ApproverResolver interface {
	Voters(ctx context.Context, rec *ops.Record) ([]string, error)
}

// nudge records the reminder and then the escalation of a request awaiting approval when they are due, each once
// across replicas and restarts: each is a history entry (KindReminder, KindEscalation) stored by compare-and-set on
// the record's version together with its flag (Approval.Reminded, Approval.Escalated), so of two replicas sweeping
// at once one stores it and the other loses the compare-and-set; the store appends the entry to the outbox in the
// same step, and the outbox tells it once. When the store's answer is lost, the entry is stored or not, and the
// next sweep reads which: a stored one is never recorded again, a missing one is recorded then. A request that is
// no longer awaiting approval (decided, expired, cancelled) is never swept here, and the expiry wins over both:
// Sweep expires a request whose window closed instead of nudging it.
func (e *Engine) nudge(ctx context.Context, rec *ops.Record, now time.Time) (*ops.Record, error) {
	var out *ops.Record
	a := rec.Approval
	if !a.Reminded && !a.RemindAt.IsZero() && !now.Before(a.RemindAt) {
		users := e.pendingVoters(ctx, rec)
		note := fmt.Sprintf("reminded: %d of %d approvals so far", a.Received(), a.Required)
		next, err := e.moveKind(ctx, rec, rec.Phase, systemActor, note, ops.KindReminder, func(r *ops.Record) {
			r.Approval.Reminded, r.Approval.RemindUsers = true, users
		})
		if err != nil {
			return nil, err
		}
		rec, out = next, next
	}
	a = rec.Approval
	if !a.Escalated && a.EscalateTo != "" && !a.EscalateAt.IsZero() && !now.Before(a.EscalateAt) {
		note := fmt.Sprintf("escalated to %s: %d of %d approvals so far", a.EscalateTo, a.Received(), a.Required)
		next, err := e.moveKind(ctx, rec, rec.Phase, systemActor, note, ops.KindEscalation, func(r *ops.Record) {
			r.Approval.Escalated = true
		})
		if err != nil {
			return out, err
		}
		out = next
	}
	return out, nil
}

// pendingVoters are who may vote on rec and have not voted on its current plan, without its requester: nil when
// the policy cannot say.
func (e *Engine) pendingVoters(ctx context.Context, rec *ops.Record) []string {
	r := e.features.Approvers
	if r == nil {
		return nil
	}
	voters, err := r.Voters(ctx, rec)
	if err != nil {
		e.report(rec.ID(), fmt.Errorf("resolve whom the reminder mentions: %w", err))
		return nil
	}
	out := []string{}
	for _, id := range voters {
		if id != rec.Request.Initiator.ID && !hasVoted(rec, id) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
