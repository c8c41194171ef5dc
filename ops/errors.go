package ops

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a stable, machine-readable error code. Agents branch on it; people read Message and Next.
type Code string

// The error codes (docs/architecture.md, "Error codes").
const (
	CodeInvalidArgument      Code = "E_INVALID_ARGUMENT"
	CodeUnknownOperation     Code = "E_UNKNOWN_OPERATION"
	CodeNamespaceNotAllowed  Code = "E_NAMESPACE_NOT_ALLOWED"
	CodeQuotaExceeded        Code = "E_QUOTA_EXCEEDED"
	CodeImageNotAllowed      Code = "E_IMAGE_NOT_ALLOWED"
	CodeForbiddenField       Code = "E_FORBIDDEN_FIELD"
	CodeNotAuthorized        Code = "E_NOT_AUTHORIZED"
	CodeSelfApproval         Code = "E_SELF_APPROVAL"
	CodeApprovalExpired      Code = "E_APPROVAL_EXPIRED"
	CodeStalePlan            Code = "E_STALE_PLAN"
	CodeLocked               Code = "E_LOCKED"
	CodeIdempotencyConflict  Code = "E_IDEMPOTENCY_CONFLICT"
	CodeStateUnavailable     Code = "E_STATE_UNAVAILABLE"
	CodeClusterUnavailable   Code = "E_CLUSTER_UNAVAILABLE"
	CodeAWSError             Code = "E_AWS_ERROR"
	CodeCRDMissing           Code = "E_CRD_MISSING"
	CodeInUse                Code = "E_IN_USE"
	CodeNotFound             Code = "E_NOT_FOUND"
	CodeInvalidPhase         Code = "E_INVALID_PHASE"
	CodeUnknownCluster       Code = "E_UNKNOWN_CLUSTER"
	CodeInstanceTypeNotAllow Code = "E_INSTANCE_TYPE_NOT_ALLOWED"
	CodeInternal             Code = "E_INTERNAL"
	// CodeOutOfScope: an agent asked for something outside its scope (agents[].scope: clusters, namespaces,
	// maxRisk, readOnly); refused, never sent for approval.
	CodeOutOfScope Code = "E_OUT_OF_SCOPE"
	// CodeBudgetExceeded: the request would take a spend budget (budgets[] in config) past its limit; the error
	// names the budget, what is used and when it frees up.
	CodeBudgetExceeded Code = "E_BUDGET_EXCEEDED"
	// CodeBusy: the bot had no room to take the request; nothing was done, resend it (same requestId) shortly.
	CodeBusy Code = "E_BUSY"
	// CodeExpired is an expired request's outcome, as its requester hears it: the approval window closed before
	// the quorum, nothing was changed and nobody refused it. (A vote cast too late is E_APPROVAL_EXPIRED.)
	CodeExpired Code = "E_EXPIRED"
	// CodeNotRevertible: a request cannot be reverted (what it removed is gone, it changed nothing, or HyperOps
	// recorded no state to restore); nothing was asked.
	CodeNotRevertible Code = "E_NOT_REVERTIBLE"
	// CodeReservationEnds: a training job's max-hours outlives the reservation (SageMaker training plan) its
	// instance group runs on; the error names the plan and its end time (risk.reservationOutlived: refuse).
	CodeReservationEnds Code = "E_RESERVATION_ENDS"
	// CodeBreakGlassUnacknowledged: a person asked to break glass while an earlier break-glass of theirs waits for
	// a lead's acknowledgement; the error names that request and who may acknowledge it.
	CodeBreakGlassUnacknowledged Code = "E_BREAK_GLASS_UNACKNOWLEDGED"
)

// Error is a user-facing failure: a stable code, a one-line message a person understands, the field at fault when
// there is one, and the next step. It wraps the underlying cause (never shown verbatim to users when it may hold
// secrets; the logger redacts).
type Error struct {
	Code    Code   `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Next    string `json:"next,omitempty"`
	// Holder is the request id holding a lock, for E_LOCKED.
	Holder string `json:"holder,omitempty"`
	// Omitted is set on the last entry of a capped list (see Errors.Capped): how many problems it stands for.
	Omitted int `json:"omitted,omitempty"`
	// Retry says nothing was changed and the cause may pass, so the request may be sent again with the same
	// request id and is then planned again (a plan that did not finish in time).
	Retry bool  `json:"retry,omitempty"`
	Err   error `json:"-"`
}

// Error renders "CODE field: message (next step)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Code))
	if e.Field != "" {
		b.WriteString(" ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Next != "" {
		b.WriteString(" — ")
		b.WriteString(e.Next)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code, so errors.Is(err, ErrStateUnavailable) matches any
// E_STATE_UNAVAILABLE.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, field, next, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...), Next: next}
}

// Wrap builds an *Error around a cause.
func Wrap(err error, code Code, field, next, format string, args ...any) *Error {
	e := Errorf(code, field, next, format, args...)
	e.Err = err
	return e
}

// AsError returns err as an *Error; anything else becomes E_INTERNAL carrying err.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "internal error: " + err.Error(), Next: "retry; if it persists, check the bot's log", Err: err}
}

// Errors is a list of problems reported together.
type Errors []*Error

// Error joins the problems one per line.
func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Sentinels the state store returns and the engine understands.
var (
	// ErrStateUnavailable: Redis cannot be reached; mutating work stops (fail closed).
	ErrStateUnavailable = &Error{Code: CodeStateUnavailable, Message: "the state store (Redis) is unreachable, so nothing that changes the cluster can run",
		Next: "retry with the same request id once Redis is back; read-only commands still work"}
	// ErrNotFound: no such request record.
	ErrNotFound = errors.New("not found")
	// ErrVersionConflict: a compare-and-set lost to another writer.
	ErrVersionConflict = errors.New("version conflict")
	// ErrLockLost: a lock expired or was taken over before it was renewed or released.
	ErrLockLost = errors.New("lock lost")
)

// LockHeldError reports that a lock scope is held by another request.
type LockHeldError struct {
	Scope  LockScope
	Holder string
}

func (e *LockHeldError) Error() string {
	return fmt.Sprintf("%s is locked by request %s", e.Scope, e.Holder)
}

// Unwrap exposes each problem, so errors.As finds the first *Error and errors.Is matches any code.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// MaxErrors is how many problems a reply lists; the rest are counted in one last entry ("…and N more").
const MaxErrors = 20

// Capped returns at most MaxErrors problems followed by one entry counting the rest, so 10,000 unknown words
// cannot make a reply Slack refuses. A list of MaxErrors+1 or fewer is returned as is, so capping twice changes
// nothing.
func (es Errors) Capped() Errors {
	if len(es) <= MaxErrors+1 {
		return es
	}
	rest := es[MaxErrors:]
	omitted := 0
	for _, e := range rest {
		omitted += e.Count()
	}
	more := &Error{Code: rest[0].Code, Message: fmt.Sprintf("…and %d more problems", omitted),
		Next: "fix the problems above and send again to see the rest", Omitted: omitted}
	return append(append(Errors{}, es[:MaxErrors]...), more)
}

// Count is how many problems e stands for: one, or those a capped list's last entry counts.
func (e *Error) Count() int {
	if e.Omitted > 0 {
		return e.Omitted
	}
	return 1
}

// maxEcho is how much of a value a person or agent typed is repeated back in a message.
const maxEcho = 80

// Echo shortens text repeated back in an error message (a name, a value) to maxEcho characters, so a refusal
// stays readable and inside Slack's limits whatever was sent.
func Echo(s string) string {
	r := []rune(s)
	if len(r) <= maxEcho {
		return s
	}
	return string(r[:maxEcho-1]) + "…"
}
