package ops

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// executionScope is the lease an executing replica holds on a request; when it lapses, the request is interrupted.
func executionScope(id string) LockScope { return LockScope{Cluster: "_", Kind: "execution", Name: id} }

// Execute moves an approved request to executing (exactly one caller wins), takes its locks, re-plans, and runs
// it. A plan whose hash changed since approval goes back to awaiting-approval (E_STALE_PLAN) instead.
func (e *Engine) Execute(ctx context.Context, id string) (*Record, error) {
	rec, err := e.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Phase != PhaseApproved {
		return rec, nil // someone else moved it on: nothing to do, and never a second execution
	}
	op, err := e.catalog.Lookup(rec.Request.Operation)
	if err != nil {
		return rec, err
	}
	lease, err := e.locks.Acquire(ctx, executionScope(id), id+"@"+e.opts.Replica, e.opts.LockTTL)
	if err != nil {
		var held *LockHeldError
		if errors.As(err, &held) {
			return rec, nil // another replica is on it
		}
		return rec, stateError("take the execution lease", err)
	}
	defer e.release(lease)
	rec, err = e.move(ctx, rec, PhaseExecuting, systemActor, "executing on "+e.opts.Replica, func(r *Record) { r.Replica = e.opts.Replica })
	if errors.Is(err, ErrVersionConflict) {
		return e.Get(ctx, id)
	}
	if err != nil {
		return nil, stateError("start the execution", err)
	}
	return e.run(ctx, op, rec, lease)
}

func (e *Engine) run(ctx context.Context, op Operation, rec *Record, lease *Lock) (*Record, error) {
	spec := op.Spec()
	fence := lease.Fence
	locks := []*Lock{lease}
	var scopeLock *Lock
	if scope := lockScope(spec, rec.Request); !scope.IsZero() {
		l, err := e.locks.Acquire(ctx, scope, rec.ID(), e.opts.LockTTL)
		var held *LockHeldError
		switch {
		case errors.As(err, &held):
			return e.finish(ctx, rec, nil, lockedError(scope, held.Holder))
		case err != nil:
			return e.finish(ctx, rec, nil, stateError("take the lock", err))
		}
		scopeLock = l
		locks = append(locks, l)
		fence = l.Fence
	}
	ctx, stop := e.keepLocks(ctx, locks)
	defer stop()
	defer func() {
		if scopeLock != nil {
			e.release(scopeLock)
		}
	}()

	p, err := e.makePlan(ctx, op, rec.Request)
	if err != nil {
		return e.finish(ctx, rec, nil, err)
	}
	if p.Hash != rec.Plan.Hash {
		if back, again, err := e.replan(ctx, rec, p); again {
			return back, err
		}
	}
	rec, err = e.move(ctx, rec, PhaseExecuting, systemActor, fmt.Sprintf("fence %d", fence), func(r *Record) { r.Fence, r.Plan = fence, p })
	if err != nil {
		return nil, stateError("record the fence", err)
	}
	if pn, ok := e.opts.Notifier.(ProgressNotifier); ok {
		executing := rec
		ctx = WithProgress(ctx, func(msg string) { pn.Progress(ctx, executing, msg) })
	}
	res, runErr := op.Execute(ctx, &rec.Request, p, Execution{Fence: fence, Replica: e.opts.Replica})
	// The scope is free before the outcome is told: whoever reads "succeeded" may submit the next change to the
	// same object at once, and must not find it still locked. The execution lease stays until the outcome is
	// stored, so a crash in between still ends as interrupted.
	stop()
	if scopeLock != nil {
		e.release(scopeLock)
		scopeLock = nil
	}
	return e.finish(context.WithoutCancel(ctx), rec, res, runErr)
}

// replan handles a plan that changed between approval and execution. It reports whether the request went back
// to approval (or failed), with the record as stored then; a request that needs no approval under the new plan
// goes on.
func (e *Engine) replan(ctx context.Context, rec *Record, p *Plan) (*Record, bool, error) {
	appr, err := e.requirement(ctx, rec.Request, p)
	if err != nil {
		failed, ferr := e.finish(ctx, rec, nil, err)
		return failed, true, ferr
	}
	if appr.Required == 0 {
		return rec, false, nil
	}
	stale := Errorf(CodeStalePlan, "", "review the new plan and approve again",
		"the plan changed since it was approved (%s → %s); earlier votes no longer count", ShortHash(rec.Plan.Hash), ShortHash(p.Hash))
	back, err := e.move(ctx, rec, PhaseAwaitingApproval, systemActor, stale.Message, func(r *Record) {
		r.Plan, r.Approval = p, appr
		r.Errors = append(r.Errors, stale)
	})
	if err != nil {
		return rec, true, stateError("store the new plan", err)
	}
	return back, true, stale
}

// finish records the outcome of an execution.
func (e *Engine) finish(ctx context.Context, rec *Record, res *Result, runErr error) (*Record, error) {
	to, note := PhaseSucceeded, ""
	if res != nil {
		note = res.Summary
	}
	var ue *Error
	if runErr != nil {
		to, ue = PhaseFailed, AsError(runErr)
		note = ue.Message
	}
	next, err := e.move(ctx, rec, to, systemActor, note, func(r *Record) {
		r.Result = res
		if ue != nil {
			r.Errors = append(r.Errors, ue)
		}
	})
	if err != nil {
		// The lease lapses and a sweep marks the request interrupted; it is never re-executed blindly.
		return rec, errors.Join(runErr, stateError("record the result", err))
	}
	if ue != nil {
		return next, ue
	}
	return next, nil
}

// keepLocks renews locks until stop is called. If a renewal fails, the returned context is cancelled, so an
// execution never goes on without its locks.
func (e *Engine) keepLocks(ctx context.Context, locks []*Lock) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := e.opts.Clock.NewTicker(e.opts.LockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.Chan():
				for _, l := range locks {
					if err := e.locks.Renew(ctx, l, e.opts.LockTTL); err != nil {
						cancel(fmt.Errorf("lock %s lost: %w", l.Scope, err))
						return
					}
				}
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			cancel(nil)
		})
	}
}

func (e *Engine) release(l *Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.locks.Release(ctx, l) // a lost release only means the lock expires by its TTL
}
