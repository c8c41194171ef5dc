package engine

import (
	"context"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
)

// Store keeps request records. Implementations must make Create atomic with the idempotency reservation and Update
// a compare-and-set on Version that also appends the transition to the audit trail. Unreachable storage is reported
// as an error matching ErrStateUnavailable.
type Store interface {
	// Create stores rec under its request id unless one exists. It returns the stored record and whether this
	// call created it; when it did not, the stored record's Fingerprint tells whether it is the same request.
	Create(ctx context.Context, rec *ops.Record) (stored *ops.Record, created bool, err error)
	// Get returns the record or ErrNotFound.
	Get(ctx context.Context, id string) (*ops.Record, error)
	// Update stores rec if the stored version equals expect, setting rec.Version to expect+1; otherwise
	// ErrVersionConflict. ev is appended to the audit trail in the same step.
	Update(ctx context.Context, rec *ops.Record, expect int64, ev audit.Event) error
	// List returns recent records, newest first, that pass the filter.
	List(ctx context.Context, q ListQuery) ([]*ops.Record, error)
}

// ListQuery filters List.
type ListQuery struct {
	Phases    []ops.Phase
	Initiator string
	Limit     int
}

// Locker holds exclusive, expiring locks with fencing numbers.
type Locker interface {
	// Acquire takes the scope for owner (a request id) for ttl, or fails with *LockHeldError naming the holder.
	// Acquiring a scope the same owner already holds refreshes it and keeps its token.
	Acquire(ctx context.Context, scope ops.LockScope, owner string, ttl time.Duration) (*Lock, error)
	// Holder returns who holds the scope, if anyone.
	Holder(ctx context.Context, scope ops.LockScope) (owner string, held bool, err error)
	// Renew extends the lock if the token still matches, else ErrLockLost.
	Renew(ctx context.Context, l *Lock, ttl time.Duration) error
	// Release frees the lock if the token still matches; a wrong token does nothing.
	Release(ctx context.Context, l *Lock) error
	// Check reports, in one step, whether the lock still carries l's token (ErrLockLost otherwise).
	Check(ctx context.Context, l *Lock) error
}

// Lock is a held lock.
type Lock struct {
	Scope ops.LockScope `json:"scope"`
	Owner string        `json:"owner"`
	Token string        `json:"token"`
	Fence int64         `json:"fence"`
}

// Policy decides who may ask, what approval a plan needs and who may vote. The approvals package implements it.
type Policy interface {
	// Permit reports whether the initiator may ask for the operation spec describes (E_NOT_AUTHORIZED, or
	// E_OUT_OF_SCOPE for an agent asking outside its scope). The target is resolved.
	Permit(ctx context.Context, req ops.Request, spec ops.Spec) error
	// Requirement returns the approval a plan needs.
	Requirement(ctx context.Context, req ops.Request, plan *ops.Plan) (ops.Approval, error)
	// CheckVoter reports whether voter may approve or deny the request now (E_NOT_AUTHORIZED, E_SELF_APPROVAL).
	CheckVoter(ctx context.Context, rec *ops.Record, voter ops.Initiator) error
	// Admit is the gate every path to approved passes (Decision): whether d may approve rec, with its current plan,
	// now. The decider may approve this request under this request's own rule (group, channel, self-approval,
	// risk; for a grant its giver, under the rule the grant was given under, never on the giver's own request;
	// for break-glass the on-call requester), and an agent's plan is within the agent's scope. The budget is the
	// engine's half of the gate.
	Admit(ctx context.Context, rec *ops.Record, d Decision) error
	// Features are the optional parts the policy offers (budgets, break-glass, take-over, reminders).
	Features() PolicyFeatures
}

// Notifier is told about every stored transition, after it is stored. Surfaces (Slack) implement it.
type Notifier interface {
	Changed(ctx context.Context, rec *ops.Record, t ops.Transition)
}

// ProgressNotifier is implemented by notifiers that also want the steps an execution reports while it runs (for
// example "2/4 nodes InService"), so the request's thread can tell them.
type ProgressNotifier interface {
	Progress(ctx context.Context, rec *ops.Record, msg string)
}
