package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/progress"
)

// executionScope is the lease an executing replica holds on a request; when it lapses, another replica resumes it.
func executionScope(id string) ops.LockScope {
	return ops.LockScope{Cluster: "_", Kind: "execution", Name: id}
}

// outcome is how one execution attempt ended, for the queue.
type outcome int

const (
	// outcomeFinished: the request is terminal (or was never this replica's to run): the entry is done.
	outcomeFinished outcome = iota
	// outcomeHandedOver: this replica is stopping; the request goes back on the queue to be resumed.
	outcomeHandedOver
	// outcomeElsewhere: another replica holds the execution lease.
	outcomeElsewhere
	// outcomeRetry: the state store failed; try again later.
	outcomeRetry
)

// DefaultWriteTimeout bounds the one call that changes the world (Options.WriteTimeout); it is not cut
// short by a hand-over, so a write in flight when the replica stops is finished and recorded. Reading back a
// write whose answer was lost has the same bound.
const DefaultWriteTimeout = time.Duration(config.DefaultWriteTimeout)

// DefaultHoldTTL is how long the scope lock of a request interrupted with an unknown outcome stays held for a
// person to choose Stop or Take over (Options.HoldTTL).
const DefaultHoldTTL = 24 * time.Hour

// Execute runs an approved request on this replica, or resumes an executing one whose replica went away: a
// recorded write is only observed, a write whose outcome is unknown ends interrupted after reading the real state.
// Exactly one replica executes a request at a time (the execution lease); a plan whose observed state changed
// since approval goes back to awaiting-approval (E_STALE_PLAN).
func (e *Engine) Execute(ctx context.Context, id string) (*ops.Record, error) {
	rec, _, err := e.execute(ctx, id)
	return rec, err
}

func (e *Engine) execute(ctx context.Context, id string) (*ops.Record, outcome, error) {
	rec, err := e.Get(ctx, id)
	if err != nil {
		if errors.Is(err, ops.ErrNotFound) || ops.AsError(err).Code == ops.CodeNotFound {
			return nil, outcomeFinished, err
		}
		return nil, outcomeRetry, err
	}
	if rec.Phase != ops.PhaseApproved && rec.Phase != ops.PhaseExecuting {
		return rec, outcomeFinished, nil // someone else moved it on: nothing to do, and never a second execution
	}
	op, err := e.catalog.Lookup(rec.Request.Operation)
	if err != nil {
		return rec, outcomeFinished, err
	}
	// The owner is unique per attempt: two attempts on one replica must not share (refresh) one lease.
	lease, err := e.locks.Acquire(ctx, executionScope(id), id+"@"+e.opts.Replica+"#"+randomID(4), e.opts.LockTTL)
	if err != nil {
		var held *ops.LockHeldError
		if errors.As(err, &held) {
			return rec, outcomeElsewhere, nil // another replica is on it
		}
		return rec, outcomeRetry, stateError("take the execution lease", err)
	}
	defer e.release(lease)
	rec, err = e.start(ctx, op, rec)
	if errors.Is(err, ops.ErrVersionConflict) {
		rec, _ = e.store.Get(ctx, id)
		return rec, outcomeElsewhere, nil
	}
	if err != nil {
		return rec, outcomeRetry, stateError("start the execution", err)
	}
	x := &executor{e: e, op: op, id: id, lease: lease}
	return x.run(ctx, rec)
}

// start moves an approved request to executing with its budget's deadline, or records that this replica resumes
// an executing one.
func (e *Engine) start(ctx context.Context, op ops.Operation, rec *ops.Record) (*ops.Record, error) {
	now := e.opts.Clock.Now()
	if rec.Phase == ops.PhaseApproved {
		return e.move(ctx, rec, ops.PhaseExecuting, systemActor, "executing on "+e.opts.Replica, func(r *ops.Record) {
			r.Replica = e.opts.Replica
			r.Execution = &ops.ExecutionState{Deadline: now.Add(e.budget(op.Spec()))}
		})
	}
	from := rec.Replica
	return e.record(ctx, rec, ops.KindStep, "resumed (left by "+from+")", func(r *ops.Record) {
		r.Replica = e.opts.Replica
		if r.Execution == nil {
			r.Execution = &ops.ExecutionState{Deadline: now.Add(e.budget(op.Spec()))}
		}
		r.Execution.Handovers++
	})
}

func (e *Engine) budget(s ops.Spec) time.Duration {
	b := s.Budget
	if b == "" {
		b = ops.BudgetKubernetes
	}
	if d, ok := e.opts.Budgets[b]; ok && d > 0 {
		return d
	}
	return ops.DefaultBudgets[b]
}

// record stores an entry of the request's history that keeps its phase (a step or progress).
func (e *Engine) record(ctx context.Context, rec *ops.Record, kind ops.TransitionKind, note string, fn func(*ops.Record)) (*ops.Record, error) {
	return e.moveKind(ctx, rec, rec.Phase, systemActor, note, kind, fn)
}

// executor is one execution attempt of one request on this replica.
type executor struct {
	e     *Engine
	op    ops.Operation
	id    string
	lease *Lock
	scope *Lock
	// mu orders this attempt's writes to the record (progress reports come from the operation's goroutines).
	mu sync.Mutex
	// finalMu guards finals: the notes progress.Final kept for the outcome.
	finalMu sync.Mutex
	finals  []string
}

func (x *executor) run(ctx context.Context, rec *ops.Record) (*ops.Record, outcome, error) {
	e := x.e
	fence := x.lease.Fence
	locks := []*Lock{x.lease}
	if scope := lockScope(x.op.Spec(), rec.Request); !scope.IsZero() {
		l, err := e.locks.Acquire(ctx, scope, rec.ID(), e.opts.LockTTL)
		var held *ops.LockHeldError
		switch {
		case errors.As(err, &held):
			return x.finish(ctx, nil, lockedError(scope, held.Holder))
		case err != nil:
			return rec, outcomeRetry, stateError("take the lock", err)
		}
		x.scope, fence = l, l.Fence
		locks = append(locks, l)
	}
	lctx, stop := e.keepLocks(ctx, locks)
	defer stop()
	handedOver := false
	defer func() {
		if x.scope != nil && !handedOver {
			e.release(x.scope)
		}
	}()
	xn := ops.Execution{RequestID: x.id, Fence: fence, Replica: e.opts.Replica, Guard: func(ctx context.Context) error { return e.guard(ctx, locks) }}
	// The budget's end is recorded in the engine's clock; contexts run on real time, so what is left of it counts.
	left := rec.Execution.Deadline.Sub(e.opts.Clock.Now())
	bctx, cancel := context.WithTimeout(lctx, left)
	defer cancel()
	bctx = x.withProgress(bctx, bctx)

	ex := rec.Execution
	var written []byte
	switch {
	case !ex.WriteAccepted.IsZero():
		written = ex.Written // resumed after the write: observe only
		xn.WriteStarted, xn.Marks = ex.WriteStarted, ex.Marks
	case !ex.WriteStarted.IsZero():
		// The replica that sent the write stopped before recording its answer: read the real state, never re-send.
		stop()
		return x.interrupt(ctx, rec, "the replica that was sending the change stopped before recording AWS's or the cluster's answer; nothing was sent again")
	default:
		var out outcome
		var err error
		rec, out, err = x.contract(bctx, rec)
		if out == outcomeRetry || rec == nil || rec.Phase != ops.PhaseExecuting { // retry: the check could not finish, nothing is sent
			return rec, out, err
		}
		if rec, err = x.step(ctx, fmt.Sprintf("fence %d; sending the change", fence), func(r *ops.Record) {
			r.Fence = fence
			r.Execution.WriteStarted = e.opts.Clock.Now()
		}); err != nil {
			// The script may have run although its answer was lost; this replica knows it sent nothing, so it says
			// so before letting go: a resumer then runs from the start instead of ending the request interrupted.
			x.withdrawWrite(ctx, fence)
			return rec, outcomeRetry, stateError("record the write", err)
		}
		xn.WriteStarted = rec.Execution.WriteStarted
		wctx, wcancel := x.writeContext(bctx, left)
		res, wrote, err := x.write(wctx, rec, xn)
		wcancel()
		accepted := "change accepted"
		if errors.Is(err, ops.ErrOutcomeUnknown) {
			// The answer was lost, not the change: read back, never send it blindly again.
			v, vw, verr := x.verify(ctx, bctx, left, rec, xn, err)
			switch v {
			case ops.VerdictApplied:
				wrote, err, accepted = vw, nil, "change accepted (read back after the answer was lost)"
			case ops.VerdictNotApplied:
				stop()
				x.freeScope()
				return x.finish(ctx, nil, notApplied(err, verr))
			default:
				stop()
				return x.interruptUnknown(ctx, rec, err, verr)
			}
		}
		if err != nil || res != nil {
			stop()
			x.freeScope()
			return x.finish(ctx, res, err)
		}
		written = wrote
		// Recorded even when the replica is stopping meanwhile: a write sent must never look unknown.
		if err := x.stepPersisting(context.WithoutCancel(ctx), accepted, func(r *ops.Record) {
			r.Execution.WriteAccepted = e.opts.Clock.Now()
			r.Execution.Written = wrote
		}); err != nil {
			// Sent but not recorded: a replica resuming it reads the real state instead of sending it again, and
			// until then nobody else may change what this write changed.
			x.holdScope(ctx)
			return rec, outcomeRetry, stateError("record the accepted write", err)
		}
	}
	steps := x.op.(ops.Steps)
	// From here on the execution only observes: it gives its worker and cluster slots back (the locks stay held
	// until it ends), so a long wait for AWS or the cluster never holds up the next write.
	defer startObserving(ctx)() // until the outcome is stored; a panicking Await ends it too
	res, err := steps.Await(bctx, &rec.Request, rec.Plan, written, xn)
	if err != nil && errors.Is(context.Cause(ctx), ErrHandover) {
		handedOver = true
		stop()
		return x.handover(ctx, rec)
	}
	stop()
	x.freeScope()
	return x.finish(ctx, res, err)
}

// writeContext bounds a write (or its read-back) by the write timeout and what is left of the budget; it is
// detached from the execution's cancellation, so a hand-over does not cut a write in flight short.
func (x *executor) writeContext(bctx context.Context, left time.Duration) (context.Context, context.CancelFunc) {
	detached := x.withProgress(context.WithoutCancel(bctx), bctx)
	return context.WithTimeout(detached, max(min(x.e.opts.WriteTimeout, left), time.Millisecond))
}

// verify reads back, through the operation's Verifier, whether a write whose answer was lost took effect.
func (x *executor) verify(ctx, bctx context.Context, left time.Duration, rec *ops.Record, xn ops.Execution, writeErr error) (ops.Verdict, []byte, error) {
	vf, ok := x.op.(ops.Verifier)
	if !ok {
		return ops.VerdictUnknown, nil, errors.New("this operation cannot read back its change")
	}
	// Progress, not a step: the thread tells people why the change takes a moment longer.
	note := "the answer to the change was lost (" + ops.AsError(writeErr).Message + "); reading back whether it took effect, without sending it again"
	dctx := context.WithoutCancel(ctx)
	if _, err := x.update(dctx, func(r *ops.Record) (*ops.Record, error) {
		return x.e.record(dctx, r, ops.KindProgress, note, nil)
	}); err != nil {
		return ops.VerdictUnknown, nil, stateError("record the lost answer", err)
	}
	vctx, cancel := x.writeContext(bctx, left)
	defer cancel()
	v, written, err := vf.Verify(vctx, &rec.Request, rec.Plan, xn)
	if v == ops.VerdictApplied && written == nil {
		written = []byte("null")
	}
	return v, written, err
}

// notApplied is the failure of a write whose read-back found nothing changed: the refusal the read-back got, or
// the write's own error.
func notApplied(writeErr, verifyErr error) error {
	cause := writeErr
	if verifyErr != nil {
		cause = verifyErr
	}
	ue := *ops.AsError(cause)
	ue.Message += "; read back: nothing changed"
	return &ue
}

// interruptUnknown ends an execution whose write's answer was lost and whose read-back could not tell whether it
// took effect: people decide, and the scope lock stays held until they do.
func (x *executor) interruptUnknown(ctx context.Context, rec *ops.Record, writeErr, verifyErr error) (*ops.Record, outcome, error) {
	why := "the answer to the change was lost (" + ops.AsError(writeErr).Message + ") and reading back could not tell whether it took effect"
	if verifyErr != nil {
		why += " (" + ops.AsError(verifyErr).Message + ")"
	}
	return x.interrupt(ctx, rec, why+"; nothing was sent again")
}

// holdScope keeps the scope lock past this attempt for HoldTTL, so it is not released when the attempt returns;
// it returns the lock it holds, or nil when there is none or it could not be renewed.
func (x *executor) holdScope(ctx context.Context) *Lock {
	l := x.scope
	if l == nil || x.e.locks.Renew(context.WithoutCancel(ctx), l, x.e.opts.HoldTTL) != nil {
		return nil
	}
	x.scope = nil
	return l
}

// freeScope releases the scope before the outcome is told: whoever reads "succeeded" may submit the next change
// to the same object at once and must not find it still locked. The execution lease stays until the outcome is
// stored, so a crash in between is resumed, not lost. A release Redis did not answer is kept for the executor's
// last release, once the outcome is stored (Redis answers again by then), rather than left to the lock's TTL.
func (x *executor) freeScope() {
	if x.scope != nil && x.e.releaseErr(x.scope) == nil {
		x.scope = nil
	}
}

// write sends the change: Steps.Write, or the whole Execute of an operation without steps (its result is then
// returned at once).
func (x *executor) write(ctx context.Context, rec *ops.Record, xn ops.Execution) (*ops.Result, []byte, error) {
	if s, ok := x.op.(ops.Steps); ok {
		wrote, err := s.Write(ctx, &rec.Request, rec.Plan, xn)
		if err != nil {
			return nil, nil, err
		}
		if wrote == nil {
			wrote = []byte("null")
		}
		return nil, wrote, nil
	}
	res, err := x.op.Execute(ctx, &rec.Request, rec.Plan, xn)
	if err == nil && res == nil {
		res = &ops.Result{}
	}
	return res, nil, err
}

// contract checks, right before the write, that the plan the approvers saw still holds: it re-reads only the
// observed state the plan's hash covers (Rechecker), and re-plans only when that changed. A plan whose hash
// changed goes back to approval (E_STALE_PLAN) unless the new plan needs none.
func (x *executor) contract(ctx context.Context, rec *ops.Record) (*ops.Record, outcome, error) {
	e := x.e
	if rc, ok := x.op.(ops.Rechecker); ok && rec.Plan != nil {
		observed, err := rc.Recheck(ctx, &rec.Request, rec.Plan)
		if err != nil {
			return x.refuse(ctx, rec, err)
		}
		if observed == rec.Plan.Observed {
			return rec, outcomeFinished, nil
		}
	}
	p, err := e.makePlan(ctx, x.op, rec.Request)
	if err != nil {
		return x.refuse(ctx, rec, err)
	}
	if rec.Plan != nil && p.Hash == rec.Plan.Hash {
		return rec, outcomeFinished, nil
	}
	// The new plan is placed in its budgets as a new request's is: over a budget it needs the overBudget rule's
	// approval, or it is refused.
	appr, err := e.approvalFor(ctx, rec, p)
	if err != nil {
		return x.refuse(ctx, rec, err)
	}
	if appr.Required == 0 {
		return x.replanned(ctx, rec, p, appr)
	}
	old := ""
	if rec.Plan != nil {
		old = ops.ShortHash(rec.Plan.Hash)
	}
	stale := ops.Errorf(ops.CodeStalePlan, "", "review the new plan and approve again",
		"the plan changed since it was approved (%s → %s); earlier votes no longer count", old, ops.ShortHash(p.Hash))
	back, err := x.update(ctx, func(r *ops.Record) (*ops.Record, error) {
		return e.move(ctx, r, ops.PhaseAwaitingApproval, systemActor, stale.Message, func(r *ops.Record) {
			r.Plan, r.Approval, r.Execution = p, appr, nil
			r.Grant = nil // the grant approved the old plan; the new one waits for votes
			r.Errors = append(r.Errors, stale)
		})
	})
	if err != nil {
		return back, outcomeRetry, stateError("store the new plan", err)
	}
	return back, outcomeFinished, stale
}

// replanned goes on with the new plan p, which needs no approval, once it passed the gate: the budget is held for
// the new plan (the old plan's hold given back in the same step) or the request fails, nothing written.
func (x *executor) replanned(ctx context.Context, rec *ops.Record, p *ops.Plan, appr ops.Approval) (*ops.Record, outcome, error) {
	e := x.e
	d := Decision{Path: ops.ByReplan, By: systemActor}
	candidate := rec.Clone()
	candidate.Plan, candidate.Approval = p, appr
	candidate.Approval.DecidedBy = d.Path
	if err := e.admit(ctx, candidate, d); err != nil {
		return x.refuse(ctx, rec, err)
	}
	next, err := x.step(ctx, "plan refreshed", func(r *ops.Record) {
		r.Plan, r.Approval = p, appr
		approvedBy(d)(r)
	})
	if err != nil {
		return rec, outcomeRetry, stateError("store the new plan", err)
	}
	return next, outcomeFinished, nil
}

// refuse ends, before its write, an execution whose contract check failed: failed with the cause, unless the
// cause is the state store not answering (a failover, an outage), which says nothing about the request: it is left
// executing with nothing sent, and the queue delivers it again once the store answers.
func (x *executor) refuse(ctx context.Context, rec *ops.Record, err error) (*ops.Record, outcome, error) {
	if errors.Is(err, ops.ErrStateUnavailable) {
		return rec, outcomeRetry, err
	}
	return x.finish(ctx, nil, err)
}

// update applies fn to the latest record while this replica still executes it, retrying lost compare-and-sets
// (a person taking the request over changes its version meanwhile).
func (x *executor) update(ctx context.Context, fn func(*ops.Record) (*ops.Record, error)) (*ops.Record, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for range maxCASAttempts {
		rec, err := x.e.store.Get(ctx, x.id)
		if err != nil {
			return nil, err
		}
		if rec.Phase != ops.PhaseExecuting || rec.Replica != x.e.opts.Replica {
			return rec, fmt.Errorf("ops: request %s is %s on %s: %w", x.id, rec.Phase, rec.Replica, ops.ErrVersionConflict)
		}
		next, err := fn(rec)
		if errors.Is(err, ops.ErrVersionConflict) {
			continue
		}
		return next, err
	}
	return nil, fmt.Errorf("ops: too much contention updating %s: %w", x.id, ops.ErrVersionConflict)
}

func (x *executor) step(ctx context.Context, note string, fn func(*ops.Record)) (*ops.Record, error) {
	return x.update(ctx, func(r *ops.Record) (*ops.Record, error) { return x.e.record(ctx, r, ops.KindStep, note, fn) })
}

// stepPersisting records a step only this replica knows (a write's answer), retrying while the store cannot be
// reached, for up to a lock TTL: given up, a resuming replica can only read back or leave it to people. It stops
// at once when the record moved on elsewhere (another replica resumed it).
func (x *executor) stepPersisting(ctx context.Context, note string, fn func(*ops.Record)) error {
	return x.persist(ctx, x.e.opts.LockTTL, func() error {
		_, err := x.step(ctx, note, fn)
		return err
	})
}

// persist runs save until it succeeds, the record moved on elsewhere, or patience has passed.
func (x *executor) persist(ctx context.Context, patience time.Duration, save func() error) error {
	deadline := time.Now().Add(patience)
	backoff := 100 * time.Millisecond
	for {
		err := save()
		if err == nil || errors.Is(err, ops.ErrVersionConflict) || !time.Now().Add(backoff).Before(deadline) {
			return err
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// withdrawWrite undoes a «write started» whose recording failed: the write was never sent. It is recorded only
// while the record is still this replica's, with this attempt's fence and no accepted write, retried while the
// store cannot be reached for as long as a hand-over keeps a lock (4 lock TTLs): a replica that resumed it
// meanwhile owns the record, and the withdrawal stops. Given up, the step stays and a resumer ends the request
// interrupted, as for a replica that died while sending: never a write sent twice.
func (x *executor) withdrawWrite(ctx context.Context, fence int64) {
	ctx = context.WithoutCancel(ctx)
	err := x.persist(ctx, 4*x.e.opts.LockTTL, func() error {
		_, err := x.update(ctx, func(r *ops.Record) (*ops.Record, error) {
			ex := r.Execution
			if ex == nil || ex.WriteStarted.IsZero() || !ex.WriteAccepted.IsZero() || r.Fence != fence {
				return r, nil // the step never landed, or the record is another attempt's
			}
			return x.e.record(ctx, r, ops.KindStep, fmt.Sprintf("fence %d; write withdrawn: never sent", fence), func(r *ops.Record) {
				r.Execution.WriteStarted = time.Time{}
			})
		})
		return err
	})
	if err != nil {
		x.e.report(x.id, fmt.Errorf("withdraw the write that was never sent: %w", err))
	}
}

// withProgress has the operation's progress.Note and progress.Marked calls in ctx recorded by this attempt, on a context
// detached from rec's cancellation: a note reported just before a hand-over is still recorded.
func (x *executor) withProgress(ctx, rec context.Context) context.Context {
	return progress.WithMarked(ctx,
		func(msg string) { x.progress(context.WithoutCancel(rec), msg, "", "") },
		func(msg, key, mark string) { x.progress(context.WithoutCancel(rec), msg, key, mark) },
		func(msg string) { x.keepFinal(msg) })
}

// keepFinal keeps a note for the outcome (progress.Final).
func (x *executor) keepFinal(msg string) {
	x.finalMu.Lock()
	defer x.finalMu.Unlock()
	x.finals = append(x.finals, msg)
}

// takeFinals hands over the notes kept for the outcome, once.
func (x *executor) takeFinals() []string {
	x.finalMu.Lock()
	defer x.finalMu.Unlock()
	out := x.finals
	x.finals = nil
	return out
}

// progress records a step the operation reported, for the request's thread, and with it the mark under key (when
// key is set), in one stored change. Notes kept for the outcome go first: the operation went on after them.
func (x *executor) progress(ctx context.Context, msg, key, mark string) {
	for _, f := range x.takeFinals() {
		x.progress(ctx, f, "", "")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var fn func(*ops.Record)
	if key != "" {
		fn = func(r *ops.Record) {
			if r.Execution.Marks == nil {
				r.Execution.Marks = map[string]string{}
			}
			r.Execution.Marks[key] = mark
		}
	}
	if _, err := x.update(ctx, func(r *ops.Record) (*ops.Record, error) { return x.e.record(ctx, r, ops.KindProgress, msg, fn) }); err != nil {
		x.e.report(x.id, fmt.Errorf("record progress %q: %w", msg, err))
	}
}

// handover releases the execution to another replica: the lease goes now (not by expiry), the scope lock is
// kept for the resuming replica, and the step is recorded.
func (x *executor) handover(ctx context.Context, rec *ops.Record) (*ops.Record, outcome, error) {
	ctx = context.WithoutCancel(ctx)
	next, err := x.step(ctx, "handed over: this replica is stopping", nil)
	if x.scope != nil {
		_ = x.e.locks.Renew(ctx, x.scope, 4*x.e.opts.LockTTL) // time for another replica to resume under it
	}
	x.e.release(x.lease)
	if err != nil {
		return rec, outcomeHandedOver, nil
	}
	return next, outcomeHandedOver, nil
}

// interrupt ends an execution whose write has an unknown outcome: the real state is read through the operation's
// Observer and recorded; people choose Stop or Take over. The scope lock stays held (HoldTTL) until they do: a
// change whose outcome nobody knows must not let the next one in. Stop releases it; Resume executes under it.
func (x *executor) interrupt(ctx context.Context, rec *ops.Record, why string) (*ops.Record, outcome, error) {
	e := x.e
	ctx = context.WithoutCancel(ctx)
	next := "use Take over, then Resume or Stop"
	if held := x.holdScope(ctx); held != nil {
		next += fmt.Sprintf(" (the lock on %s stays held until then)", held.Scope)
	}
	observed, note := e.observe(ctx, rec, why)
	stored, err := x.update(ctx, func(r *ops.Record) (*ops.Record, error) {
		if r.Execution == nil || r.Execution.WriteStarted.IsZero() {
			// Withdrawn meanwhile by the attempt that never sent it: run again from the start instead.
			return r, errors.New("ops: the write was withdrawn: never sent")
		}
		return e.move(ctx, r, ops.PhaseInterrupted, systemActor, note, func(r *ops.Record) {
			if observed != nil {
				r.Result = observed
			}
			r.Errors = append(r.Errors, ops.Errorf(ops.CodeInternal, "", next, "execution was interrupted: %s", why))
		})
	})
	if err != nil {
		return rec, outcomeRetry, stateError("record the interruption", err)
	}
	return stored, outcomeFinished, nil
}

// finish records the outcome of an execution.
func (x *executor) finish(ctx context.Context, res *ops.Result, runErr error) (*ops.Record, outcome, error) {
	ctx = context.WithoutCancel(ctx)
	to, note := ops.PhaseSucceeded, ""
	if res != nil {
		note = res.Summary
	}
	var ue *ops.Error
	if runErr != nil {
		to, ue = ops.PhaseFailed, ops.AsError(runErr)
		note = ue.Message
	}
	finals := x.takeFinals()
	var told []ops.Transition
	next, err := x.update(ctx, func(r *ops.Record) (*ops.Record, error) {
		return x.e.move(ctx, r, to, systemActor, note, func(r *ops.Record) {
			// The status that ended the wait goes in the same change as the outcome: told in one reply.
			told = told[:0]
			for _, f := range finals {
				t := ops.Transition{From: r.Phase, To: r.Phase, At: x.e.opts.Clock.Now(), By: systemActor, Note: f, Kind: ops.KindProgress}
				r.History = append(r.History, t)
				told = append(told, t)
			}
			r.Result = res
			if ue != nil {
				r.Errors = append(r.Errors, ue)
			}
		})
	})
	for _, t := range told {
		if err == nil {
			x.e.notify(ctx, next, t)
		}
	}
	if err != nil {
		// Still executing in the store: the lease lapses and another replica resumes from the recorded steps.
		return next, outcomeRetry, errors.Join(runErr, stateError("record the result", err))
	}
	if ue != nil {
		return next, outcomeFinished, ue
	}
	return next, outcomeFinished, nil
}

// guard checks, in one step against the state store, that every lock still carries this execution's token. A
// state store that does not answer is asked again for a third of the lock TTL: a Redis failover takes a second or
// two, and the write waits it out rather than failing a request that sent nothing. A lock found lost refuses at
// once; an outage longer than the patience refuses with E_STATE_UNAVAILABLE (fail closed).
func (e *Engine) guard(ctx context.Context, locks []*Lock) error {
	return retryUnavailable(ctx, e.opts.LockTTL/3, func() error { return e.checkLocks(ctx, locks) })
}

func (e *Engine) checkLocks(ctx context.Context, locks []*Lock) error {
	for _, l := range locks {
		if err := e.locks.Check(ctx, l); err != nil {
			if errors.Is(err, ops.ErrLockLost) {
				return ops.Wrap(err, ops.CodeLocked, "", "see who holds it with "+ops.Ask("request show")+", then retry",
					"refused to write: the lock %s (fence %d) is no longer held by this execution", l.Scope, l.Fence)
			}
			return stateError("check the lock before writing", err)
		}
	}
	return nil
}

// retryUnavailable runs try until it succeeds, fails for a reason other than the state store being unreachable
// (ErrStateUnavailable), ctx ends, or patience has passed; it returns the last error.
func retryUnavailable(ctx context.Context, patience time.Duration, try func() error) error {
	deadline := time.Now().Add(patience)
	backoff := 50 * time.Millisecond
	for {
		err := try()
		if err == nil || !errors.Is(err, ops.ErrStateUnavailable) || ctx.Err() != nil || !time.Now().Add(backoff).Before(deadline) {
			return err
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// keepLocks renews locks until stop is called. If a lock is lost, or the state store cannot be reached for as long
// as the last renewal keeps the locks safely held (two thirds of the TTL), the returned context is cancelled, so an
// execution never goes on without its locks; a shorter outage (a failover) is waited out.
func (e *Engine) keepLocks(ctx context.Context, locks []*Lock) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	renewed := e.opts.Clock.Now()
	stop := e.everyThirdTTL(ctx, func() bool {
		if err := e.renewLocks(ctx, locks, renewed); err != nil {
			cancel(err)
			return false
		}
		renewed = e.opts.Clock.Now()
		return true
	})
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			stop()
			cancel(nil)
		})
	}
}

// everyThirdTTL calls tick every third of the lock TTL until ctx ends, tick returns false or the returned stop is
// called; stop returns once the loop has ended.
func (e *Engine) everyThirdTTL(ctx context.Context, tick func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := e.opts.Clock.NewTicker(e.opts.LockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.Chan():
				if !tick() {
					return
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// renewLocks extends every lock by the TTL. While the state store does not answer it asks again, for as long as
// the renewal at last keeps them held with a third of the TTL to spare.
func (e *Engine) renewLocks(ctx context.Context, locks []*Lock, last time.Time) error {
	for _, l := range locks {
		patience := last.Add(2 * e.opts.LockTTL / 3).Sub(e.opts.Clock.Now())
		if err := retryUnavailable(ctx, patience, func() error { return e.locks.Renew(ctx, l, e.opts.LockTTL) }); err != nil {
			return fmt.Errorf("lock %s lost: %w", l.Scope, err)
		}
	}
	return nil
}

func (e *Engine) release(l *Lock) {
	_ = e.releaseErr(l) // a lost release only means the lock expires by its TTL
}

// releaseErr releases l and says whether Redis answered.
func (e *Engine) releaseErr(l *Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.locks.Release(ctx, l)
}

// observe reads what really happened to an interrupted execution, through the operation's Observer.
func (e *Engine) observe(ctx context.Context, rec *ops.Record, why string) (*ops.Result, string) {
	op, err := e.catalog.Lookup(rec.Request.Operation)
	if err != nil {
		return nil, why
	}
	o, ok := op.(ops.Observer)
	if !ok {
		return nil, why
	}
	res, err := o.Observe(ctx, &rec.Request)
	if err != nil {
		return nil, why + "; the real state could not be read: " + ops.AsError(err).Message
	}
	return res, why + "; found: " + res.Summary
}
