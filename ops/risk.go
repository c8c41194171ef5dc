package ops

import (
	"fmt"
	"strings"
)

// Level is a risk level; higher is riskier.
type Level int

// The risk levels.
const (
	RiskLow Level = iota
	RiskMedium
	RiskHigh
	RiskCritical
)

var levelNames = []string{"low", "medium", "high", "critical"}

func (l Level) String() string {
	if l < RiskLow || l > RiskCritical {
		return fmt.Sprintf("level(%d)", int(l))
	}
	return levelNames[l]
}

// ParseLevel parses "low", "medium", "high" or "critical".
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if strings.EqualFold(s, n) {
			return Level(i), nil
		}
	}
	return RiskLow, fmt.Errorf("unknown risk level %q (low, medium, high, critical)", s)
}

// Up returns the next level, capped at critical.
func (l Level) Up() Level { return min(l+1, RiskCritical) }

// MarshalText renders the level name.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses the level name.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	*l = v
	return err
}

// Reason is one cause of risk.
type Reason struct {
	Level Level  `json:"level"`
	Text  string `json:"text"`
}

// Risk is the maximum of its reasons, each shown.
type Risk struct {
	Level   Level    `json:"level"`
	Reasons []Reason `json:"reasons,omitempty"`
	// raises are reasons that raise the level one step above the rest (RaiseOneLevel); Assess applies them once
	// the shared rules have set the level they raise.
	raises []string
}

// RaiseOneLevel asks for the level to go one step above what every other reason sets (but production, which
// raises on top), for the reason given. An operation's Plan calls it; RiskPolicy.Assess applies it, so the step is
// taken from the level the cost and agent rules reach too.
func (r *Risk) RaiseOneLevel(format string, args ...any) {
	r.raises = append(r.raises, fmt.Sprintf(format, args...))
}

// applyRaises takes one step up for all the reasons RaiseOneLevel recorded, naming them.
func (r *Risk) applyRaises() {
	if len(r.raises) == 0 {
		return
	}
	raised := r.Level.Up()
	r.Reasons = append(r.Reasons, Reason{Level: raised, Text: fmt.Sprintf("%s: one level up from %s", strings.Join(r.raises, "; "), r.Level)})
	r.Level, r.raises = raised, nil
}

// Add records a reason and raises the level when it is higher.
func (r *Risk) Add(l Level, format string, args ...any) {
	r.Reasons = append(r.Reasons, Reason{Level: l, Text: fmt.Sprintf(format, args...)})
	if l > r.Level {
		r.Level = l
	}
}

// RiskPolicy holds the engine-wide risk settings from config.
type RiskPolicy struct {
	// MediumHourly and HighHourly are $/h thresholds of the cost delta.
	MediumHourly float64
	HighHourly   float64
	// Production reports whether a namespace of a cluster counts as production; the empty namespace asks about the
	// cluster as a whole.
	Production func(cluster, namespace string) bool
}

// Assess completes a plan's risk with the rules every operation shares: cost thresholds, unknown prices,
// agent-initiated mutations, the operation's own raises (RaiseOneLevel), and production raising one level: a change
// in a production namespace, or to a production cluster as a whole (spec.ClusterWide, whatever namespace the target
// was filled in with). Operation-specific reasons (destructive, data deletion, bootstrap) are added by the
// operation's Plan before this runs.
func (p RiskPolicy) Assess(req Request, spec Spec, plan *Plan) {
	r := &plan.Risk
	if spec.Baseline > RiskLow {
		r.Add(spec.Baseline, "%s is %s risk by nature", spec.Name, spec.Baseline)
	}
	c := plan.Cost
	switch {
	case len(c.Unknown) > 0:
		r.Add(RiskHigh, "price unknown for %s: treated as expensive", strings.Join(c.Unknown, ", "))
	case p.HighHourly > 0 && c.HourlyDelta >= p.HighHourly:
		r.Add(RiskHigh, "adds $%.2f/h (high threshold $%.0f/h)", c.HourlyDelta, p.HighHourly)
	case p.MediumHourly > 0 && c.HourlyDelta >= p.MediumHourly:
		r.Add(RiskMedium, "adds $%.2f/h (medium threshold $%.0f/h)", c.HourlyDelta, p.MediumHourly)
	}
	if req.Initiator.Kind == Agent && spec.Mutates && r.Level < RiskMedium {
		r.Add(RiskMedium, "mutation requested by agent %s", req.Initiator.Name)
	}
	r.applyRaises()
	if where, ok := p.production(req.Target, spec); ok && spec.Mutates {
		raised := r.Level.Up()
		// The raised reason names what it raised, so the one reason a plan message shows says why in full.
		text := fmt.Sprintf("%s: one level up from %s", where, r.Level)
		for _, x := range r.Reasons {
			if x.Level == r.Level {
				text = fmt.Sprintf("%s, on %s: one level up from %s", x.Text, where, r.Level)
				break
			}
		}
		r.Reasons = append(r.Reasons, Reason{Level: raised, Text: text})
		r.Level = raised
	}
}

// production reports whether the change is in production, and names where: the production cluster, or the
// production namespace when the cluster as a whole is not.
func (p RiskPolicy) production(t Target, spec Spec) (string, bool) {
	if p.Production == nil {
		return "", false
	}
	if p.Production(t.Cluster, "") && (spec.ClusterWide || t.Namespace == "" || p.Production(t.Cluster, t.Namespace)) {
		return "production cluster " + t.Cluster, true
	}
	if !spec.ClusterWide && t.Namespace != "" && p.Production(t.Cluster, t.Namespace) {
		return fmt.Sprintf("production namespace %s of cluster %s", t.Namespace, t.Cluster), true
	}
	return "", false
}
