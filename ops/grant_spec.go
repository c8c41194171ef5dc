package ops

import (
	"fmt"
	"math"
	"path"
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

// grantRevokedFormat is the history note of a grant's revocation (KindGrantRevoked).
const grantRevokedFormat = "grant %s revoked after %d of %d uses"

// GrantRevokedNote is the history note of a grant's revocation (KindGrantRevoked).
func GrantRevokedNote(g Grant) string { return fmt.Sprintf(grantRevokedFormat, g.ID, g.Used, g.Uses) }

// ParseGrantRevoked reads back what GrantRevokedNote wrote.
func ParseGrantRevoked(note string) (id string, used, uses int, ok bool) {
	n, err := fmt.Sscanf(note, grantRevokedFormat, &id, &used, &uses)
	return id, used, uses, err == nil && n == 3
}
