package ops

import (
	"context"
	"errors"
)

// sweepLimit bounds how many active requests one sweep examines; stores default to a short page (50) otherwise, which
// would leave older orphaned executions unswept.
const sweepLimit = 10000

// Sweep expires approvals whose window closed and marks executions whose lease lapsed (their replica died) as
// interrupted, reading the real state through the operation's Observer when it has one. It never re-executes.
// It returns the records it changed.
func (e *Engine) Sweep(ctx context.Context) ([]*Record, error) {
	recs, err := e.store.List(ctx, ListQuery{Phases: []Phase{PhaseAwaitingApproval, PhaseExecuting}, Limit: sweepLimit})
	if err != nil {
		return nil, stateError("list active requests", err)
	}
	var changed []*Record
	var errs []error
	now := e.opts.Clock.Now()
	for _, rec := range recs {
		var next *Record
		var err error
		switch rec.Phase {
		case PhaseAwaitingApproval:
			if !rec.Approval.ExpiresAt.IsZero() && !now.Before(rec.Approval.ExpiresAt) {
				next, err = e.expire(ctx, rec)
			}
		case PhaseExecuting:
			next, err = e.interruptIfOrphaned(ctx, rec)
		}
		if errors.Is(err, ErrVersionConflict) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if next != nil {
			changed = append(changed, next)
		}
	}
	return changed, errors.Join(errs...)
}

func (e *Engine) interruptIfOrphaned(ctx context.Context, rec *Record) (*Record, error) {
	_, held, err := e.locks.Holder(ctx, executionScope(rec.ID()))
	if err != nil || held {
		return nil, err
	}
	// Fresh read: the execution may have finished between the list and the lease check.
	rec, err = e.store.Get(ctx, rec.ID())
	if err != nil || rec.Phase != PhaseExecuting {
		return nil, err
	}
	note := "replica " + rec.Replica + " stopped while executing; nothing was re-run"
	var observed *Result
	if op, lerr := e.catalog.Lookup(rec.Request.Operation); lerr == nil {
		if o, ok := op.(Observer); ok {
			if res, oerr := o.Observe(ctx, &rec.Request); oerr == nil {
				observed = res
				note += "; observed: " + res.Summary
			}
		}
	}
	return e.move(ctx, rec, PhaseInterrupted, systemActor, note, func(r *Record) {
		if observed != nil {
			r.Result = observed
		}
		r.Errors = append(r.Errors, Errorf(CodeInternal, "", "use Take over, then Resume or Stop", "execution was interrupted"))
	})
}
