package engine

import (
	"context"
	"errors"

	"github.com/hyperops/hyperops/ops"
)

// sweepLimit bounds how many active requests one sweep examines; stores default to a short page (50) otherwise, which
// would leave older orphaned executions unswept.
const sweepLimit = 10000

// Sweep plans received requests left behind (their creator's write of the plan failed, or it died: nobody would
// ever plan them unless their id were sent again), moves on planned requests left behind (the answer of their next
// step was lost: proceed), expires approvals
// whose window closed, reminds and escalates those whose reminder or escalation is due
// (nudge), and finds executions whose lease lapsed (their replica died). With a
// queue those go back on it, so an executor resumes them from their recorded steps (an approved request whose
// enqueue failed, too); without one they are marked interrupted after reading the real state through the
// operation's Observer. It never re-sends a recorded write. It returns the records it changed.
func (e *Engine) Sweep(ctx context.Context) ([]*ops.Record, error) {
	recs, err := e.store.List(ctx, ListQuery{Phases: []ops.Phase{ops.PhaseReceived, ops.PhasePlanned, ops.PhaseAwaitingApproval, ops.PhaseApproved,
		ops.PhaseExecuting}, Limit: sweepLimit})
	if err != nil {
		return nil, stateError("list active requests", err)
	}
	var changed []*ops.Record
	var errs []error
	now := e.opts.Clock.Now()
	for _, rec := range recs {
		var next *ops.Record
		var err error
		switch rec.Phase {
		case ops.PhaseReceived:
			// As a resend of its id would (existing): a creator still planning it holds the planning lock.
			if now.Sub(rec.UpdatedAt) >= receivedGrace {
				next, err = e.planLeftBehind(ctx, rec)
			}
		case ops.PhasePlanned:
			if now.Sub(rec.UpdatedAt) >= e.opts.PlanTTL {
				next, err = e.proceed(ctx, rec)
			}
		case ops.PhaseAwaitingApproval:
			if !rec.Approval.ExpiresAt.IsZero() && !now.Before(rec.Approval.ExpiresAt) {
				next, err = e.expire(ctx, rec)
			} else {
				next, err = e.nudge(ctx, rec, now)
			}
		case ops.PhaseApproved:
			// Approved a while ago and still not started: its enqueue may have failed.
			if e.opts.Queue != nil && now.Sub(rec.UpdatedAt) > 2*e.opts.LockTTL {
				err = e.requeueIfOrphaned(ctx, rec)
			}
		case ops.PhaseExecuting:
			if e.opts.Queue != nil {
				err = e.requeueIfOrphaned(ctx, rec)
			} else {
				next, err = e.interruptIfOrphaned(ctx, rec)
			}
		}
		if errors.Is(err, ops.ErrVersionConflict) {
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

// planLeftBehind plans a received request nobody is planning; nil when someone is.
func (e *Engine) planLeftBehind(ctx context.Context, rec *ops.Record) (*ops.Record, error) {
	op, err := e.catalog.Lookup(rec.Request.Operation)
	if err != nil {
		return nil, err
	}
	next, err := e.planOnce(ctx, op, rec, false)
	if next != nil && next.Version == rec.Version {
		next = nil // its planner holds the lock, or it was moved on meanwhile: nothing changed here
	}
	return next, err
}

// requeueIfOrphaned puts a request whose execution lease is free back on the queue.
func (e *Engine) requeueIfOrphaned(ctx context.Context, rec *ops.Record) error {
	_, held, err := e.locks.Holder(ctx, executionScope(rec.ID()))
	if err != nil || held {
		return err
	}
	return e.opts.Queue.Enqueue(ctx, rec.ID())
}

func (e *Engine) interruptIfOrphaned(ctx context.Context, rec *ops.Record) (*ops.Record, error) {
	_, held, err := e.locks.Holder(ctx, executionScope(rec.ID()))
	if err != nil || held {
		return nil, err
	}
	// Fresh read: the execution may have finished between the list and the lease check.
	rec, err = e.store.Get(ctx, rec.ID())
	if err != nil || rec.Phase != ops.PhaseExecuting {
		return nil, err
	}
	observed, note := e.observe(ctx, rec, "the replica executing it stopped; nothing was re-run")
	return e.move(ctx, rec, ops.PhaseInterrupted, systemActor, note, func(r *ops.Record) {
		if observed != nil {
			r.Result = observed
		}
		r.Errors = append(r.Errors, ops.Errorf(ops.CodeInternal, "", "use Take over, then Resume or Stop", "execution was interrupted"))
	})
}
