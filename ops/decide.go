package ops

import (
	"context"
	"errors"
	"fmt"
)

// maxCASAttempts bounds retries of a compare-and-set lost to a concurrent writer.
const maxCASAttempts = 8

// Approve records voter's approval of the plan with hash planHash, the one the voter was shown. When the quorum is
// reached the request is executed (by exactly one caller). A vote for another plan than the current one (or for
// none: "") is refused with E_STALE_PLAN, so nobody approves a plan they did not see. Voting twice is harmless; a
// request already approved or executed is returned as it is.
func (e *Engine) Approve(ctx context.Context, id string, voter Initiator, planHash string) (*Record, error) {
	return e.decide(ctx, id, voter, true, "", planHash)
}

// Deny ends the request: one authorized Deny is enough, whichever plan the voter saw.
func (e *Engine) Deny(ctx context.Context, id string, voter Initiator) (*Record, error) {
	return e.decide(ctx, id, voter, false, "", "")
}

// DenyWithReason is Deny with the reason the approver gave: it is kept on the vote and in the transition's note.
func (e *Engine) DenyWithReason(ctx context.Context, id string, voter Initiator, reason string) (*Record, error) {
	return e.decide(ctx, id, voter, false, reason, "")
}

func (e *Engine) decide(ctx context.Context, id string, voter Initiator, approve bool, reason, seen string) (*Record, error) {
	reserved := false
	for range maxCASAttempts {
		rec, err := e.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec.Phase != PhaseAwaitingApproval {
			if reserved && !holdsBudget(rec.Phase) {
				// Reserved for a vote that lost its race to a Deny or a Cancel: nothing will run.
				e.releaseBudget(ctx, rec, 0)
			}
			return e.notAwaiting(rec, approve)
		}
		if now := e.opts.Clock.Now(); !rec.Approval.ExpiresAt.IsZero() && !now.Before(rec.Approval.ExpiresAt) {
			rec, err = e.expire(ctx, rec)
			if errors.Is(err, ErrVersionConflict) {
				continue
			}
			if err != nil {
				return nil, err
			}
			return rec, expiredError(rec)
		}
		if e.policy != nil {
			if err := e.policy.CheckVoter(ctx, rec, voter); err != nil {
				return rec, err
			}
		}
		if approve && seen != rec.Approval.PlanHash {
			return rec, stalePlanError(rec, seen)
		}
		if hasVoted(rec, voter.ID) && approve {
			return rec, nil
		}
		if approve && rec.Approval.Received()+1 >= rec.Approval.Required {
			// The vote that reaches the quorum passes the gate: it holds the budget first, atomically against
			// every replica.
			if err := e.admit(ctx, rec, Decision{Path: ByVotes, By: voter}); err != nil {
				if ue := AsError(err); ue.Code == CodeBudgetExceeded {
					next, rerr := e.reject(ctx, rec, ue)
					if errors.Is(rerr, ErrVersionConflict) {
						continue
					}
					return next, rerr
				}
				return rec, err
			}
			reserved = true
		}
		next, err := e.vote(ctx, rec, voter, approve, reason)
		if errors.Is(err, ErrVersionConflict) {
			continue
		}
		if err != nil {
			return nil, stateError("record the vote", err)
		}
		if next.Phase == PhaseApproved {
			return e.dispatch(ctx, next)
		}
		return next, nil
	}
	return nil, Errorf(CodeStateUnavailable, "", "retry", "too much contention recording the vote on %s", id)
}

// holdsBudget says whether a request in phase p keeps its budget reservation: it was approved and has run or may.
func holdsBudget(p Phase) bool {
	switch p {
	case PhaseApproved, PhaseExecuting, PhaseSucceeded, PhaseInterrupted:
		return true
	}
	return false
}

func (e *Engine) notAwaiting(rec *Record, approve bool) (*Record, error) {
	switch rec.Phase {
	case PhaseExpired:
		return rec, expiredError(rec)
	case PhaseApproved, PhaseExecuting, PhaseSucceeded, PhaseFailed, PhaseInterrupted:
		if approve {
			return rec, nil // already decided: a second click changes nothing
		}
	}
	return rec, Errorf(CodeInvalidPhase, "", "see "+Ask("request show id="+rec.ID()),
		"request %s is %s, not awaiting approval", rec.ID(), rec.Phase)
}

// stalePlanError refuses a vote for a plan other than the current one; seen is "" for a button from before votes
// carried the plan hash.
func stalePlanError(rec *Record, seen string) *Error {
	why := fmt.Sprintf("the plan of %s changed since you saw it", rec.ID())
	if seen == "" {
		why = fmt.Sprintf("this button does not say which plan of %s you saw", rec.ID())
	}
	return Errorf(CodeStalePlan, "", "review the current plan (its message now shows it) and click Approve there again",
		"the plan changed, look again: %s, and your vote was not counted", why)
}

func expiredError(rec *Record) *Error {
	return Errorf(CodeApprovalExpired, "", "submit the request again with a new request id",
		"approval of %s expired at %s", rec.ID(), rec.Approval.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
}

// ExpiredOutcome is how an expired request is told to an agent that asked for it: E_EXPIRED, what happened (how
// many approvals came of how many, by when; nothing was changed) and the next step: send it again with a new
// request id, or ask a lead. Nobody refused it, so it is never told as a denial.
func ExpiredOutcome(rec *Record) *Error {
	a := rec.Approval
	by := "its approval window closed"
	if !a.ExpiresAt.IsZero() {
		by = a.ExpiresAt.UTC().Format("2006-01-02 15:04 MST")
	}
	msg := fmt.Sprintf("nobody approved %s in time: %d of %d approvals came before %s, and nothing was changed",
		rec.ID(), a.Received(), a.Required, by)
	lead := "a lead"
	if a.Approvers != "" {
		lead = "a lead of " + a.Approvers
	}
	return &Error{Code: CodeExpired, Message: msg,
		Next: Again + " (this requestId stays expired), or ask " + lead + " in Slack to approve the new one in time"}
}

func hasVoted(rec *Record, voterID string) bool {
	for _, v := range rec.Approval.Votes {
		if v.Voter.ID == voterID && v.PlanHash == rec.Approval.PlanHash {
			return true
		}
	}
	return false
}

func (e *Engine) vote(ctx context.Context, rec *Record, voter Initiator, approve bool, reason string) (*Record, error) {
	v := Vote{Voter: voter, Approve: approve, At: e.opts.Clock.Now(), PlanHash: rec.Approval.PlanHash, Reason: reason}
	if !approve {
		note := "denied by " + voter.Display()
		if reason != "" {
			note += ": " + reason
		}
		return e.move(ctx, rec, PhaseDenied, voter, note, func(r *Record) {
			r.Approval.Votes = append(r.Approval.Votes, v)
		})
	}
	got := rec.Approval.Received() + 1
	to := PhaseAwaitingApproval
	if got >= rec.Approval.Required {
		to = PhaseApproved
	}
	note := fmt.Sprintf("approved by %s (%d/%d)", voter.Display(), got, rec.Approval.Required)
	return e.move(ctx, rec, to, voter, note, func(r *Record) {
		r.Approval.Votes = append(r.Approval.Votes, v)
		if to == PhaseApproved {
			approvedBy(Decision{Path: ByVotes, By: voter})(r)
		}
	})
}

func (e *Engine) expire(ctx context.Context, rec *Record) (*Record, error) {
	return e.move(ctx, rec, PhaseExpired, systemActor, "approval window closed", nil)
}

// Cancel withdraws a request that has not started executing. Only its owner (the requester, or whoever took it
// over) may cancel.
func (e *Engine) Cancel(ctx context.Context, id string, who Initiator) (*Record, error) {
	return e.withRecord(ctx, id, func(rec *Record) (*Record, error) {
		if rec.Owner.ID != who.ID {
			return rec, Errorf(CodeNotAuthorized, "", "ask "+rec.Owner.Display()+" or a lead to stop it",
				"only the owner of %s (%s) can cancel it", id, rec.Owner.Display())
		}
		switch rec.Phase {
		case PhaseReceived, PhasePlanned, PhaseAwaitingApproval, PhaseApproved:
			return e.move(ctx, rec, PhaseCancelled, who, "cancelled by "+who.Display(), nil)
		}
		return rec, Errorf(CodeInvalidPhase, "", "a request can be cancelled only before it executes",
			"request %s is %s", id, rec.Phase)
	})
}

// Stop ends a request on behalf of an approver: pending requests are cancelled and an interrupted one is closed
// without re-executing. An executing request cannot be stopped from here.
func (e *Engine) Stop(ctx context.Context, id string, who Initiator) (*Record, error) {
	return e.withRecord(ctx, id, func(rec *Record) (*Record, error) {
		if err := e.checkSteward(ctx, rec, who); err != nil {
			return rec, err
		}
		switch rec.Phase {
		case PhaseReceived, PhasePlanned, PhaseAwaitingApproval, PhaseApproved:
			return e.move(ctx, rec, PhaseCancelled, who, "stopped by "+who.Display(), nil)
		case PhaseInterrupted:
			next, err := e.move(ctx, rec, PhaseCancelled, who, "stopped by "+who.Display(), nil)
			if err == nil {
				e.releaseHeld(ctx, next)
			}
			return next, err
		}
		return rec, Errorf(CodeInvalidPhase, "", "stop the workload itself (e.g. "+Ask("train stop name=…")+")",
			"request %s is %s", id, rec.Phase)
	})
}

// TakeOver makes a person the owner of a request (typically one an agent started); it is recorded.
func (e *Engine) TakeOver(ctx context.Context, id string, who Initiator) (*Record, error) {
	return e.withRecord(ctx, id, func(rec *Record) (*Record, error) {
		if err := e.checkTakeOver(ctx, rec, who); err != nil {
			return rec, err
		}
		if rec.Owner.ID == who.ID {
			return rec, nil
		}
		return e.move(ctx, rec, rec.Phase, who, "taken over by "+who.Display(), func(r *Record) { r.Owner = who })
	})
}

// Resume re-runs an interrupted request for its owner: it is re-planned, and if anything changed since approval
// it asks for approval again rather than executing blindly.
func (e *Engine) Resume(ctx context.Context, id string, who Initiator) (*Record, error) {
	rec, err := e.withRecord(ctx, id, func(rec *Record) (*Record, error) {
		if rec.Owner.ID != who.ID {
			return rec, Errorf(CodeNotAuthorized, "", "take the request over first", "only the owner of %s can resume it", id)
		}
		if rec.Phase != PhaseInterrupted {
			return rec, Errorf(CodeInvalidPhase, "", "only interrupted requests resume", "request %s is %s", id, rec.Phase)
		}
		return e.move(ctx, rec, PhaseApproved, who, "resumed by "+who.Display(), func(r *Record) { r.Execution = nil })
	})
	if err != nil {
		return rec, err
	}
	return e.dispatch(ctx, rec)
}

// checkSteward allows humans who may approve the request (never agents).
func (e *Engine) checkSteward(ctx context.Context, rec *Record, who Initiator) error {
	if who.Kind != Human {
		return Errorf(CodeNotAuthorized, "", "ask a person to do it", "only people can stop or take over requests")
	}
	if e.policy == nil || rec.Owner.ID == who.ID {
		return nil
	}
	err := e.policy.CheckVoter(ctx, rec, who)
	var ue *Error
	if errors.As(err, &ue) && ue.Code == CodeSelfApproval {
		return nil // the requester may always stop their own request
	}
	return err
}

// TakeOverPolicy is a Policy that also decides who may take a request over. Without it, whoever may vote on the
// request may.
type TakeOverPolicy interface {
	// CheckTakeOver reports whether who may become the owner of rec (E_NOT_AUTHORIZED otherwise).
	CheckTakeOver(ctx context.Context, rec *Record, who Initiator) error
}

// checkTakeOver allows people who may approve the request, never its requester for being its requester: a
// requester who is no approver could otherwise take a request back from the lead who took it over, and resume it.
func (e *Engine) checkTakeOver(ctx context.Context, rec *Record, who Initiator) error {
	if who.Kind != Human {
		return Errorf(CodeNotAuthorized, "", "ask a person to do it", "only people can stop or take over requests")
	}
	if e.policy == nil || rec.Owner.ID == who.ID {
		return nil
	}
	if tp := e.features.TakeOver; tp != nil {
		return tp.CheckTakeOver(ctx, rec, who)
	}
	err := e.policy.CheckVoter(ctx, rec, who)
	var ue *Error
	if errors.As(err, &ue) && ue.Code == CodeSelfApproval {
		return Errorf(CodeNotAuthorized, "", "ask an approver to take it over; to end it, use Stop",
			"only approvers take over requests, and you asked for %s", rec.ID())
	}
	return err
}

// withRecord loads a record and applies fn, retrying when a concurrent writer wins the compare-and-set.
func (e *Engine) withRecord(ctx context.Context, id string, fn func(*Record) (*Record, error)) (*Record, error) {
	for range maxCASAttempts {
		rec, err := e.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		next, err := fn(rec)
		if errors.Is(err, ErrVersionConflict) {
			continue
		}
		var ue *Error
		if err != nil && !errors.As(err, &ue) {
			return nil, stateError("update the request", err)
		}
		return next, err
	}
	return nil, Errorf(CodeStateUnavailable, "", "retry", "too much contention updating %s", id)
}

// releaseHeld frees the scope lock an interrupted request kept while its outcome was unknown. Acquiring as the
// request refreshes the lock if it is still the request's and yields its token; another holder's is left alone.
func (e *Engine) releaseHeld(ctx context.Context, rec *Record) {
	op, err := e.catalog.Lookup(rec.Request.Operation)
	if err != nil {
		return
	}
	scope := lockScope(op.Spec(), rec.Request)
	if scope.IsZero() {
		return
	}
	if l, err := e.locks.Acquire(ctx, scope, rec.ID(), e.opts.LockTTL); err == nil {
		e.release(l)
	}
}
