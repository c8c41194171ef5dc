package grants

import (
	"fmt"
	"math"
	"path"

	"github.com/hyperops/hyperops/ops"
)

// Spec is what a lead fills in to allow requests similar to the one they approve (the operation, cluster and
// requester are that request's).
type Spec struct {
	// Target is the pattern on Subject, e.g. ng-*.
	Target    string
	MaxSize   int
	MaxHourly float64
	MaxTotal  float64
	Uses      int
	// Hours is how long it lasts, at most MaxDuration.
	Hours float64
	// Thread is the surface's notes on where the request is discussed: each use is told there.
	Thread map[string]string
}

// Validate checks spec against the request rec it is given on, every field at once: each problem names its
// field (target, maxSize, maxHourly, maxTotal, uses, hours), the rule and the next step. Nil: it is valid.
func Validate(spec Spec, rec *ops.Record) []*ops.Error {
	_, sized := Size(rec.Plan)
	return ValidateOn(spec, Subject(rec.Request), sized)
}

// ValidateOn is Validate for a request whose target is subject (Subject) and whose change has a size
// or not (Size): a surface checks a form with it without reading the request again.
func ValidateOn(spec Spec, subject string, sized bool) []*ops.Error {
	var out []*ops.Error
	bad := func(field, next, format string, args ...any) {
		out = append(out, ops.Errorf(ops.CodeInvalidArgument, field, next, format, args...))
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
	if spec.Uses < 1 || spec.Uses > MaxUses {
		bad("uses", fmt.Sprintf("give a count from 1 to %d", MaxUses), "the count must be 1 to %d, not %d", MaxUses, spec.Uses)
	}
	maxH := MaxDuration.Hours()
	if !(spec.Hours > 0) || spec.Hours > maxH || math.IsInf(spec.Hours, 0) {
		bad("hours", fmt.Sprintf("give at most %g hours; give another grant when it ends", maxH),
			"a grant lasts more than 0 and at most %g hours, not %g", maxH, spec.Hours)
	}
	return out
}

// grantRevokedFormat is the history note of a grant's revocation (KindGrantRevoked).
const grantRevokedFormat = "grant %s revoked after %d of %d uses"

// RevokedNote is the history note of a grant's revocation (KindGrantRevoked).
func RevokedNote(g Grant) string { return fmt.Sprintf(grantRevokedFormat, g.ID, g.Used, g.Uses) }

// ParseRevoked reads back what RevokedNote wrote.
func ParseRevoked(note string) (id string, used, uses int, ok bool) {
	n, err := fmt.Sscanf(note, grantRevokedFormat, &id, &used, &uses)
	return id, used, uses, err == nil && n == 3
}
