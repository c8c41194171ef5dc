package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/jonboulle/clockwork"
)

// Options tune the engine; zero values take the documented defaults.
type Options struct {
	// Replica names this process in records and logs (default: a random id).
	Replica string
	// Clock is the time source (default: the real clock).
	Clock clockwork.Clock
	// Risk holds the shared risk rules.
	Risk ops.RiskPolicy
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
	Budgets map[ops.Budget]time.Duration
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
	catalog *ops.Catalog
	store   Store
	locks   Locker
	policy  Policy
	// features are the policy's optional parts, read once.
	features PolicyFeatures
	opts     Options
	// observing counts this replica's executions that only observe (Observing).
	observing atomic.Int64
}

// New wires an engine.
func New(catalog *ops.Catalog, store Store, locks Locker, policy Policy, opts Options) *Engine {
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
func (e *Engine) Catalog() *ops.Catalog { return e.catalog }

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.opts.Clock.Now() }

// Replica returns this engine's replica name.
func (e *Engine) Replica() string { return e.opts.Replica }

func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("ops: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

var systemActor = ops.Initiator{Kind: ops.System, ID: "hyperops"}

// Get returns a request's record.
func (e *Engine) Get(ctx context.Context, id string) (*ops.Record, error) {
	rec, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, stateError("read the request", err)
	}
	return rec, nil
}

// List returns recent requests matching q.
func (e *Engine) List(ctx context.Context, q ListQuery) ([]*ops.Record, error) {
	recs, err := e.store.List(ctx, q)
	if err != nil {
		return nil, stateError("list requests", err)
	}
	return recs, nil
}

func (e *Engine) report(id string, err error) {
	if e.opts.OnError != nil {
		e.opts.OnError(id, err)
	}
}
