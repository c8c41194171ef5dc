package engine

import (
	"context"
	"errors"

	"github.com/hyperops/hyperops/ops"
)

// Cancel withdraws a request that has not started executing. Only its owner (the requester, or whoever took it
// over) may cancel.
func (e *Engine) Cancel(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error) {
	return e.withRecord(ctx, id, func(rec *ops.Record) (*ops.Record, error) {
		if rec.Owner.ID != who.ID {
			return rec, ops.Errorf(ops.CodeNotAuthorized, "", "ask "+rec.Owner.Display()+" or a lead to stop it",
				"only the owner of %s (%s) can cancel it", id, rec.Owner.Display())
		}
		switch rec.Phase {
		case ops.PhaseReceived, ops.PhasePlanned, ops.PhaseAwaitingApproval, ops.PhaseApproved:
			return e.move(ctx, rec, ops.PhaseCancelled, who, "cancelled by "+who.Display(), nil)
		}
		return rec, ops.Errorf(ops.CodeInvalidPhase, "", "a request can be cancelled only before it executes",
			"request %s is %s", id, rec.Phase)
	})
}

// Stop ends a request on behalf of an approver: pending requests are cancelled and an interrupted one is closed
// without re-executing. An executing request cannot be stopped from here.
func (e *Engine) Stop(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error) {
	return e.withRecord(ctx, id, func(rec *ops.Record) (*ops.Record, error) {
		if err := e.checkSteward(ctx, rec, who); err != nil {
			return rec, err
		}
		switch rec.Phase {
		case ops.PhaseReceived, ops.PhasePlanned, ops.PhaseAwaitingApproval, ops.PhaseApproved:
			return e.move(ctx, rec, ops.PhaseCancelled, who, "stopped by "+who.Display(), nil)
		case ops.PhaseInterrupted:
			next, err := e.move(ctx, rec, ops.PhaseCancelled, who, "stopped by "+who.Display(), nil)
			if err == nil {
				e.releaseHeld(ctx, next)
			}
			return next, err
		}
		return rec, ops.Errorf(ops.CodeInvalidPhase, "", "stop the workload itself (e.g. "+ops.Ask("train stop name=…")+")",
			"request %s is %s", id, rec.Phase)
	})
}

// TakeOver makes a person the owner of a request (typically one an agent started); it is recorded.
func (e *Engine) TakeOver(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error) {
	return e.withRecord(ctx, id, func(rec *ops.Record) (*ops.Record, error) {
		if err := e.checkTakeOver(ctx, rec, who); err != nil {
			return rec, err
		}
		if rec.Owner.ID == who.ID {
			return rec, nil
		}
		return e.move(ctx, rec, rec.Phase, who, "taken over by "+who.Display(), func(r *ops.Record) { r.Owner = who })
	})
}

// Resume re-runs an interrupted request for its owner: it is re-planned, and if anything changed since approval
// it asks for approval again rather than executing blindly.
func (e *Engine) Resume(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error) {
	rec, err := e.withRecord(ctx, id, func(rec *ops.Record) (*ops.Record, error) {
		if rec.Owner.ID != who.ID {
			return rec, ops.Errorf(ops.CodeNotAuthorized, "", "take the request over first", "only the owner of %s can resume it", id)
		}
		if rec.Phase != ops.PhaseInterrupted {
			return rec, ops.Errorf(ops.CodeInvalidPhase, "", "only interrupted requests resume", "request %s is %s", id, rec.Phase)
		}
		return e.move(ctx, rec, ops.PhaseApproved, who, "resumed by "+who.Display(), func(r *ops.Record) { r.Execution = nil })
	})
	if err != nil {
		return rec, err
	}
	return e.dispatch(ctx, rec)
}

// checkSteward allows humans who may approve the request (never agents).
func (e *Engine) checkSteward(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	if who.Kind != ops.Human {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a person to do it", "only people can stop or take over requests")
	}
	if e.policy == nil || rec.Owner.ID == who.ID {
		return nil
	}
	err := e.policy.CheckVoter(ctx, rec, who)
	var ue *ops.Error
	if errors.As(err, &ue) && ue.Code == ops.CodeSelfApproval {
		return nil // the requester may always stop their own request
	}
	return err
}

// TakeOverPolicy is a Policy that also decides who may take a request over. Without it, whoever may vote on the
// request may.
type TakeOverPolicy interface {
	// CheckTakeOver reports whether who may become the owner of rec (E_NOT_AUTHORIZED otherwise).
	CheckTakeOver(ctx context.Context, rec *ops.Record, who ops.Initiator) error
}

// checkTakeOver allows people who may approve the request, never its requester for being its requester: a
// requester who is no approver could otherwise take a request back from the lead who took it over, and resume it.
func (e *Engine) checkTakeOver(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	if who.Kind != ops.Human {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a person to do it", "only people can stop or take over requests")
	}
	if e.policy == nil || rec.Owner.ID == who.ID {
		return nil
	}
	if tp := e.features.TakeOver; tp != nil {
		return tp.CheckTakeOver(ctx, rec, who)
	}
	err := e.policy.CheckVoter(ctx, rec, who)
	var ue *ops.Error
	if errors.As(err, &ue) && ue.Code == ops.CodeSelfApproval {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask an approver to take it over; to end it, use Stop",
			"only approvers take over requests, and you asked for %s", rec.ID())
	}
	return err
}

// releaseHeld frees the scope lock an interrupted request kept while its outcome was unknown. Acquiring as the
// request refreshes the lock if it is still the request's and yields its token; another holder's is left alone.
func (e *Engine) releaseHeld(ctx context.Context, rec *ops.Record) {
	op, err := e.catalog.Lookup(rec.Request.Operation)
	if err != nil {
		return
	}
	scope := lockScope(op.Spec(), rec.Request)
	if scope.IsZero() {
		return
	}
	if l, err := e.locks.Acquire(ctx, scope, rec.ID(), e.opts.LockTTL); err == nil {
		e.release(l)
	}
}
