package handlers

import (
	"fmt"
	"sort"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// The plan message answers, in this order and above the buttons: what will happen where (one line), what it
// costs, how risky it is and why, who asked, who must approve and until when. The diff summary comes after the
// buttons; the manifest and the full diff are behind Details (a modal) or in a file.

// headline says in words what the request does where, e.g. "Train `llm-ft` on `ml-prod-eks/ml-platform` —
// 2 × 8 GPUs, up to 12 h".
func headline(rec *ops.Record) string {
	req := rec.Request
	p := req.Params
	name := code(p.String("name"))
	where := " on " + target(req.Target)
	switch req.Operation {
	case "submit-training-job":
		s := "Train " + name + where
		replicas, gpus := p.IntOr("replicas", 1), p.IntOr("gpus", 0)
		var facts []string
		if gpus > 0 {
			facts = append(facts, fmt.Sprintf("%s × %s", count(replicas), plural(gpus, "GPU", "GPUs")))
		} else {
			facts = append(facts, plural(replicas, "replica", "replicas")+", no GPUs")
		}
		if h := runHours(rec); h > 0 {
			facts = append(facts, "up to "+hours(h))
		} else if d, ok := p.Duration("max-hours"); ok {
			facts = append(facts, "up to "+duration(d))
		}
		return s + " — " + strings.Join(facts, ", ")
	case "stop-training-job":
		return "Stop the training job " + name + where + " (its volumes are kept)"
	case "deploy-inference":
		s := "Deploy the inference server " + name + where + " — " + plural(p.IntOr("replicas", 1), "replica", "replicas")
		if g := p.IntOr("gpus", 0); g > 0 {
			s += " × " + plural(g, "GPU", "GPUs")
		}
		return s
	case "scale-inference":
		return "Scale the inference server " + name + where + changeWords(rec, " to "+plural(p.IntOr("replicas", 0), "replica", "replicas"))
	case "rollout-inference":
		return "Roll the inference server " + name + where + " to " + code(p.String("image"))
	case "delete-inference":
		return "Delete the inference server " + name + where + " (its volumes are kept)"
	case "create-storage":
		return "Create the volume claim " + name + where + sizeWords(p.String("size"))
	case DeleteStorageOperation:
		return "Delete the volume claim " + name + where + " *and its data*"
	case "scale-capacity":
		return "Scale the node group " + code(p.String("group")) + " of " + code(req.Target.Cluster) + changeWords(rec, " to "+plural(p.IntOr("count", 0), "node", "nodes"))
	case "verify-cluster":
		return "Smoke-test " + target(req.Target) + " with a small Job"
	case "bootstrap-cluster":
		return "Create a HyperPod cluster on " + code(req.Target.Cluster) + " from the template " + code(p.String("template"))
	}
	s := sentence(phrase(req.Operation))
	if n := p.String("name"); n != "" {
		s += " " + name
	}
	return s + where
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func sizeWords(size string) string {
	if size == "" {
		return ""
	}
	return " — " + code(size)
}

// changeWords renders a plan's one field change as "from 2 to 4", or falls back to what was asked.
func changeWords(rec *ops.Record, asked string) string {
	if rec.Plan != nil && len(rec.Plan.Changes) == 1 && len(rec.Plan.Changes[0].Fields) == 1 {
		f := rec.Plan.Changes[0].Fields[0]
		if f.From != "" && f.To != "" {
			return " from " + escLine(f.From) + " to " + escLine(f.To)
		}
	}
	return asked
}

// runHours is how long a run may last, from its bounded cost (total = $/h × hours); 0 when unknown.
func runHours(rec *ops.Record) float64 {
	if rec.Plan == nil || rec.Plan.Cost.Total <= 0 || rec.Plan.Cost.HourlyDelta <= 0 {
		return 0
	}
	return rec.Plan.Cost.Total / rec.Plan.Cost.HourlyDelta
}

// costText is the figure that matters: a run's worst case when it has one, else $/h and $/month.
func costText(rec *ops.Record) string {
	c := rec.Plan.Cost
	switch {
	case !c.Known():
		return ":grey_question: price unknown for " + joinWords(escAll(c.Unknown))
	case c.Total > 0:
		s := "*up to " + money(c.Total) + "*"
		if h := runHours(rec); h > 0 {
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
