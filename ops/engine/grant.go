package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/grants"
)

// UseResult is what GrantStore.UseGrant answers: the use it counted (or had counted for the same request), or why
// the grant refused.
type UseResult struct {
	OK   bool
	Use  int
	Used int
	// Refused is "revoked", "expired", "used up" or "gone" when not OK.
	Refused string
}

// GrantStore keeps the grants, shared by every replica (ops/state implements it in Redis). Unreachable storage is an
// error matching ErrStateUnavailable.
type GrantStore interface {
	// CreateGrant stores g unless a grant with its id exists; it returns the stored grant and whether this call
	// created it.
	CreateGrant(ctx context.Context, g grants.Grant) (grants.Grant, bool, error)
	// Grant returns one grant (ErrNotFound once it is gone).
	Grant(ctx context.Context, id string) (grants.Grant, error)
	// Grants returns the grants not yet expired (and those expired recently), soonest expiry first.
	Grants(ctx context.Context, now time.Time) ([]grants.Grant, error)
	// UseGrant counts one use of grant id by request requestID, atomically: refused when revoked, expired at now
	// or used up; a second call for the same request answers the use the first one counted.
	UseGrant(ctx context.Context, id, requestID string, now time.Time) (UseResult, error)
	// RevokeGrant marks it revoked by who at now; it returns the grant and whether this call revoked it (false:
	// it was revoked before).
	RevokeGrant(ctx context.Context, id string, who ops.Initiator, now time.Time) (grants.Grant, bool, error)
}

// MayGrant reports whether who may approve rec and give a grant on it, as ApproveAndGrant will check it before the
// form: a surface asks it before opening the form, so nobody fills it in for nothing.
func (e *Engine) MayGrant(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	if e.opts.Grants == nil {
		return ops.Errorf(ops.CodeNotAuthorized, "", "approve it without a grant", "grants are not available here")
	}
	if who.Kind != ops.Human {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead", "only a lead gives a grant, never %s", who.Display())
	}
	if rec.Phase != ops.PhaseAwaitingApproval {
		return ops.Errorf(ops.CodeInvalidPhase, "", "see "+ops.Ask("request show id="+rec.ID()), "request %s is %s, not awaiting approval", rec.ID(), rec.Phase)
	}
	if e.policy != nil {
		if err := e.policy.CheckVoter(ctx, rec, who); err != nil {
			return err
		}
	}
	if ge := ops.GrantRefusal(rec); ge != nil {
		return ge
	}
	return nil
}

// ApproveAndGrant approves request id for who, as Approve does (same checks, the plan with hash planHash), and gives
// a grant from it: later requests of the same operation, cluster and requester inside spec's bounds are approved
// without a vote (grant id GrantID(id), so two submits give one grant). Nothing is given when the approval is
// refused. The grant is created after the approval: should that fail, the request stays approved and the same call
// again gives the grant.
func (e *Engine) ApproveAndGrant(ctx context.Context, id string, who ops.Initiator, planHash string, spec grants.Spec) (*ops.Record, *grants.Grant, error) {
	if e.opts.Grants == nil {
		return nil, nil, ops.Errorf(ops.CodeNotAuthorized, "", "approve it without a grant", "grants are not available here")
	}
	if who.Kind != ops.Human {
		return nil, nil, ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead", "only a lead gives a grant, never %s", who.Display())
	}
	rec, err := e.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	retry := rec.Phase != ops.PhaseAwaitingApproval && hasApproved(rec, who.ID)
	if !retry {
		if rec.Phase == ops.PhaseAwaitingApproval {
			if err := e.checkVoter(ctx, rec, who); err != nil {
				return rec, nil, err
			}
			if ge := ops.GrantRefusal(rec); ge != nil {
				return rec, nil, ge
			}
			if errs := grants.Validate(spec, rec); len(errs) > 0 {
				return rec, nil, errs[0]
			}
		}
		if rec, err = e.Approve(ctx, id, who, planHash); err != nil {
			return rec, nil, err
		}
		if !hasApproved(rec, who.ID) {
			return rec, nil, ops.Errorf(ops.CodeInvalidPhase, "", "see "+ops.Ask("request show id="+id),
				"request %s was decided without your approval: no grant was given", id)
		}
	} else if err := e.checkVoter(ctx, rec, who); err != nil {
		return rec, nil, err // approved by a vote of who's, who may no longer approve such requests
	} else if ge := ops.GrantRefusal(rec); ge != nil {
		return rec, nil, ge // approved by a vote of who's, but no grant may be given on it
	} else if errs := grants.Validate(spec, rec); len(errs) > 0 {
		return rec, nil, errs[0]
	}
	now := e.opts.Clock.Now()
	g := grants.Grant{ID: grants.ID(id), Operation: rec.Request.Operation, Cluster: rec.Request.Target.Cluster, Target: spec.Target,
		Requester: rec.Request.Initiator, MaxSize: spec.MaxSize, MaxHourly: spec.MaxHourly, MaxTotal: spec.MaxTotal,
		Uses: spec.Uses, ExpiresAt: now.Add(time.Duration(spec.Hours * float64(time.Hour))).Truncate(time.Second),
		GivenBy: who, GivenAt: now, GivenIn: id, Thread: spec.Thread, Approvers: rec.Approval.Approvers, Rule: rec.Approval.Rule}
	stored, _, err := e.opts.Grants.CreateGrant(ctx, g)
	if err != nil {
		return rec, nil, stateError("record the grant (the request is approved; give the grant again)", err)
	}
	return rec, &stored, nil
}

// checkVoter asks the policy whether who may vote on rec now; without a policy, anyone may.
func (e *Engine) checkVoter(ctx context.Context, rec *ops.Record, who ops.Initiator) error {
	if e.policy == nil {
		return nil
	}
	return e.policy.CheckVoter(ctx, rec, who)
}

// hasApproved reports whether voter approved rec's current plan.
func hasApproved(rec *ops.Record, voter string) bool {
	for _, v := range rec.Approval.Votes {
		if v.Voter.ID == voter && v.Approve && v.PlanHash == rec.Approval.PlanHash {
			return true
		}
	}
	return false
}

// VisibleGrants lists the live grants viewer may see, soonest expiry first: those they gave, those for their
// requests, and those they may revoke (they may approve the request the grant was given on). App Home and
// /hp grants call it. The store unreachable is E_STATE_UNAVAILABLE.
func (e *Engine) VisibleGrants(ctx context.Context, viewer ops.Initiator) ([]grants.Grant, error) {
	if e.opts.Grants == nil {
		return nil, nil
	}
	now := e.opts.Clock.Now()
	all, err := e.opts.Grants.Grants(ctx, now)
	if err != nil {
		return nil, stateError("list the grants", err)
	}
	var out []grants.Grant
	for _, g := range all {
		if !g.Live(now) {
			continue
		}
		if g.GivenBy.ID == viewer.ID || g.Requester.ID == viewer.ID || e.mayRevoke(ctx, g, viewer) == nil {
			out = append(out, g)
		}
	}
	return out, nil
}

// mayRevoke reports whether who may revoke g: its giver, or a person who may approve the request it was given on
// (the same rule's approvers).
func (e *Engine) mayRevoke(ctx context.Context, g grants.Grant, who ops.Initiator) error {
	if who.Kind != ops.Human {
		return ops.Errorf(ops.CodeNotAuthorized, "", "ask a lead", "only a person revokes a grant, never %s", who.Display())
	}
	if g.GivenBy.ID == who.ID {
		return nil
	}
	refuse := ops.Errorf(ops.CodeNotAuthorized, "", fmt.Sprintf("ask %s or a lead of %s", g.GivenBy.Display(), g.Approvers),
		"only %s, who gave grant %s, or a lead who may approve requests like %s may revoke it", g.GivenBy.Display(), g.ID, g.GivenIn)
	if g.Requester.ID != who.ID { // who may not see it learns nothing, not even that it exists (RevokeGrant's not-found)
		refuse = ops.Errorf(ops.CodeNotFound, "id", "check the id with "+ops.Ask("grants"), "no grant %s (it may have expired)", ops.Echo(g.ID))
	}
	if e.policy == nil {
		return refuse
	}
	rec, err := e.store.Get(ctx, g.GivenIn)
	if err != nil {
		return refuse
	}
	if err := e.policy.CheckVoter(ctx, rec, who); err != nil {
		return refuse
	}
	return nil
}

// RevokeGrant revokes grant id for who (its giver, or a lead who may approve under the same rule): the next
// request it would have approved waits for votes instead. Revoking again changes nothing (revoked false). The
// store unreachable is E_STATE_UNAVAILABLE and nothing changed.
func (e *Engine) RevokeGrant(ctx context.Context, id string, who ops.Initiator) (g grants.Grant, revoked bool, err error) {
	if e.opts.Grants == nil {
		return grants.Grant{}, false, ops.Errorf(ops.CodeNotFound, "id", "check the id with "+ops.Ask("grants"), "grants are not available here")
	}
	g, err = e.opts.Grants.Grant(ctx, id)
	if errors.Is(err, ops.ErrNotFound) {
		return grants.Grant{}, false, ops.Errorf(ops.CodeNotFound, "id", "check the id with "+ops.Ask("grants"), "no grant %s (it may have expired)", ops.Echo(id))
	}
	if err != nil {
		return grants.Grant{}, false, stateError("read the grant", err)
	}
	if err := e.mayRevoke(ctx, g, who); err != nil {
		return g, false, err
	}
	if g.RevokedBy == nil {
		g, revoked, err = e.opts.Grants.RevokeGrant(ctx, id, who, e.opts.Clock.Now())
		if err != nil {
			return g, false, stateError("revoke the grant", err)
		}
	}
	// Recorded on the request it was given on, whose thread the outbox tells (retried, found again after a lost
	// answer). Revoking again records it if an earlier revocation could not.
	if err := e.recordRevocation(ctx, g); err != nil {
		e.report(g.GivenIn, fmt.Errorf("record the revocation of grant %s: %w", g.ID, err))
	}
	return g, revoked, nil
}

// recordRevocation adds the revocation of g to the history of the request it was given on, once.
func (e *Engine) recordRevocation(ctx context.Context, g grants.Grant) error {
	if g.RevokedBy == nil || g.GivenIn == "" {
		return nil
	}
	_, err := e.withRecord(ctx, g.GivenIn, func(rec *ops.Record) (*ops.Record, error) {
		for _, t := range rec.History {
			if id, _, _, ok := grants.ParseRevoked(t.Note); ok && t.Kind == ops.KindGrantRevoked && id == g.ID {
				return rec, nil
			}
		}
		return e.moveKind(ctx, rec, rec.Phase, *g.RevokedBy, grants.RevokedNote(g), ops.KindGrantRevoked, nil)
	})
	return err
}

// grantFor finds a live grant that fits every bound of rec's plan, for a request that would await approval: nil
// when none does, when the request cannot be approved by a grant (critical risk, more than one approval, over
// budget, asked for approval, an operation that asks a typed confirmation) or when the grants cannot be read (the
// request then waits for votes as usual).
func (e *Engine) grantsFor(ctx context.Context, rec *ops.Record) []grants.Grant {
	req, p, appr := rec.Request, rec.Plan, rec.Approval
	if e.opts.Grants == nil || p == nil || appr.Required != 1 || appr.NoGrants || appr.OverBudget || req.RequiresApproval || p.Risk.Level >= ops.RiskCritical {
		return nil
	}
	if op, err := e.catalog.Lookup(req.Operation); err != nil || op.Spec().Confirm != nil {
		return nil
	}
	now := e.opts.Clock.Now()
	all, err := e.opts.Grants.Grants(ctx, now)
	if err != nil {
		e.report(req.ID, fmt.Errorf("read the grants (the request waits for votes): %w", err))
		return nil
	}
	// A grant is its giver's standing vote: the gate admits it only for what the giver could approve now, under
	// the rule the grant was given under, never on the giver's own request.
	var out []grants.Grant
	for _, g := range all {
		if !g.Live(now) || g.Misfit(req, p) != "" || g.GivenIn == req.ID {
			continue
		}
		if err := e.judge(ctx, rec, Decision{Path: ops.ByGrant, By: g.GivenBy, Grant: &g}); err != nil {
			continue
		}
		out = append(out, g)
	}
	return out
}

// grantNote is a dry run's word on the grant that would approve it, nil when none would.
func (e *Engine) grantNote(ctx context.Context, rec *ops.Record) *ops.GrantNote {
	gs := e.grantsFor(ctx, rec)
	if len(gs) == 0 {
		return nil
	}
	return &ops.GrantNote{Grant: gs[0].ID, GivenBy: gs[0].GivenBy, Left: gs[0].Left()}
}

// approveByGrant approves rec, planned and about to await approval, with the first grant that fits and still has
// a use: the grant passes the gate (which holds the budget; E_BUDGET_EXCEEDED rejects the request, as a quorum's
// vote would), then one use is counted (idempotent per request id) and the record moves to approved with the grant
// on it. A grant whose use is refused (its last use taken, revoked meanwhile) gives the hold back before the next
// is tried. ok false: no grant applied, nothing is held, and the request waits for votes.
func (e *Engine) approveByGrant(ctx context.Context, rec *ops.Record) (*ops.Record, bool, error) {
	for _, g := range e.grantsFor(ctx, rec) {
		d := Decision{Path: ops.ByGrant, By: g.GivenBy, Grant: &g}
		if err := e.admit(ctx, rec, d); err != nil {
			if ue := ops.AsError(err); ue.Code == ops.CodeBudgetExceeded {
				next, rerr := e.reject(ctx, rec, ue)
				return next, true, rerr
			}
			e.report(rec.ID(), fmt.Errorf("grant %s (the request waits for votes): %w", g.ID, gateRefusal(d, err)))
			continue
		}
		res, err := e.opts.Grants.UseGrant(ctx, g.ID, rec.ID(), e.opts.Clock.Now())
		if err != nil || !res.OK {
			// A lost answer may have counted the use: it errs towards fewer uses, never more.
			e.releaseBudget(ctx, rec, 0)
			if err != nil {
				e.report(rec.ID(), fmt.Errorf("use grant %s (the request waits for votes): %w", g.ID, err))
				break
			}
			continue
		}
		use := ops.GrantUse{Grant: g.ID, GivenBy: g.GivenBy, GivenIn: g.GivenIn, Use: res.Use, Uses: g.Uses, Thread: g.Thread}
		note := fmt.Sprintf("approved by grant %s, given by %s (%d of %d used)", g.ID, g.GivenBy.Display(), res.Use, g.Uses)
		next, err := e.move(ctx, rec, ops.PhaseApproved, systemActor, note, func(r *ops.Record) {
			r.Grant = &use
			approvedBy(d)(r)
		})
		if err != nil {
			// Still planned in the store, the use counted and the budget held: the sweep finds it planned and
			// plans it again, which finds the use counted (UseGrant is idempotent per request).
			return rec, true, stateError("record the grant's approval", err)
		}
		return next, true, nil
	}
	return rec, false, nil
}
