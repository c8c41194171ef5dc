package ops

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// TargetResolver fills a request's target defaults and refuses clusters and namespaces that are not registered.
type TargetResolver interface {
	Resolve(t Target) (Target, error)
}

// EngineOptions tune the engine; zero values take the documented defaults.
type EngineOptions struct {
	// Replica names this process in records and logs (default: a random id).
	Replica string
	// Clock is the time source (default: the real clock).
	Clock clockwork.Clock
	// Risk holds the shared risk rules.
	Risk RiskPolicy
	// Targets resolves defaults and registration of clusters and namespaces; nil accepts targets as given.
	Targets TargetResolver
	// LockTTL is how long a lock or execution lease lives without renewal (default 30s); renewed every third of it.
	LockTTL time.Duration
	// Notifier is told about stored transitions (optional).
	Notifier Notifier
	// ReadTimeout bounds read-only operations (default 30s).
	ReadTimeout time.Duration
	// PlanTTL is how long one caller may plan a received request before another caller of the same id may plan it
	// instead (default 2m, the Slack handling timeout that bounds planning).
	PlanTTL time.Duration
	// Queue is the execution queue: approving enqueues, and RunExecutors takes work from it. Nil executes an
	// approved request in the caller (tests and tools that run no executors).
	Queue Queue
	// Budgets are the execution time budgets per class (defaults DefaultBudgets).
	Budgets map[Budget]time.Duration
	// WriteTimeout bounds the one call that changes the world, and reading it back when its answer was lost
	// (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// HoldTTL is how long the scope lock of a request interrupted with an unknown outcome stays held for a person
	// to choose Stop or Take over (default DefaultHoldTTL).
	HoldTTL time.Duration
	// Ledger holds spend budgets across replicas; nil counts no budgets. Which budgets apply comes from the
	// Policy, when it is a BudgetPolicy.
	Ledger Ledger
	// Glass records who broke glass and has not been acknowledged yet, across replicas; nil: nobody may break
	// glass (Engine.BreakGlass refuses).
	Glass GlassLog
	// Grants holds the standing grants, across replicas; nil: no grant is given or applied.
	Grants GrantStore
	// OnError is told about failures no caller is waiting for (queue, progress, panics with their stack).
	OnError func(requestID string, err error)
}

// Engine drives requests through the lifecycle. Every transition is a compare-and-set in the Store, so several
// replicas can share one Store and never both execute a request.
type Engine struct {
	catalog *Catalog
	store   Store
	locks   Locker
	policy  Policy
	// features are the policy's optional parts, read once.
	features PolicyFeatures
	opts     EngineOptions
	// observing counts this replica's executions that only observe (Observing).
	observing atomic.Int64
}

// NewEngine wires an engine.
func NewEngine(catalog *Catalog, store Store, locks Locker, policy Policy, opts EngineOptions) *Engine {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.LockTTL <= 0 {
		opts.LockTTL = 30 * time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 30 * time.Second
	}
	if opts.PlanTTL <= 0 {
		opts.PlanTTL = 2 * time.Minute
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.HoldTTL <= 0 {
		opts.HoldTTL = DefaultHoldTTL
	}
	if opts.Replica == "" {
		opts.Replica = "replica-" + randomID(4)
	}
	e := &Engine{catalog: catalog, store: store, locks: locks, policy: policy, opts: opts}
	if policy != nil {
		e.features = policy.Features()
	}
	return e
}

// Catalog returns the engine's catalog.
func (e *Engine) Catalog() *Catalog { return e.catalog }

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.opts.Clock.Now() }

// Replica returns this engine's replica name.
func (e *Engine) Replica() string { return e.opts.Replica }

// NewRequestID returns a fresh request id for requests that came without one.
func NewRequestID() string { return "req-" + randomID(8) }

func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("ops: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// Submit validates a request, records it under its id (the idempotency key), plans it, and either finishes a dry
// run, waits for approval, or executes it when no approval is needed. The same id with the same content returns the
// existing record; with different content it is E_IDEMPOTENCY_CONFLICT. Errors before the record is stored change
// nothing. When a stored request ends rejected, both the record and its error are returned.
func (e *Engine) Submit(ctx context.Context, req Request) (*Record, error) {
	op, err := e.prepare(ctx, &req)
	if err != nil {
		return nil, err
	}
	if !op.Spec().Mutates {
		return e.read(ctx, op, req)
	}
	now := e.opts.Clock.Now()
	rec := &Record{
		Request: req, Fingerprint: req.Fingerprint(), Phase: PhaseReceived, Version: 1, Owner: req.Initiator,
		CreatedAt: now, UpdatedAt: now,
		History:     []Transition{{To: PhaseReceived, At: now, By: req.Initiator}},
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
	return e.planOnce(ctx, op, stored, true)
}

// ScopedRequestID is the id a request is stored under when the request id its client gave is already another
// initiator's: that id, a colon and 10 hex digits of the initiator's id. Request ids are each initiator's own (two
// agents may both send "r1"), while the stored id, the one people see, stays unique.
func ScopedRequestID(clientID, initiatorID string) string {
	sum := sha256.Sum256([]byte(initiatorID))
	return clientID + ":" + hex.EncodeToString(sum[:5])
}

// create stores rec under its request id, or under ScopedRequestID when that id is another initiator's. It returns
// the initiator's own record when there is one under either id (created=false): their scoped record is looked for
// first, so a resend never creates a second record once the other initiator's has expired.
func (e *Engine) create(ctx context.Context, rec *Record) (*Record, bool, error) {
	who := rec.Request.Initiator.ID
	scoped := rec.Clone()
	scoped.Request.ID = ScopedRequestID(rec.ID(), who)
	got, err := e.store.Get(ctx, scoped.ID())
	switch {
	case err == nil && got.Request.Initiator.ID == who:
		return got, false, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, false, err
	}
	stored, created, err := e.store.Create(ctx, rec)
	if err != nil || created || stored.Request.Initiator.ID == who {
		return stored, created, err
	}
	stored, created, err = e.store.Create(ctx, scoped)
	if err == nil && !created && stored.Request.Initiator.ID != who {
		return nil, false, Errorf(CodeIdempotencyConflict, "requestId", "use another requestId",
			"request id %s is taken", rec.ID())
	}
	return stored, created, err
}

// planningScope is the short lock under which one caller plans a received request.
func planningScope(id string) LockScope { return LockScope{Cluster: "_", Kind: "planning", Name: id} }

// planOnce plans a received request under a lock of its own, so the caller that created it and a caller resending
// the id never both plan it: the resend matters when the creator heard an error although its write landed (a write
// a replica did not acknowledge in time), which would otherwise leave the request received for good. A resend plans
// only a record received at least receivedGrace ago. A caller that
// finds the lock held answers with the record as it stands; the planner's transitions reach everyone through the
// outbox. fresh says rec was just created, so nobody can have planned it yet.
func (e *Engine) planOnce(ctx context.Context, op Operation, rec *Record, fresh bool) (*Record, error) {
	l, err := e.locks.Acquire(ctx, planningScope(rec.ID()), rec.ID()+"@"+e.opts.Replica+"#"+randomID(4), e.opts.PlanTTL)
	var held *LockHeldError
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
		if cur.Phase != PhaseReceived {
			return cur, nil
		}
		rec = cur
	}
	return e.plan(ctx, op, rec)
}

// prepare resolves the operation, target and parameters and runs the guardrails.
func (e *Engine) prepare(ctx context.Context, req *Request) (Operation, error) {
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
	if req.Params, err = Normalize(spec.Params, req.Params); err != nil {
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

func validateRequestID(id string) error {
	if len(id) > 128 {
		return Errorf(CodeInvalidArgument, "requestId", "use at most 128 characters", "requestId is %d characters long", len(id))
	}
	for _, r := range id {
		ok := r == '-' || r == '_' || r == '.' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return Errorf(CodeInvalidArgument, "requestId", "use letters, digits and - _ . : only", "requestId %q contains %q", id, r)
		}
	}
	return nil
}

// existing answers a request id that is already recorded.
func (e *Engine) existing(ctx context.Context, op Operation, stored *Record, req Request) (*Record, error) {
	if stored.Fingerprint != req.Fingerprint() {
		// Only the initiator's own request can be here (create): its id is taken, by them, for other content.
		return nil, Errorf(CodeIdempotencyConflict, "requestId",
			"use a new requestId for a different request, or resend exactly the original to read its state",
			"request id %s is taken: you already used it for a request with other content", req.ID)
	}
	// A finished dry run may be committed under the same id: the plan is made again, as it may have changed.
	if stored.Request.DryRun && !req.DryRun && stored.Phase == PhaseDone {
		next, err := e.move(ctx, stored, PhaseReceived, req.Initiator, "committed after a dry run", func(r *Record) {
			r.Request.DryRun = false
			r.Plan, r.Errors = nil, nil
		})
		if errors.Is(err, ErrVersionConflict) {
			return e.Get(ctx, stored.ID())
		}
		if err != nil {
			return nil, stateError("commit the dry run", err)
		}
		return e.plan(ctx, op, next)
	}
	// A request whose planning did not finish in time changed nothing: sent again, it is planned again.
	if stored.Phase == PhaseRejected && retryable(stored) {
		next, err := e.move(ctx, stored, PhaseReceived, req.Initiator, "sent again after its planning did not finish in time",
			func(r *Record) { r.Plan, r.Errors = nil, nil })
		if errors.Is(err, ErrVersionConflict) {
			return e.Get(ctx, stored.ID())
		}
		if err != nil {
			return nil, stateError("plan the request again", err)
		}
		return e.planOnce(ctx, op, next, true)
	}
	// A record received a while ago whose creator is not planning it was left behind; one received just now is
	// being planned by its creator, which takes the planning lock right after creating it.
	if stored.Phase == PhaseReceived && e.opts.Clock.Since(stored.UpdatedAt) >= receivedGrace {
		return e.planOnce(ctx, op, stored, false)
	}
	// A planned record whose next step's answer was lost (its grant's approval, say) was left behind: it goes on.
	if stored.Phase == PhasePlanned && e.opts.Clock.Since(stored.UpdatedAt) >= receivedGrace {
		next, err := e.proceed(ctx, stored)
		if errors.Is(err, ErrVersionConflict) {
			return e.Get(ctx, stored.ID())
		}
		return next, err
	}
	return stored, nil
}

// retryable says whether a rejected request may be planned again under its id: its refusal says so (Error.Retry).
func retryable(rec *Record) bool {
	return len(rec.Errors) > 0 && rec.Errors[len(rec.Errors)-1].Retry
}

// receivedGrace is how long a received record is left to the caller that created it before a caller resending its
// id may plan it: far longer than the step from creating a record to taking its planning lock.
const receivedGrace = 5 * time.Second

// read runs a read-only operation at once: no approval, no lock, no stored record, so it works without Redis.
func (e *Engine) read(ctx context.Context, op Operation, req Request) (*Record, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.ReadTimeout)
	defer cancel()
	now := e.opts.Clock.Now()
	rec := &Record{Request: req, Fingerprint: req.Fingerprint(), Owner: req.Initiator, CreatedAt: now}
	res, err := op.Execute(ctx, &req, nil, Execution{Replica: e.opts.Replica})
	rec.UpdatedAt = e.opts.Clock.Now()
	if err != nil {
		rec.Phase = PhaseFailed
		rec.Errors = []*Error{AsError(err)}
		return rec, err
	}
	rec.Phase, rec.Result = PhaseSucceeded, res
	return rec, nil
}

// plan moves a received request to planned and on to done, awaiting-approval or execution.
func (e *Engine) plan(ctx context.Context, op Operation, rec *Record) (*Record, error) {
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
	if err == nil {
		var appr Approval
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
func (e *Engine) approvalFor(ctx context.Context, rec *Record, p *Plan) (Approval, error) {
	appr, err := e.requirement(ctx, rec.Request, p)
	if err != nil {
		return appr, err
	}
	return e.placeInBudget(ctx, rec.Request, p, appr, HoldOf(rec))
}

// planned stores a finished plan and moves the request on to done, awaiting-approval or execution.
func (e *Engine) planned(ctx context.Context, rec *Record, p *Plan, appr Approval) (*Record, error) {
	var err error
	rec, err = e.move(ctx, rec, PhasePlanned, systemActor, "", func(r *Record) { r.Plan, r.Approval = p, appr })
	if err != nil {
		return nil, stateError("store the plan", err)
	}
	return e.proceed(ctx, rec)
}

// proceed moves a planned request on to done, awaiting-approval or execution. A request left planned (the answer of
// its next step lost) is moved on by the next call: a grant's use and the budget hold are idempotent per request.
func (e *Engine) proceed(ctx context.Context, rec *Record) (*Record, error) {
	appr := rec.Approval
	var err error
	switch {
	case rec.Request.DryRun:
		var note *GrantNote
		if appr.Required > 0 {
			note = e.grantNote(ctx, rec)
		}
		rec, err = e.move(ctx, rec, PhaseDone, systemActor, "dry run: nothing changed", func(r *Record) { r.Plan.Grant = note })
	case appr.Required > 0:
		next, byGrant, gerr := e.approveByGrant(ctx, rec)
		if byGrant {
			if gerr != nil || next.Phase != PhaseApproved {
				return next, gerr
			}
			return e.dispatch(ctx, next)
		}
		rec, err = e.move(ctx, rec, PhaseAwaitingApproval, systemActor, fmt.Sprintf("needs %d approval(s)", appr.Required), nil)
	default:
		d := Decision{Path: ByPolicy, By: systemActor}
		if err := e.admit(ctx, rec, d); err != nil {
			return e.reject(ctx, rec, err)
		}
		rec, err = e.move(ctx, rec, PhaseApproved, systemActor, "no approval required by policy", approvedBy(d))
		if err == nil {
			return e.dispatch(ctx, rec)
		}
	}
	if err != nil {
		return nil, stateError("store the plan", err)
	}
	return rec, nil
}

var systemActor = Initiator{Kind: System, ID: "hyperops"}

func lockScope(spec Spec, req Request) LockScope {
	if spec.Lock == nil {
		return LockScope{}
	}
	return spec.Lock(req)
}

func lockedError(scope LockScope, holder string) *Error {
	return &Error{Code: CodeLocked, Field: "target", Holder: holder,
		Message: fmt.Sprintf("%s is locked by request %s", scope, holder),
		Next:    fmt.Sprintf("wait for request %s to finish (%s), then retry", holder, Ask("request show id="+holder))}
}

func (e *Engine) makePlan(ctx context.Context, op Operation, req Request) (*Plan, error) {
	p, err := op.Plan(ctx, &req)
	if err != nil {
		return nil, err
	}
	e.opts.Risk.Assess(req, op.Spec(), p)
	if req.Reverts != "" {
		e.changedSince(ctx, req, p)
	}
	p.Hash = HashPlan(req, p)
	p.CreatedAt = e.opts.Clock.Now()
	return p, nil
}

func (e *Engine) requirement(ctx context.Context, req Request, p *Plan) (Approval, error) {
	var a Approval
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
func (e *Engine) planTimedOut(ctx context.Context, rec *Record, cause error) (*Record, error) {
	ue := &Error{Code: CodeClusterUnavailable, Field: "target", Retry: true, Err: cause,
		Message: fmt.Sprintf("planning %s on %s did not finish in time (%v): nothing was changed", rec.Request.Operation,
			Echo(rec.Request.Target.Cluster), context.Cause(ctx)),
		Next: fmt.Sprintf("check that the cluster answers (%s), then send the same request again with the same request id %s to plan it again",
			Ask("status"), rec.ID())}
	if p := AsError(cause); p.Code != CodeInternal && p.Message != "" {
		ue.Message += "; " + p.Message
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordAfterTimeout)
	defer cancel()
	return e.reject(rctx, rec, ue)
}

// recordAfterTimeout bounds recording the outcome of work whose caller's context has ended.
const recordAfterTimeout = 10 * time.Second

func (e *Engine) reject(ctx context.Context, rec *Record, cause error) (*Record, error) {
	ue := AsError(cause)
	next, err := e.move(ctx, rec, PhaseRejected, systemActor, ue.Message, func(r *Record) { r.Errors = append(r.Errors, ue) })
	if err != nil {
		return rec, errors.Join(ue, stateError("record the rejection", err))
	}
	return next, ue
}

// dispatch hands an approved request to the execution queue and returns at once; without a queue it executes it
// in the caller.
func (e *Engine) dispatch(ctx context.Context, rec *Record) (*Record, error) {
	if e.opts.Queue == nil {
		return e.Execute(ctx, rec.ID())
	}
	if err := e.opts.Queue.Enqueue(ctx, rec.ID()); err != nil {
		// The request stays approved; the sweep puts approved requests that are not executing back on the queue.
		e.report(rec.ID(), fmt.Errorf("enqueue the execution: %w", err))
	}
	return rec, nil
}

// move stores a transition of rec to phase to, applying fn to a copy first. It fails with ErrVersionConflict when
// another writer got there first.
func (e *Engine) move(ctx context.Context, rec *Record, to Phase, by Initiator, note string, fn func(*Record)) (*Record, error) {
	return e.moveKind(ctx, rec, to, by, note, KindPhase, fn)
}

func (e *Engine) moveKind(ctx context.Context, rec *Record, to Phase, by Initiator, note string, kind TransitionKind, fn func(*Record)) (*Record, error) {
	return e.moveAt(ctx, rec, to, by, note, kind, e.opts.Clock.Now(), fn)
}

// moveAt is moveKind with the transition's time given: a change that records the same instant elsewhere in the
// record (a break-glass, found again by its time) reads the clock once.
func (e *Engine) moveAt(ctx context.Context, rec *Record, to Phase, by Initiator, note string, kind TransitionKind, now time.Time, fn func(*Record)) (*Record, error) {
	next := rec.Clone()
	if fn != nil {
		fn(next)
	}
	t := Transition{From: rec.Phase, To: to, At: now, By: by, Note: note, Kind: kind}
	next.Phase, next.UpdatedAt = to, now
	next.History = append(next.History, t)
	ev := NewAuditEvent(next, t)
	if err := e.store.Update(ctx, next, rec.Version, ev); err != nil {
		return nil, err
	}
	if releasesHold(rec.Phase, next) {
		e.releaseBudget(ctx, next, 0)
	}
	e.notify(ctx, next, t)
	return next, nil
}

func (e *Engine) notify(ctx context.Context, rec *Record, t Transition) {
	if e.opts.Notifier == nil {
		return
	}
	if pn, ok := e.opts.Notifier.(ProgressNotifier); ok && t.Kind == KindProgress {
		pn.Progress(ctx, rec, t.Note)
		return
	}
	e.opts.Notifier.Changed(ctx, rec, t)
}

// stateError turns storage failures into E_STATE_UNAVAILABLE (fail closed) and keeps other errors.
func stateError(doing string, err error) error {
	if err == nil {
		return nil
	}
	var ue *Error
	if errors.As(err, &ue) {
		return err
	}
	if errors.Is(err, ErrNotFound) {
		return Errorf(CodeNotFound, "requestId", "check the id with "+Ask("requests"), "no such request")
	}
	if errors.Is(err, ErrVersionConflict) {
		return Wrap(err, CodeInvalidPhase, "", "see its current state with "+Ask("request show"),
			"could not %s: the request was changed by another replica or person first", doing)
	}
	return &Error{Code: CodeStateUnavailable, Message: "could not " + doing + ": the state store is unreachable",
		Next: ErrStateUnavailable.Next, Err: err}
}

// Get returns a request's record.
func (e *Engine) Get(ctx context.Context, id string) (*Record, error) {
	rec, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, stateError("read the request", err)
	}
	return rec, nil
}

// List returns recent requests matching q.
func (e *Engine) List(ctx context.Context, q ListQuery) ([]*Record, error) {
	recs, err := e.store.List(ctx, q)
	if err != nil {
		return nil, stateError("list requests", err)
	}
	return recs, nil
}
