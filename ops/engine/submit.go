package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/readings"
)

// Submit validates a request, records it under its id (the idempotency key), plans it, and either finishes a dry
// run, waits for approval, or executes it when no approval is needed. The same id with the same content returns the
// existing record; with different content it is E_IDEMPOTENCY_CONFLICT. Errors before the record is stored change
// nothing. When a stored request ends rejected, both the record and its error are returned.
func (e *Engine) Submit(ctx context.Context, req ops.Request) (*ops.Record, error) {
	// Validate and Plan read the world once between them (readings.Once): plan ends the readings, and nothing else
	// runs under them.
	planning := readings.With(ctx)
	op, err := e.prepare(planning, &req)
	if err != nil {
		return nil, err
	}
	if !op.Spec().Mutates {
		return e.read(ctx, op, req)
	}
	now := e.opts.Clock.Now()
	rec := &ops.Record{
		Request: req, Fingerprint: req.Fingerprint(), Phase: ops.PhaseReceived, Version: 1, Owner: req.Initiator,
		CreatedAt: now, UpdatedAt: now,
		History:     []ops.Transition{{To: ops.PhaseReceived, At: now, By: req.Initiator}},
		Annotations: maps.Clone(req.Annotations),
	}
	stored, created, err := e.create(ctx, rec)
	if err != nil {
		return nil, stateError("record the request", err)
	}
	if !created {
		return e.existing(ctx, op, stored, req)
	}
	e.notify(ctx, stored, stored.History[0])
	return e.planOnce(planning, op, stored, true)
}

// planningScope is the short lock under which one caller plans a received request.
func planningScope(id string) ops.LockScope {
	return ops.LockScope{Cluster: "_", Kind: "planning", Name: id}
}

// planOnce plans a received request under a lock of its own, so the caller that created it and a caller resending
// the id never both plan it: the resend matters when the creator heard an error although its write landed (a write
// a replica did not acknowledge in time), which would otherwise leave the request received for good. A resend plans
// only a record received at least receivedGrace ago. A caller that
// finds the lock held answers with the record as it stands; the planner's transitions reach everyone through the
// outbox. fresh says rec was just created, so nobody can have planned it yet.
func (e *Engine) planOnce(ctx context.Context, op ops.Operation, rec *ops.Record, fresh bool) (*ops.Record, error) {
	l, err := e.locks.Acquire(ctx, planningScope(rec.ID()), rec.ID()+"@"+e.opts.Replica+"#"+randomID(4), e.opts.PlanTTL)
	var held *ops.LockHeldError
	if errors.As(err, &held) {
		return rec, nil
	}
	if err != nil {
		return rec, stateError("take the planning lock", err)
	}
	defer func() { _ = e.locks.Release(context.WithoutCancel(ctx), l) }()
	if !fresh {
		cur, err := e.store.Get(ctx, rec.ID())
		if err != nil {
			return rec, stateError("read the request", err)
		}
		if cur.Phase != ops.PhaseReceived {
			return cur, nil
		}
		rec = cur
	}
	return e.plan(ctx, op, rec)
}

// prepare resolves the operation, target and parameters and runs the guardrails.
func (e *Engine) prepare(ctx context.Context, req *ops.Request) (ops.Operation, error) {
	op, err := e.catalog.Lookup(req.Operation)
	if err != nil {
		return nil, err
	}
	spec := op.Spec()
	if e.opts.Targets != nil {
		if req.Target, err = e.opts.Targets.Resolve(req.Target); err != nil {
			return nil, err
		}
	}
	if req.Params, err = ops.Normalize(spec.Params, req.Params); err != nil {
		return nil, err
	}
	if req.ID == "" {
		req.ID = NewRequestID()
	}
	if errs := validateRequestID(req.ID); errs != nil {
		return nil, errs
	}
	if e.policy != nil {
		if err := e.policy.Permit(ctx, *req, spec); err != nil {
			return nil, err
		}
	}
	if err := op.Validate(ctx, req); err != nil {
		return nil, err
	}
	return op, nil
}

// existing answers a request id that is already recorded.
func (e *Engine) existing(ctx context.Context, op ops.Operation, stored *ops.Record, req ops.Request) (*ops.Record, error) {
	if stored.Fingerprint != req.Fingerprint() {
		// Only the initiator's own request can be here (create): its id is taken, by them, for other content.
		return nil, ops.Errorf(ops.CodeIdempotencyConflict, "requestId",
			"use a new requestId for a different request, or resend exactly the original to read its state",
			"request id %s is taken: you already used it for a request with other content", req.ID)
	}
	// A finished dry run may be committed under the same id: the plan is made again, as it may have changed.
	if stored.Request.DryRun && !req.DryRun && stored.Phase == ops.PhaseDone {
		next, err := e.move(ctx, stored, ops.PhaseReceived, req.Initiator, "committed after a dry run", func(r *ops.Record) {
			r.Request.DryRun = false
			r.Plan, r.Errors = nil, nil
		})
		if errors.Is(err, ops.ErrVersionConflict) {
			return e.Get(ctx, stored.ID())
		}
		if err != nil {
			return nil, stateError("commit the dry run", err)
		}
		return e.plan(ctx, op, next)
	}
	// A request whose planning did not finish in time changed nothing: sent again, it is planned again.
	if stored.Phase == ops.PhaseRejected && retryable(stored) {
		next, err := e.move(ctx, stored, ops.PhaseReceived, req.Initiator, "sent again after its planning did not finish in time",
			func(r *ops.Record) { r.Plan, r.Errors = nil, nil })
		if errors.Is(err, ops.ErrVersionConflict) {
			return e.Get(ctx, stored.ID())
		}
		if err != nil {
			return nil, stateError("plan the request again", err)
		}
		return e.planOnce(ctx, op, next, true)
	}
	// A record received a while ago whose creator is not planning it was left behind; one received just now is
	// being planned by its creator, which takes the planning lock right after creating it.
	if stored.Phase == ops.PhaseReceived && e.opts.Clock.Since(stored.UpdatedAt) >= receivedGrace {
		return e.planOnce(ctx, op, stored, false)
	}
	// A planned record whose next step's answer was lost (its grant's approval, say) was left behind: it goes on.
	if stored.Phase == ops.PhasePlanned && e.opts.Clock.Since(stored.UpdatedAt) >= receivedGrace {
		next, err := e.proceed(ctx, stored)
		if errors.Is(err, ops.ErrVersionConflict) {
			return e.Get(ctx, stored.ID())
		}
		return next, err
	}
	return stored, nil
}

// retryable says whether a rejected request may be planned again under its id: its refusal says so (Error.Retry).
func retryable(rec *ops.Record) bool {
	return len(rec.Errors) > 0 && rec.Errors[len(rec.Errors)-1].Retry
}

// receivedGrace is how long a received record is left to the caller that created it before a caller resending its
// id may plan it: far longer than the step from creating a record to taking its planning lock.
const receivedGrace = 5 * time.Second

// read runs a read-only operation at once: no approval, no lock, no stored record, so it works without Redis.
func (e *Engine) read(ctx context.Context, op ops.Operation, req ops.Request) (*ops.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.ReadTimeout)
	defer cancel()
	now := e.opts.Clock.Now()
	rec := &ops.Record{Request: req, Fingerprint: req.Fingerprint(), Owner: req.Initiator, CreatedAt: now}
	res, err := op.Execute(ctx, &req, nil, ops.Execution{Replica: e.opts.Replica})
	rec.UpdatedAt = e.opts.Clock.Now()
	if err != nil {
		rec.Phase = ops.PhaseFailed
		rec.Errors = []*ops.Error{ops.AsError(err)}
		return rec, err
	}
	rec.Phase, rec.Result = ops.PhaseSucceeded, res
	return rec, nil
}

// plan moves a received request to planned and on to done, awaiting-approval or execution.
func (e *Engine) plan(ctx context.Context, op ops.Operation, rec *ops.Record) (*ops.Record, error) {
	spec := op.Spec()
	if scope := lockScope(spec, rec.Request); !scope.IsZero() {
		holder, held, err := e.locks.Holder(ctx, scope)
		if err != nil {
			return rec, stateError("check the lock", err)
		}
		if held && holder != rec.ID() {
			return e.reject(ctx, rec, lockedError(scope, holder))
		}
	}
	p, err := e.makePlan(ctx, op, rec.Request)
	ctx = readings.Without(ctx) // what follows the plan reads the world as it is now
	if err == nil {
		var appr ops.Approval
		if appr, err = e.approvalFor(ctx, rec, p); err == nil {
			return e.planned(ctx, rec, p, appr)
		}
	}
	if ctx.Err() != nil {
		return e.planTimedOut(ctx, rec, err)
	}
	return e.reject(ctx, rec, err)
}

// approvalFor is the approval plan p of rec needs: its rule's, placed in its budgets beside every other request's
// hold (over one, the overBudget rule's approval, or E_BUDGET_EXCEEDED).
func (e *Engine) approvalFor(ctx context.Context, rec *ops.Record, p *ops.Plan) (ops.Approval, error) {
	appr, err := e.requirement(ctx, rec.Request, p)
	if err != nil {
		return appr, err
	}
	return e.placeInBudget(ctx, rec.Request, p, appr, ops.HoldOf(rec))
}

// planned stores a finished plan and moves the request on to done, awaiting-approval or execution.
func (e *Engine) planned(ctx context.Context, rec *ops.Record, p *ops.Plan, appr ops.Approval) (*ops.Record, error) {
	var err error
	rec, err = e.move(ctx, rec, ops.PhasePlanned, systemActor, "", func(r *ops.Record) { r.Plan, r.Approval = p, appr })
	if err != nil {
		return nil, stateError("store the plan", err)
	}
	return e.proceed(ctx, rec)
}

// proceed moves a planned request on to done, awaiting-approval or execution. A request left planned (the answer of
// its next step lost) is moved on by the next call: a grant's use and the budget hold are idempotent per request.
func (e *Engine) proceed(ctx context.Context, rec *ops.Record) (*ops.Record, error) {
	appr := rec.Approval
	var err error
	switch {
	case rec.Request.DryRun:
		var note *ops.GrantNote
		if appr.Required > 0 {
			note = e.grantNote(ctx, rec)
		}
		rec, err = e.move(ctx, rec, ops.PhaseDone, systemActor, "dry run: nothing changed", func(r *ops.Record) { r.Plan.Grant = note })
	case appr.Required > 0:
		next, byGrant, gerr := e.approveByGrant(ctx, rec)
		if byGrant {
			if gerr != nil || next.Phase != ops.PhaseApproved {
				return next, gerr
			}
			return e.dispatch(ctx, next)
		}
		rec, err = e.move(ctx, rec, ops.PhaseAwaitingApproval, systemActor, fmt.Sprintf("needs %d approval(s)", appr.Required), nil)
	default:
		d := Decision{Path: ops.ByPolicy, By: systemActor}
		if err := e.admit(ctx, rec, d); err != nil {
			return e.reject(ctx, rec, err)
		}
		rec, err = e.move(ctx, rec, ops.PhaseApproved, systemActor, "no approval required by policy", approvedBy(d))
		if err == nil {
			return e.dispatch(ctx, rec)
		}
	}
	if err != nil {
		return nil, stateError("store the plan", err)
	}
	return rec, nil
}

func lockScope(spec ops.Spec, req ops.Request) ops.LockScope {
	if spec.Lock == nil {
		return ops.LockScope{}
	}
	return spec.Lock(req)
}

func lockedError(scope ops.LockScope, holder string) *ops.Error {
	return &ops.Error{Code: ops.CodeLocked, Field: "target", Holder: holder,
		Message: fmt.Sprintf("%s is locked by request %s", scope, holder),
		Next:    fmt.Sprintf("wait for request %s to finish (%s), then retry", holder, ops.Ask("request show id="+holder))}
}

func (e *Engine) makePlan(ctx context.Context, op ops.Operation, req ops.Request) (*ops.Plan, error) {
	p, err := op.Plan(ctx, &req)
	if err != nil {
		return nil, err
	}
	e.opts.Risk.Assess(req, op.Spec(), p)
	if req.Reverts != "" {
		e.changedSince(ctx, req, p)
	}
	p.Hash = ops.HashPlan(req, p)
	p.CreatedAt = e.opts.Clock.Now()
	return p, nil
}

func (e *Engine) requirement(ctx context.Context, req ops.Request, p *ops.Plan) (ops.Approval, error) {
	var a ops.Approval
	if e.policy != nil {
		var err error
		if a, err = e.policy.Requirement(ctx, req, p); err != nil {
			return a, err
		}
	}
	if req.RequiresApproval && a.Required == 0 {
		// requiresApproval can only raise what policy asks for.
		a.Required = 1
		a.Rule = "raised by the request's requiresApproval"
	}
	a.PlanHash = p.Hash
	a.Votes = nil
	return a, nil
}

// planTimedOut ends a request whose planning outlived its caller (the Slack handling timeout, an agent's call):
// it is rejected with the cause and the step to take, recorded with a context of its own since the caller's has
// ended, so the requester is told through the outbox and the request never stays received. Nothing was changed,
// so the same request id may be sent again: it is planned again (existing).
func (e *Engine) planTimedOut(ctx context.Context, rec *ops.Record, cause error) (*ops.Record, error) {
	ue := &ops.Error{Code: ops.CodeClusterUnavailable, Field: "target", Retry: true, Err: cause,
		Message: fmt.Sprintf("planning %s on %s did not finish in time (%v): nothing was changed", rec.Request.Operation,
			ops.Echo(rec.Request.Target.Cluster), context.Cause(ctx)),
		Next: fmt.Sprintf("check that the cluster answers (%s), then send the same request again with the same request id %s to plan it again",
			ops.Ask("status"), rec.ID())}
	if p := ops.AsError(cause); p.Code != ops.CodeInternal && p.Message != "" {
		ue.Message += "; " + p.Message
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordAfterTimeout)
	defer cancel()
	return e.reject(rctx, rec, ue)
}

// recordAfterTimeout bounds recording the outcome of work whose caller's context has ended.
const recordAfterTimeout = 10 * time.Second

func (e *Engine) reject(ctx context.Context, rec *ops.Record, cause error) (*ops.Record, error) {
	ue := ops.AsError(cause)
	next, err := e.move(ctx, rec, ops.PhaseRejected, systemActor, ue.Message, func(r *ops.Record) { r.Errors = append(r.Errors, ue) })
	if err != nil {
		return rec, errors.Join(ue, stateError("record the rejection", err))
	}
	return next, ue
}

// dispatch hands an approved request to the execution queue and returns at once; without a queue it executes it
// in the caller.
func (e *Engine) dispatch(ctx context.Context, rec *ops.Record) (*ops.Record, error) {
	if e.opts.Queue == nil {
		return e.Execute(ctx, rec.ID())
	}
	if err := e.opts.Queue.Enqueue(ctx, rec.ID()); err != nil {
		// The request stays approved; the sweep puts approved requests that are not executing back on the queue.
		e.report(rec.ID(), fmt.Errorf("enqueue the execution: %w", err))
	}
	return rec, nil
}
