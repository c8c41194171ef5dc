package handlers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// The plan message answers, in this order and above the buttons: what will happen where (one line), what it
// costs, how risky it is and why, who asked, who must approve and until when. The diff summary comes after the
// buttons; the manifest and the full diff are behind Details (a modal) or in a file.

// headline says in words what the request does where, e.g. "Train `llm-ft` on `ml-prod-eks/ml-platform` —
// 2 × 8 GPUs, up to 12 h": the operation's own template (ops.Spec.Headline) said in mrkdwn.
func headline(rec *ops.Record, op ops.Spec) string { return op.SayHeadline(rec, mrkdwnWords{}) }

// mrkdwnWords says the parts of an operation's lines in Slack's mrkdwn: outside values as code spans, outside text
// escaped, the operation's own emphasis in bold.
type mrkdwnWords struct{}

func (mrkdwnWords) Value(s string) string                   { return code(s) }
func (mrkdwnWords) Text(s string) string                    { return escLine(s) }
func (mrkdwnWords) Target(t ops.Target) string              { return target(t) }
func (mrkdwnWords) Strong(s string) string                  { return "*" + s + "*" }
func (mrkdwnWords) Count(n int64) string                    { return count(n) }
func (mrkdwnWords) Plural(n int64, one, many string) string { return plural(n, one, many) }
func (mrkdwnWords) Duration(d time.Duration) string         { return duration(d) }

// Specs finds an operation's spec by name; the catalog is one.
type Specs interface {
	Spec(name string) (ops.Spec, bool)
}

// specOf is the spec of rec's operation; one the catalog does not know (any more) is said by its name alone.
func specOf(specs Specs, rec *ops.Record) ops.Spec {
	if specs != nil {
		if s, ok := specs.Spec(rec.Request.Operation); ok {
			return s
		}
	}
	return ops.Spec{Name: rec.Request.Operation}
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// costText is the figure that matters: a run's worst case when it has one, else $/h and $/month; and, for GPUs
// whose pods may land on several instance types, which one it is priced at.
func costText(rec *ops.Record) string {
	c := rec.Plan.Cost
	s := costFigure(c)
	if c.PricedAt != "" && c.Known() {
		s += "\n_" + escLine(c.PricedAt) + "_"
	}
	return s
}

func costFigure(c ops.Cost) string {
	switch {
	case !c.Known():
		return ":grey_question: price unknown for " + joinWords(escAll(c.Unknown))
	case c.Total > 0:
		s := "*up to " + money(c.Total) + "*"
		if h := c.RunHours(); h > 0 {
			s += " if it runs its full " + hours(h)
		}
		return s + "\n" + money(c.HourlyDelta) + "/h while it runs"
	case c.HourlyDelta == 0:
		return "no change in cost"
	case c.HourlyDelta < 0:
		return "*saves " + money(c.MonthlyDelta) + "/month*\n" + signedMoney(c.HourlyDelta) + "/h"
	}
	return "*" + signedMoney(c.HourlyDelta) + "/h*\n" + signedMoney(c.MonthlyDelta) + "/month"
}

func escAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = code(s)
	}
	return out
}

var riskEmoji = map[ops.Level]string{ops.RiskLow: ":large_green_circle:", ops.RiskMedium: ":large_yellow_circle:",
	ops.RiskHigh: ":large_orange_circle:", ops.RiskCritical: ":red_circle:"}

// deciding is the reason that set a risk's level: the first one at that level.
func deciding(r ops.Risk) (ops.Reason, bool) {
	for _, x := range r.Reasons {
		if x.Level == r.Level {
			return x, true
		}
	}
	return ops.Reason{}, false
}

// riskField is the level with its colour and the one reason that set it; the others are in Details.
func riskField(r ops.Risk) string {
	s := riskEmoji[r.Level] + " *" + r.Level.String() + "*"
	if x, ok := deciding(r); ok {
		s += ": " + escLine(x.Text)
	}
	if n := len(r.Reasons) - 1; n > 0 {
		s += "\n_and " + plural(int64(n), "other reason", "other reasons") + " in Details_"
	}
	return s
}

// person renders who someone is for people: a mention, or "agent <name>" for agents.
func person(i ops.Initiator) string {
	switch i.Kind {
	case ops.Agent:
		name := i.Name
		if name == "" {
			name = i.ID
		}
		return "agent " + code(name)
	case ops.System:
		return "HyperOps"
	}
	return mention(i.ID)
}

func askedByField(rec *ops.Record) string {
	s := person(rec.Request.Initiator)
	if rec.Owner.ID != "" && rec.Owner.ID != rec.Request.Initiator.ID {
		s += "\nnow owned by " + person(rec.Owner)
	}
	return s
}

// approverMentions names who may approve: the group's user groups and users as mentions, else the group's name.
func approverMentions(a ops.Approval) string {
	var who []string
	for _, g := range a.ApproverUserGroups {
		who = append(who, groupMention(g))
	}
	for _, u := range a.ApproverUsers {
		who = append(who, mention(u))
	}
	if len(who) == 0 && a.Approvers != "" {
		return code(a.Approvers)
	}
	if len(who) > 4 {
		who = append(who[:4], plural(int64(len(who)-4), "other", "others"))
	}
	return joinWords(who)
}

func needsField(rec *ops.Record) string {
	a := rec.Approval
	s := plural(int64(a.Required), "approval", "approvals")
	if m := approverMentions(a); m != "" {
		s += " from " + strings.Replace(m, " and ", " or ", 1)
	}
	var given []string
	for _, v := range a.Votes {
		if v.Approve && v.PlanHash == a.PlanHash {
			given = append(given, mention(v.Voter.ID))
		}
	}
	if len(given) > 0 {
		s += fmt.Sprintf("\n:white_check_mark: %d given: %s", len(given), joinWords(given))
	}
	if a.BreakGlass != "" && rec.Request.Initiator.Kind == ops.Human {
		s += fmt.Sprintf("\n:hammer: or %s, on call (%s), may break glass", person(rec.Request.Initiator), code(a.BreakGlass))
	}
	return s
}

func planFields(rec *ops.Record) *slack.SectionBlock {
	fields := []string{"*Cost*\n" + costText(rec), "*Risk*\n" + riskField(rec.Plan.Risk), "*Asked by*\n" + askedByField(rec)}
	a := rec.Approval
	if a.Required > 0 && rec.Phase == ops.PhaseAwaitingApproval {
		fields = append(fields, "*Needs*\n"+needsField(rec))
		if !a.ExpiresAt.IsZero() {
			fields = append(fields, "*Expires*\n"+slackTime(a.ExpiresAt))
		}
	}
	return fieldsSection(fields...)
}

// diffSummary counts the changes by action and kind ("1 Job to create") and lists field changes of updates.
func diffSummary(changes []ops.Change) string {
	type key struct {
		action ops.Action
		kind   string
	}
	n := map[key]int{}
	var order []key
	var fields []string
	for _, c := range changes {
		k := key{c.Action, c.Kind}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
		for _, f := range c.Fields {
			if len(fields) < 6 {
				fields = append(fields, fmt.Sprintf("• %s %s: %s → %s", escLine(c.Kind), code(c.Name), fieldValue(f.From), fieldValue(f.To)))
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return actionRank(order[i].action) < actionRank(order[j].action) })
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s %s", n[k], escLine(kindNoun(k.kind, n[k])), actionWords[k.action]))
	}
	if len(parts) == 0 {
		return ""
	}
	s := "*Changes* " + strings.Join(parts, ", ")
	if len(fields) > 0 {
		s += "\n" + strings.Join(fields, "\n")
	}
	return s
}

// driftSummary lists the fields changed outside HyperOps since it applied them, applied value → live value.
func driftSummary(drift []ops.Change) string {
	var lines []string
	n := 0
	for _, c := range drift {
		for _, f := range c.Fields {
			n++
			if len(lines) < 4 {
				lines = append(lines, fmt.Sprintf("• %s %s %s: %s → live %s", escLine(c.Kind), code(c.Name), code(f.Path), fieldValue(f.From), fieldValue(f.To)))
			}
		}
	}
	if n == 0 {
		return ""
	}
	s := ":rotating_light: *Drift* " + plural(int64(n), "field was", "fields were") + " changed outside HyperOps since it applied them; " +
		"this plan applies HyperOps's values, never the live ones\n" + strings.Join(lines, "\n")
	if n > len(lines) {
		s += fmt.Sprintf("\n_and %d more in Details_", n-len(lines))
	}
	return s
}

// runsAsLine names the identity the workload runs as, below the diff summary.
func runsAsLine(runsAs string) string {
	if runsAs == "" {
		return ""
	}
	return "*Runs as* " + escLine(runsAs)
}

// reservationLines says which reservation (training plan) the work runs on and when it ends, one line each:
// "*Reservation* `gpu` runs on training plan `tp-gpu`, which ends <date> (in 3 h 20 min)".
func reservationLines(rs []ops.CapacityReservation) string {
	lines := make([]string, 0, len(rs))
	for _, r := range rs {
		head := "*Reservation* " + code(r.Group) + " runs on training plan " + code(r.Plan)
		switch {
		case !r.Known():
			lines = append(lines, head+": end unknown ("+escLine(clip(r.Unknown, 300))+")")
		case r.Left <= 0:
			lines = append(lines, head+", which ended "+slackTime(r.EndTime)+" ("+duration(r.Left)+" ago)")
		default:
			lines = append(lines, head+", which ends "+slackTime(r.EndTime)+" (in "+duration(r.Left)+")")
		}
	}
	return strings.Join(lines, "\n")
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n")
}

var actionWords = map[ops.Action]string{ops.ActionCreate: "to create", ops.ActionUpdate: "to update", ops.ActionDelete: "to delete",
	ops.ActionNoop: "unchanged"}

func actionRank(a ops.Action) int {
	switch a {
	case ops.ActionDelete:
		return 0
	case ops.ActionCreate:
		return 1
	case ops.ActionUpdate:
		return 2
	}
	return 3
}

func kindNoun(kind string, n int) string {
	if n == 1 || strings.HasSuffix(kind, "s") {
		return kind
	}
	return kind + "s"
}

func fieldValue(s string) string {
	if s == "" {
		return "nothing"
	}
	return code(s)
}

// fullDiff is every change with every field, for Details and files.
func fullDiff(changes []ops.Change) string {
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "%s %s %s\n", c.Action, c.Kind, c.Name)
		for _, f := range c.Fields {
			fmt.Fprintf(&b, "    %s: %s → %s\n", f.Path, orEmpty(f.From), orEmpty(f.To))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// driftText is every drifted field, for Details and files: applied → live.
func driftText(drift []ops.Change) string {
	var b strings.Builder
	for _, c := range drift {
		fmt.Fprintf(&b, "%s %s (applied → live)\n", c.Kind, c.Name)
		for _, f := range c.Fields {
			fmt.Fprintf(&b, "    %s: %s → %s\n", f.Path, orEmpty(f.From), orEmpty(f.To))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func orEmpty(s string) string {
	if s == "" {
		return "∅"
	}
	return s
}
