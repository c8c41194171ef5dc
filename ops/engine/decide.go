package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hyperops/hyperops/ops"
)

// Approve records voter's approval of the plan with hash planHash, the one the voter was shown. When the quorum is
// reached the request is executed (by exactly one caller). A vote for another plan than the current one (or for
// none: "") is refused with E_STALE_PLAN, so nobody approves a plan they did not see. Voting twice is harmless; a
// request already approved or executed is returned as it is.
func (e *Engine) Approve(ctx context.Context, id string, voter ops.Initiator, planHash string) (*ops.Record, error) {
	return e.decide(ctx, id, voter, true, "", planHash)
}

// Deny ends the request: one authorized Deny is enough, whichever plan the voter saw.
func (e *Engine) Deny(ctx context.Context, id string, voter ops.Initiator) (*ops.Record, error) {
	return e.decide(ctx, id, voter, false, "", "")
}

// DenyWithReason is Deny with the reason the approver gave: it is kept on the vote and in the transition's note.
func (e *Engine) DenyWithReason(ctx context.Context, id string, voter ops.Initiator, reason string) (*ops.Record, error) {
	return e.decide(ctx, id, voter, false, reason, "")
}

func (e *Engine) decide(ctx context.Context, id string, voter ops.Initiator, approve bool, reason, seen string) (*ops.Record, error) {
	reserved := false
	for range maxCASAttempts {
		rec, err := e.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec.Phase != ops.PhaseAwaitingApproval {
			if reserved && !holdsBudget(rec.Phase) {
				// Reserved for a vote that lost its race to a Deny or a Cancel: nothing will run.
				e.releaseBudget(ctx, rec, 0)
			}
			return e.notAwaiting(rec, approve)
		}
		if now := e.opts.Clock.Now(); !rec.Approval.ExpiresAt.IsZero() && !now.Before(rec.Approval.ExpiresAt) {
			rec, err = e.expire(ctx, rec)
			if errors.Is(err, ops.ErrVersionConflict) {
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
			if err := e.admit(ctx, rec, Decision{Path: ops.ByVotes, By: voter}); err != nil {
				if ue := ops.AsError(err); ue.Code == ops.CodeBudgetExceeded {
					next, rerr := e.reject(ctx, rec, ue)
					if errors.Is(rerr, ops.ErrVersionConflict) {
						continue
					}
					return next, rerr
				}
				return rec, err
			}
			reserved = true
		}
		next, err := e.vote(ctx, rec, voter, approve, reason)
		if errors.Is(err, ops.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return nil, stateError("record the vote", err)
		}
		if next.Phase == ops.PhaseApproved {
			return e.dispatch(ctx, next)
		}
		return next, nil
	}
	return nil, ops.Errorf(ops.CodeStateUnavailable, "", "retry", "too much contention recording the vote on %s", id)
}

// holdsBudget says whether a request in phase p keeps its budget reservation: it was approved and has run or may.
func holdsBudget(p ops.Phase) bool {
	switch p {
	case ops.PhaseApproved, ops.PhaseExecuting, ops.PhaseSucceeded, ops.PhaseInterrupted:
		return true
	}
	return false
}

func (e *Engine) notAwaiting(rec *ops.Record, approve bool) (*ops.Record, error) {
	switch rec.Phase {
	case ops.PhaseExpired:
		return rec, expiredError(rec)
	case ops.PhaseApproved, ops.PhaseExecuting, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted:
		if approve {
			return rec, nil // already decided: a second click changes nothing
		}
	}
	return rec, ops.Errorf(ops.CodeInvalidPhase, "", "see "+ops.Ask("request show id="+rec.ID()),
		"request %s is %s, not awaiting approval", rec.ID(), rec.Phase)
}

// stalePlanError refuses a vote for a plan other than the current one; seen is "" for a button from before votes
// carried the plan hash.
func stalePlanError(rec *ops.Record, seen string) *ops.Error {
	why := fmt.Sprintf("the plan of %s changed since you saw it", rec.ID())
	if seen == "" {
		why = fmt.Sprintf("this button does not say which plan of %s you saw", rec.ID())
	}
	return ops.Errorf(ops.CodeStalePlan, "", "review the current plan (its message now shows it) and click Approve there again",
		"the plan changed, look again: %s, and your vote was not counted", why)
}

func expiredError(rec *ops.Record) *ops.Error {
	return ops.Errorf(ops.CodeApprovalExpired, "", "submit the request again with a new request id",
		"approval of %s expired at %s", rec.ID(), rec.Approval.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
}

func hasVoted(rec *ops.Record, voterID string) bool {
	for _, v := range rec.Approval.Votes {
		if v.Voter.ID == voterID && v.PlanHash == rec.Approval.PlanHash {
			return true
		}
	}
	return false
}

func (e *Engine) vote(ctx context.Context, rec *ops.Record, voter ops.Initiator, approve bool, reason string) (*ops.Record, error) {
	v := ops.Vote{Voter: voter, Approve: approve, At: e.opts.Clock.Now(), PlanHash: rec.Approval.PlanHash, Reason: reason}
	if !approve {
		note := "denied by " + voter.Display()
		if reason != "" {
			note += ": " + reason
		}
		return e.move(ctx, rec, ops.PhaseDenied, voter, note, func(r *ops.Record) {
			r.Approval.Votes = append(r.Approval.Votes, v)
		})
	}
	got := rec.Approval.Received() + 1
	to := ops.PhaseAwaitingApproval
	if got >= rec.Approval.Required {
		to = ops.PhaseApproved
	}
	note := fmt.Sprintf("approved by %s (%d/%d)", voter.Display(), got, rec.Approval.Required)
	return e.move(ctx, rec, to, voter, note, func(r *ops.Record) {
		r.Approval.Votes = append(r.Approval.Votes, v)
		if to == ops.PhaseApproved {
			approvedBy(Decision{Path: ops.ByVotes, By: voter})(r)
		}
	})
}

func (e *Engine) expire(ctx context.Context, rec *ops.Record) (*ops.Record, error) {
	return e.move(ctx, rec, ops.PhaseExpired, systemActor, "approval window closed", nil)
}
