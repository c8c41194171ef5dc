package ops

import (
	"context"
	"errors"
)

// ErrOutcomeUnknown marks a write error after which the change may or may not have been made: the answer was
// lost (a 5xx, a dropped connection, a timeout). errors.Is finds it in the chain; the engine then reads back
// through the operation's Verifier instead of sending again.
var ErrOutcomeUnknown = errors.New("the outcome of the change is unknown")

// Verdict is what reading back says about a write whose answer was lost.
type Verdict int

const (
	// VerdictUnknown: the read-back cannot tell; people decide (the request ends interrupted, its lock held).
	VerdictUnknown Verdict = iota
	// VerdictApplied: the change took effect; written is what Write would have returned, so Await can follow.
	VerdictApplied
	// VerdictNotApplied: nothing changed; the request fails with the write's error.
	VerdictNotApplied
)

// Verifier is implemented by step operations that can tell whether a write whose outcome is unknown took effect,
// without sending it again blindly (an idempotent re-send, like EKS's clientRequestToken, is a fine read-back).
// A non-nil error with VerdictNotApplied is the refusal to report; with VerdictUnknown it says why the read-back
// could not tell.
type Verifier interface {
	Verify(ctx context.Context, req *Request, plan *Plan, x Execution) (v Verdict, written []byte, err error)
}

// OutcomeUnknown wraps err so that errors.Is(err, ErrOutcomeUnknown) holds, keeping what errors.As finds in it.
func OutcomeUnknown(err error) error {
	if err == nil || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	var ue *Error
	if errors.As(err, &ue) {
		c := *ue
		c.Err = errors.Join(ErrOutcomeUnknown, ue.Err)
		return &c
	}
	return errors.Join(ErrOutcomeUnknown, err)
}
