package ops

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"time"
)

// GrantSpec is what a lead fills in to allow requests similar to the one they approve (the operation, cluster and
// requester are that request's).
type GrantSpec struct {
	// Target is the pattern on GrantSubject, e.g. ng-*.
	Target    string
	MaxSize   int
	MaxHourly float64
	MaxTotal  float64
	Uses      int
	// Hours is how long it lasts, at most MaxGrantDuration.
	Hours float64
	// Thread is the surface's notes on where the request is discussed: each use is told there.
	Thread map[string]string
}

// ValidateGrant checks spec against the request rec it is given on, every field at once: each problem names its
// field (target, maxSize, maxHourly, maxTotal, uses, hours), the rule and the next step. Nil: it is valid.
func ValidateGrant(spec GrantSpec, rec *Record) []*Error {
	_, sized := GrantSize(rec.Plan)
	return ValidateGrantOn(spec, GrantSubject(rec.Request), sized)
}

// ValidateGrantOn is ValidateGrant for a request whose target is subject (GrantSubject) and whose change has a size
// or not (GrantSize): a surface checks a form with it without reading the request again.
func ValidateGrantOn(spec GrantSpec, subject string, sized bool) []*Error {
	var out []*Error
	bad := func(field, next, format string, args ...any) {
		out = append(out, Errorf(CodeInvalidArgument, field, next, format, args...))
	}
	if spec.Target == "" {
		bad("target", "give a pattern such as "+subject+" or a prefix with *", "the target pattern is required")
	} else if _, err := path.Match(spec.Target, ""); err != nil {
		bad("target", "use * and ? as wildcards, and close every [", "the target pattern %q is malformed", spec.Target)
	} else if !matchTarget(spec.Target, subject) {
		bad("target", "use a pattern that matches "+subject+", e.g. "+subject, "the target pattern %q does not match this request's target %s", spec.Target, subject)
	}
	if sized {
		if spec.MaxSize < 1 {
			bad("maxSize", "give the largest change a request may make, e.g. 2 (nodes or replicas added or removed, or objects changed)",
				"the size cap must be at least 1: every request this grant approves is held to a size")
		}
	} else if spec.MaxSize < 0 {
		bad("maxSize", "leave it empty", "the size cap cannot be negative")
	}
	if spec.MaxHourly < 0 || math.IsNaN(spec.MaxHourly) || math.IsInf(spec.MaxHourly, 0) {
		bad("maxHourly", "give 0 or more dollars per hour", "the $/h cap must be a number of 0 or more")
	}
	if spec.MaxTotal < 0 || math.IsNaN(spec.MaxTotal) || math.IsInf(spec.MaxTotal, 0) {
		bad("maxTotal", "give 0 (no cap) or more dollars", "the total cap must be a number of 0 or more")
	}
	if spec.Uses < 1 || spec.Uses > MaxGrantUses {
		bad("uses", fmt.Sprintf("give a count from 1 to %d", MaxGrantUses), "the count must be 1 to %d, not %d", MaxGrantUses, spec.Uses)
	}
	maxH := MaxGrantDuration.Hours()
	if !(spec.Hours > 0) || spec.Hours > maxH || math.IsInf(spec.Hours, 0) {
		bad("hours", fmt.Sprintf("give at most %g hours; give another grant when it ends", maxH),
			"a grant lasts more than 0 and at most %g hours, not %g", maxH, spec.Hours)
	}
	return out
}

// Grantable reports whether a grant may be given on r, as far as the record tells: it awaits one approval, its
// risk is not critical, it is not over a budget and its requester did not ask for an approval.
func (r *Record) Grantable() bool {
	return r.Phase == PhaseAwaitingApproval && r.Approval.Required == 1 && GrantRefusal(r) == nil && !r.Request.RequiresApproval
}

// MayGrant reports whether who may approve rec and give a grant on it, as ApproveAndGrant will check it before the
// form: a surface asks it before opening the form, so nobody fills it in for nothing.
func (e *Engine) MayGrant(ctx context.Context, rec *Record, who Initiator) error {
	if e.opts.Grants == nil {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant", "grants are not available here")
	}
	if who.Kind != Human {
		return Errorf(CodeNotAuthorized, "", "ask a lead", "only a lead gives a grant, never %s", who.Display())
	}
	if rec.Phase != PhaseAwaitingApproval {
		return Errorf(CodeInvalidPhase, "", "see "+Ask("request show id="+rec.ID()), "request %s is %s, not awaiting approval", rec.ID(), rec.Phase)
	}
	if e.policy != nil {
		if err := e.policy.CheckVoter(ctx, rec, who); err != nil {
			return err
		}
	}
	if ge := GrantRefusal(rec); ge != nil {
		return ge
	}
	return nil
}

// GrantRefusal says why rec accepts no grant at all, or is nil when it does: when one approval stands for it (a
// grant is one lead's approval) and its risk is not critical.
func GrantRefusal(rec *Record) *Error {
	if rec.Approval.NoGrants {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant",
			"request %s is under an approval rule that forbids standing grants (%s: grants: false)", rec.ID(), rec.Approval.Rule)
	}
	if rec.Approval.Required > 1 {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant",
			"request %s needs %d approvals: a grant stands for one lead's, so it can only be given on requests that need one",
			rec.ID(), rec.Approval.Required)
	}
	if rec.Plan != nil && rec.Plan.Risk.Level >= RiskCritical {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant", "request %s is critical risk: grants never approve critical-risk requests", rec.ID())
	}
	if rec.Approval.OverBudget {
		return Errorf(CodeNotAuthorized, "", "approve it without a grant", "request %s is over budget: grants never approve past a budget", rec.ID())
	}
	return nil
}

// ApproveAndGrant approves request id for who, as Approve does (same checks, the plan with hash planHash), and gives
// a grant from it: later requests of the same operation, cluster and requester inside spec's bounds are approved
// without a vote (grant id GrantID(id), so two submits give one grant). Nothing is given when the approval is
// refused. The grant is created after the approval: should that fail, the request stays approved and the same call
// again gives the grant.
func (e *Engine) ApproveAndGrant(ctx context.Context, id string, who Initiator, planHash string, spec GrantSpec) (*Record, *Grant, error) {
	if e.opts.Grants == nil {
		return nil, nil, Errorf(CodeNotAuthorized, "", "approve it without a grant", "grants are not available here")
	}
	if who.Kind != Human {
		return nil, nil, Errorf(CodeNotAuthorized, "", "ask a lead", "only a lead gives a grant, never %s", who.Display())
	}
	rec, err := e.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	retry := rec.Phase != PhaseAwaitingApproval && hasApproved(rec, who.ID)
	if !retry {
		if rec.Phase == PhaseAwaitingApproval {
			if err := e.checkVoter(ctx, rec, who); err != nil {
				return rec, nil, err
			}
			if ge := GrantRefusal(rec); ge != nil {
				return rec, nil, ge
			}
			if errs := ValidateGrant(spec, rec); len(errs) > 0 {
				return rec, nil, errs[0]
			}
		}
		if rec, err = e.Approve(ctx, id, who, planHash); err != nil {
			return rec, nil, err
		}
		if !hasApproved(rec, who.ID) {
			return rec, nil, Errorf(CodeInvalidPhase, "", "see "+Ask("request show id="+id),
				"request %s was decided without your approval: no grant was given", id)
		}
	} else if err := e.checkVoter(ctx, rec, who); err != nil {
		return rec, nil, err // approved by a vote of who's, who may no longer approve such requests
	} else if ge := GrantRefusal(rec); ge != nil {
		return rec, nil, ge // approved by a vote of who's, but no grant may be given on it
	} else if errs := ValidateGrant(spec, rec); len(errs) > 0 {
		return rec, nil, errs[0]
	}
	now := e.opts.Clock.Now()
	g := Grant{ID: GrantID(id), Operation: rec.Request.Operation, Cluster: rec.Request.Target.Cluster, Target: spec.Target,
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
func (e *Engine) checkVoter(ctx context.Context, rec *Record, who Initiator) error {
	if e.policy == nil {
		return nil
	}
	return e.policy.CheckVoter(ctx, rec, who)
}

// hasApproved reports whether voter approved rec's current plan.
func hasApproved(rec *Record, voter string) bool {
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
func (e *Engine) VisibleGrants(ctx context.Context, viewer Initiator) ([]Grant, error) {
	if e.opts.Grants == nil {
		return nil, nil
	}
	now := e.opts.Clock.Now()
	all, err := e.opts.Grants.Grants(ctx, now)
	if err != nil {
		return nil, stateError("list the grants", err)
	}
	var out []Grant
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
func (e *Engine) mayRevoke(ctx context.Context, g Grant, who Initiator) error {
	if who.Kind != Human {
		return Errorf(CodeNotAuthorized, "", "ask a lead", "only a person revokes a grant, never %s", who.Display())
	}
	if g.GivenBy.ID == who.ID {
		return nil
	}
	refuse := Errorf(CodeNotAuthorized, "", fmt.Sprintf("ask %s or a lead of %s", g.GivenBy.Display(), g.Approvers),
		"only %s, who gave grant %s, or a lead who may approve requests like %s may revoke it", g.GivenBy.Display(), g.ID, g.GivenIn)
	if g.Requester.ID != who.ID { // who may not see it learns nothing, not even that it exists (RevokeGrant's not-found)
		refuse = Errorf(CodeNotFound, "id", "check the id with "+Ask("grants"), "no grant %s (it may have expired)", Echo(g.ID))
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
func (e *Engine) RevokeGrant(ctx context.Context, id string, who Initiator) (g Grant, revoked bool, err error) {
	if e.opts.Grants == nil {
		return Grant{}, false, Errorf(CodeNotFound, "id", "check the id with "+Ask("grants"), "grants are not available here")
	}
	g, err = e.opts.Grants.Grant(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Grant{}, false, Errorf(CodeNotFound, "id", "check the id with "+Ask("grants"), "no grant %s (it may have expired)", Echo(id))
	}
	if err != nil {
		return Grant{}, false, stateError("read the grant", err)
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

// grantRevokedFormat is the history note of a grant's revocation (KindGrantRevoked).
const grantRevokedFormat = "grant %s revoked after %d of %d uses"

// GrantRevokedNote is the history note of a grant's revocation (KindGrantRevoked).
func GrantRevokedNote(g Grant) string { return fmt.Sprintf(grantRevokedFormat, g.ID, g.Used, g.Uses) }

// ParseGrantRevoked reads back what GrantRevokedNote wrote.
func ParseGrantRevoked(note string) (id string, used, uses int, ok bool) {
	n, err := fmt.Sscanf(note, grantRevokedFormat, &id, &used, &uses)
	return id, used, uses, err == nil && n == 3
}

// recordRevocation adds the revocation of g to the history of the request it was given on, once.
func (e *Engine) recordRevocation(ctx context.Context, g Grant) error {
	if g.RevokedBy == nil || g.GivenIn == "" {
		return nil
	}
	_, err := e.withRecord(ctx, g.GivenIn, func(rec *Record) (*Record, error) {
		for _, t := range rec.History {
			if id, _, _, ok := ParseGrantRevoked(t.Note); ok && t.Kind == KindGrantRevoked && id == g.ID {
				return rec, nil
			}
		}
		return e.moveKind(ctx, rec, rec.Phase, *g.RevokedBy, GrantRevokedNote(g), KindGrantRevoked, nil)
	})
	return err
}

// grantFor finds a live grant that fits every bound of rec's plan, for a request that would await approval: nil
// when none does, when the request cannot be approved by a grant (critical risk, more than one approval, over
// budget, asked for approval, an operation that asks a typed confirmation) or when the grants cannot be read (the
// request then waits for votes as usual).
func (e *Engine) grantsFor(ctx context.Context, rec *Record) []Grant {
	req, p, appr := rec.Request, rec.Plan, rec.Approval
	if e.opts.Grants == nil || p == nil || appr.Required != 1 || appr.NoGrants || appr.OverBudget || req.RequiresApproval || p.Risk.Level >= RiskCritical {
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
	var out []Grant
	for _, g := range all {
		if !g.Live(now) || g.Misfit(req, p) != "" || g.GivenIn == req.ID {
			continue
		}
		if err := e.judge(ctx, rec, Decision{Path: ByGrant, By: g.GivenBy, Grant: &g}); err != nil {
			continue
		}
		out = append(out, g)
	}
	return out
}

// grantNote is a dry run's word on the grant that would approve it, nil when none would.
func (e *Engine) grantNote(ctx context.Context, rec *Record) *GrantNote {
	gs := e.grantsFor(ctx, rec)
	if len(gs) == 0 {
		return nil
	}
	return &GrantNote{Grant: gs[0].ID, GivenBy: gs[0].GivenBy, Left: gs[0].Left()}
}

// approveByGrant approves rec, planned and about to await approval, with the first grant that fits and still has
// a use: the grant passes the gate (which holds the budget; E_BUDGET_EXCEEDED rejects the request, as a quorum's
// vote would), then one use is counted (idempotent per request id) and the record moves to approved with the grant
// on it. A grant whose use is refused (its last use taken, revoked meanwhile) gives the hold back before the next
// is tried. ok false: no grant applied, nothing is held, and the request waits for votes.
func (e *Engine) approveByGrant(ctx context.Context, rec *Record) (*Record, bool, error) {
	for _, g := range e.grantsFor(ctx, rec) {
		d := Decision{Path: ByGrant, By: g.GivenBy, Grant: &g}
		if err := e.admit(ctx, rec, d); err != nil {
			if ue := AsError(err); ue.Code == CodeBudgetExceeded {
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
		use := GrantUse{Grant: g.ID, GivenBy: g.GivenBy, GivenIn: g.GivenIn, Use: res.Use, Uses: g.Uses, Thread: g.Thread}
		note := fmt.Sprintf("approved by grant %s, given by %s (%d of %d used)", g.ID, g.GivenBy.Display(), res.Use, g.Uses)
		next, err := e.move(ctx, rec, PhaseApproved, systemActor, note, func(r *Record) {
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
