package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// GlassClaim is a person's break-glass not yet acknowledged: the request and when it was claimed.
type GlassClaim struct {
	RequestID string
	At        time.Time
}

// GlassLog holds, per person, the break-glass that waits for a lead's acknowledgement, shared by every replica
// (ops/state implements it in Redis). Unreachable storage is an error matching ErrStateUnavailable.
type GlassLog interface {
	// ClaimGlass records claim for person unless they hold another one; replace, when not empty, is a claim the
	// engine found stale, which this claim may take the place of. It returns the claim person holds after the
	// call: claim itself when it was recorded (or was already theirs: a retry), else the one in the way.
	ClaimGlass(ctx context.Context, person string, claim GlassClaim, replace string) (GlassClaim, error)
	// ReleaseGlass drops person's claim if it is for requestID; another claim is left alone.
	ReleaseGlass(ctx context.Context, person, requestID string) error
}

// BreakGlassPolicy is a Policy that says who may break glass on a request and who may acknowledge it (approvals
// implements it). Without it nobody breaks glass.
type BreakGlassPolicy interface {
	// CheckBreakGlass reports whether who, its requester, is in the on-call group rec's rule names now
	// (E_NOT_AUTHORIZED otherwise; agents never).
	CheckBreakGlass(ctx context.Context, rec *ops.Record, who ops.Initiator) error
	// CheckAcknowledge reports whether who is a lead of rec (a member of its approver group) who may acknowledge
	// its break-glass.
	CheckAcknowledge(ctx context.Context, rec *ops.Record, who ops.Initiator) error
}

// BreakGlass approves rec alone, on behalf of its requester who is on call, with a reason: no vote, no quorum.
// It is refused unless who asked for the request and owns it, is a person (agents never break glass), the
// request awaits approval, its rule named an on-call group (Approval.BreakGlass) and who is in that group now
// (BreakGlassPolicy), and who holds no earlier break-glass that a lead has not acknowledged
// (E_BREAK_GLASS_UNACKNOWLEDGED, naming it). The claim on who's one break-glass is taken in the GlassLog before
// the record moves, atomically across replicas, and given back when the record could not move. The approval is a
// vote marked BreakGlass, Record.BreakGlass says who, when and why, and the transition's note carries the reason;
// the budget is held as for a quorum. The outbox tells every approver and the audit channel.
func (e *Engine) BreakGlass(ctx context.Context, id string, who ops.Initiator, reason string) (*ops.Record, error) {
	reason = strings.TrimSpace(reason)
	if who.Kind != ops.Human {
		return nil, ops.Errorf(ops.CodeNotAuthorized, "", "ask a person on call, or a lead to approve it",
			"%s cannot break glass: agents never do", who.Display())
	}
	if reason == "" {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "reason", "say why it cannot wait for an approval, then break glass again",
			"breaking glass needs a reason: the approvers and the audit trail read it")
	}
	if n := len([]rune(reason)); n > ops.MaxBreakGlassReason {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "reason", fmt.Sprintf("shorten it to %d characters", ops.MaxBreakGlassReason),
			"the reason is %d characters long", n)
	}
	rec, err := e.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec, err = e.mayBreakGlass(ctx, rec, who); err != nil {
		return rec, err
	}
	if err := e.claimGlass(ctx, rec, who); err != nil {
		return rec, err
	}
	next, moved, err := e.breakGlass(ctx, id, who, reason)
	if errors.Is(err, ops.ErrStateUnavailable) {
		// The record may have moved although its answer was lost: the claim stays. If it did not move, the claim
		// is found stale (its request never broke glass) once PlanTTL has passed or the request is decided.
		return next, err
	}
	if err != nil || next.BreakGlass == nil || next.BreakGlass.By.ID != who.ID {
		// Nothing broke glass: the claim goes back, so a refusal does not block the next one. Should this fail
		// too, the claim is found stale (its request never broke glass) on the next attempt.
		if rerr := e.opts.Glass.ReleaseGlass(context.WithoutCancel(ctx), who.ID, id); rerr != nil {
			e.report(id, fmt.Errorf("give back the break-glass claim of %s: %w", who.ID, rerr))
		}
		return next, err
	}
	if moved {
		return e.dispatch(ctx, next)
	}
	return next, nil // a retry: the call that moved it dispatched it (or the sweep enqueues it)
}

// MayBreakGlass reports whether who may break glass on rec now, as BreakGlass will check it but for the reason and
// their earlier break-glass: a surface asks it before asking for the reason, so nobody types one for nothing.
func (e *Engine) MayBreakGlass(ctx context.Context, rec *ops.Record, who ops.Initiator) (*ops.Record, error) {
	if who.Kind != ops.Human {
		return rec, ops.Errorf(ops.CodeNotAuthorized, "", "ask a person on call, or a lead to approve it",
			"%s cannot break glass: agents never do", who.Display())
	}
	return e.mayBreakGlass(ctx, rec, who)
}

// mayBreakGlass checks everything but the claim: an expired request is expired and refused.
func (e *Engine) mayBreakGlass(ctx context.Context, rec *ops.Record, who ops.Initiator) (*ops.Record, error) {
	if retried(rec, who) {
		return rec, nil
	}
	if rec.Phase != ops.PhaseAwaitingApproval {
		return rec, ops.Errorf(ops.CodeInvalidPhase, "", "see "+ops.Ask("request show id="+rec.ID()),
			"request %s is %s, not awaiting approval: there is no glass to break", rec.ID(), rec.Phase)
	}
	if now := e.opts.Clock.Now(); !rec.Approval.ExpiresAt.IsZero() && !now.Before(rec.Approval.ExpiresAt) {
		next, err := e.expire(ctx, rec)
		if err != nil && !errors.Is(err, ops.ErrVersionConflict) {
			return rec, stateError("expire the request", err)
		}
		if next != nil {
			rec = next
		}
		return rec, expiredError(rec)
	}
	if who.ID != rec.Request.Initiator.ID || who.ID != rec.Owner.ID {
		return rec, ops.Errorf(ops.CodeNotAuthorized, "", "approve or deny it instead, if you are one of its approvers",
			"only the person who asked for %s (and still owns it) may break glass on it", rec.ID())
	}
	if rec.Approval.BreakGlass == "" || rec.Request.Initiator.Kind != ops.Human {
		return rec, ops.Errorf(ops.CodeNotAuthorized, "", "wait for its approvers; to break glass, be in the on-call group its rule's breakGlass names when you ask",
			"%s offers no break-glass: its approval rule names no on-call group, or its requester was not on call when it was planned (%s)",
			rec.ID(), rec.Approval.Rule)
	}
	if e.features.BreakGlass == nil || e.opts.Glass == nil {
		return rec, ops.Errorf(ops.CodeNotAuthorized, "", "wait for its approvers", "break-glass is not available here")
	}
	return rec, e.judge(ctx, rec, Decision{Path: ops.ByBreakGlass, By: who})
}

// retried reports whether who broke glass on rec already and it went on: a retry (after a lost answer, say)
// answers that. A request that waits for approval again (its plan changed before it ran, and with it the votes) may
// be broken again, as its new plan was approved by nobody.
func retried(rec *ops.Record, who ops.Initiator) bool {
	return rec.BreakGlass != nil && rec.BreakGlass.By.ID == who.ID && rec.Phase != ops.PhaseAwaitingApproval
}

// claimGlass takes who's one break-glass for rec. A claim in the way is who's earlier break-glass, refused while no
// lead acknowledged it; it is stale (and replaced) when its request is gone, was acknowledged, or never broke glass
// and can no longer (decided, expired) or was claimed longer than PlanTTL ago (the call that claimed it gave up).
func (e *Engine) claimGlass(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	now := e.opts.Clock.Now()
	replace := ""
	for range maxCASAttempts {
		held, err := e.opts.Glass.ClaimGlass(ctx, who.ID, GlassClaim{RequestID: rec.ID(), At: now}, replace)
		if err != nil {
			return stateError("record the break-glass", err)
		}
		if held.RequestID == rec.ID() {
			return nil
		}
		if err := e.staleClaim(ctx, who, held, now); err != nil {
			return err
		}
		replace = held.RequestID
	}
	return ops.Errorf(ops.CodeStateUnavailable, "", "retry", "too much contention recording the break-glass of %s", rec.ID())
}

func (e *Engine) staleClaim(ctx context.Context, who ops.Initiator, held GlassClaim, now time.Time) error {
	prev, err := e.store.Get(ctx, held.RequestID)
	if errors.Is(err, ops.ErrNotFound) {
		return nil
	}
	if err != nil {
		return stateError("read the earlier break-glass", err)
	}
	if bg := prev.BreakGlass; bg != nil && bg.By.ID == who.ID {
		if bg.AcknowledgedBy != nil {
			return nil
		}
		return UnacknowledgedError(prev)
	}
	if prev.Phase == ops.PhaseAwaitingApproval && now.Sub(held.At) < e.opts.PlanTTL {
		return ops.Errorf(ops.CodeBreakGlassUnacknowledged, "", "try again in a minute",
			"your break-glass of request %s is still being recorded; one break-glass at a time", prev.ID())
	}
	return nil
}

// UnacknowledgedError refuses a second break-glass while prev's waits for a lead: it names prev, when it broke
// glass and who may acknowledge it.
func UnacknowledgedError(prev *ops.Record) *ops.Error {
	bg := prev.BreakGlass
	return ops.Errorf(ops.CodeBreakGlassUnacknowledged, "",
		fmt.Sprintf("ask %s to press Acknowledge on the break-glass notice of %s, or ask them to approve this request", leadsOf(prev.Approval), prev.ID()),
		"you broke glass on request %s at %s and no lead has acknowledged it yet: one break-glass at a time",
		prev.ID(), bg.At.UTC().Format("2006-01-02 15:04 MST"))
}

// leadsOf names who may acknowledge a break-glass: the approver group, with the users and user groups it lists.
func leadsOf(a ops.Approval) string {
	var who []string
	who = append(who, a.ApproverUsers...)
	for _, g := range a.ApproverUserGroups {
		who = append(who, "user group "+g)
	}
	if len(who) == 0 {
		return "a lead of " + a.Approvers
	}
	return fmt.Sprintf("a lead of %s (%s)", a.Approvers, strings.Join(who, ", "))
}

// breakGlass moves the request to approved with the break-glass recorded, holding the budget first as the vote
// reaching a quorum does; moved says this call stored it (not an earlier one).
func (e *Engine) breakGlass(ctx context.Context, id string, who ops.Initiator, reason string) (rec *ops.Record, moved bool, err error) {
	reserved := false
	for range maxCASAttempts {
		rec, err = e.Get(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if retried(rec, who) {
			return rec, false, nil
		}
		if rec, err = e.mayBreakGlass(ctx, rec, who); err != nil {
			if reserved && !holdsBudget(rec.Phase) {
				e.releaseBudget(ctx, rec, 0)
			}
			return rec, false, err
		}
		d := Decision{Path: ops.ByBreakGlass, By: who}
		if err := e.admit(ctx, rec, d); err != nil {
			if reserved {
				e.releaseBudget(ctx, rec, 0)
			}
			return rec, false, err
		}
		reserved = true
		now := e.opts.Clock.Now()
		group := rec.Approval.BreakGlass
		note := fmt.Sprintf("BREAK-GLASS by %s (on call, %s): %s", who.Display(), group, reason)
		// The transition and Record.BreakGlass carry the same instant: the entry that broke glass is known by it
		// (BreakGlass.Broke), so the outbox tells it as a break-glass and the audit entry carries it.
		next, err := e.moveAt(ctx, rec, ops.PhaseApproved, who, note, ops.KindPhase, now, func(r *ops.Record) {
			r.Approval.Votes = append(r.Approval.Votes, ops.Vote{Voter: who, Approve: true, At: now,
				PlanHash: r.Approval.PlanHash, Reason: reason, BreakGlass: true})
			r.BreakGlass = &ops.BreakGlass{By: who, At: now, Reason: reason, Group: group, Entry: len(r.History)}
			approvedBy(d)(r)
		})
		if errors.Is(err, ops.ErrVersionConflict) {
			continue
		}
		if err != nil {
			// The answer may be lost after it was stored: the budget stays held (it lapses with its window, and a
			// retry finds the break-glass recorded).
			return nil, false, stateError("record the break-glass", err)
		}
		return next, true, nil
	}
	return nil, false, ops.Errorf(ops.CodeStateUnavailable, "", "retry", "too much contention recording the break-glass of %s", id)
}

// AcknowledgeBreakGlass records a lead's acknowledgement of the break-glass of request id, and frees its breaker to
// break glass again. Only a person who may acknowledge it (BreakGlassPolicy.CheckAcknowledge: a member of its
// approver group), and not the person who broke glass, may. Acknowledging again changes nothing.
func (e *Engine) AcknowledgeBreakGlass(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error) {
	if who.Kind != ops.Human {
		return nil, ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead", "only a lead acknowledges a break-glass, never %s", who.Display())
	}
	rec, err := e.withRecord(ctx, id, func(rec *ops.Record) (*ops.Record, error) {
		bg := rec.BreakGlass
		switch {
		case bg == nil:
			return rec, ops.Errorf(ops.CodeInvalidPhase, "", "see "+ops.Ask("request show id="+rec.ID()),
				"nobody broke glass on request %s: there is nothing to acknowledge", rec.ID())
		case bg.AcknowledgedBy != nil:
			return rec, nil
		case bg.By.ID == who.ID:
			return rec, ops.Errorf(ops.CodeNotAuthorized, "", "ask "+leadsOf(rec.Approval),
				"you broke glass on %s: a lead acknowledges it, not you", rec.ID())
		}
		bp := e.features.BreakGlass
		if bp == nil {
			return rec, ops.Errorf(ops.CodeNotAuthorized, "", "ask a platform admin", "break-glass is not available here")
		}
		if err := bp.CheckAcknowledge(ctx, rec, who); err != nil {
			return rec, err
		}
		now := e.opts.Clock.Now()
		note := fmt.Sprintf("break-glass of %s acknowledged by %s", bg.By.Display(), who.Display())
		return e.moveKind(ctx, rec, rec.Phase, who, note, ops.KindBreakGlassAck, func(r *ops.Record) {
			by := who
			r.BreakGlass.AcknowledgedBy, r.BreakGlass.AcknowledgedAt = &by, now
		})
	})
	if err != nil || rec == nil || rec.BreakGlass == nil || e.opts.Glass == nil {
		return rec, err
	}
	// Stored first, freed second: a claim left behind by a lost answer is found acknowledged, hence stale.
	if err := e.opts.Glass.ReleaseGlass(ctx, rec.BreakGlass.By.ID, rec.ID()); err != nil {
		e.report(rec.ID(), fmt.Errorf("free the break-glass claim of %s: %w", rec.BreakGlass.By.ID, err))
	}
	return rec, nil
}
