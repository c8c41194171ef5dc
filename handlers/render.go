package handlers

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// The action IDs of the request buttons. A button's value carries only the request id.
const (
	ActionApprove  = "hp_approve"
	ActionDeny     = "hp_deny"
	ActionCancel   = "hp_cancel"
	ActionStop     = "hp_stop"
	ActionTakeOver = "hp_takeover"
	ActionResume   = "hp_resume"
)

// Slack's limits the rendering stays inside (a section's text, a message's blocks).
const (
	maxSectionText = 3000
	// inlineLimit is how much long text is shown inline before it goes to a file instead.
	inlineLimit = 2500
	maxBlocks   = 50
)

// Rendered is a message plus the long texts that go with it as file uploads.
type Rendered struct {
	Msg   Msg
	Files []File
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}
func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

func section(s string) *slack.SectionBlock {
	return slack.NewSectionBlock(mrkdwn(clip(s, maxSectionText)), nil, nil)
}

func fieldsSection(fields ...string) *slack.SectionBlock {
	objs := make([]*slack.TextBlockObject, 0, len(fields))
	for _, f := range fields {
		objs = append(objs, mrkdwn(clip(f, 2000)))
	}
	return slack.NewSectionBlock(nil, objs, nil)
}

func contextBlock(s string) *slack.ContextBlock {
	return slack.NewContextBlock("", mrkdwn(clip(s, maxSectionText)))
}

// clip shortens s to n characters, saying so; callers send anything longer than inlineLimit as a file first.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-2]) + " …"
}

var phaseEmoji = map[ops.Phase]string{
	ops.PhaseReceived: ":inbox_tray:", ops.PhaseRejected: ":no_entry:", ops.PhasePlanned: ":memo:", ops.PhaseDone: ":white_check_mark:",
	ops.PhaseAwaitingApproval: ":hourglass_flowing_sand:", ops.PhaseDenied: ":no_entry_sign:", ops.PhaseExpired: ":alarm_clock:",
	ops.PhaseCancelled: ":heavy_multiplication_x:", ops.PhaseApproved: ":thumbsup:", ops.PhaseExecuting: ":gear:",
	ops.PhaseSucceeded: ":white_check_mark:", ops.PhaseFailed: ":x:", ops.PhaseInterrupted: ":warning:",
}

func phaseLabel(p ops.Phase) string { return phaseEmoji[p] + " " + string(p) }

func who(i ops.Initiator) string {
	switch i.Kind {
	case ops.Agent:
		name := i.Name
		if name == "" {
			name = i.ID
		}
		if strings.HasPrefix(i.ID, "agent:") {
			return fmt.Sprintf("agent *%s*", name) // an MCP-only agent has no Slack user to mention
		}
		return fmt.Sprintf("agent *%s* (<@%s>)", name, i.ID)
	case ops.System:
		return "HyperOps"
	}
	return fmt.Sprintf("<@%s> (person)", i.ID)
}

func target(t ops.Target) string {
	if t.Namespace == "" {
		return "`" + t.Cluster + "`"
	}
	return "`" + t.Cluster + "/" + t.Namespace + "`"
}

func slackTime(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// PlanMessage renders a request's message: what, where, who, the diff, Δ cost, risk with reasons, approvals needed
// and given, expiry, the request id and the short plan hash, and the buttons that are actionable in its phase.
func PlanMessage(rec *ops.Record) Rendered {
	req := rec.Request
	title := fmt.Sprintf("%s *%s* on %s", phaseLabel(rec.Phase), req.Operation, target(req.Target))
	if req.DryRun {
		title += " _(dry run)_"
	}
	blocks := []slack.Block{section(title), contextBlock(askedBy(rec))}
	var files []File
	if p := rec.Plan; p != nil {
		pb, pf := planBlocks(rec, p)
		blocks = append(blocks, pb...)
		files = append(files, pf...)
	}
	if rec.Approval.Required > 0 {
		blocks = append(blocks, section(approvalText(rec)))
	}
	if r := rec.Result; r != nil {
		rb, rf := resultBlocks(rec.ID(), r)
		blocks = append(blocks, rb...)
		files = append(files, rf...)
	}
	if len(rec.Errors) > 0 {
		blocks = append(blocks, section(errorsText(rec.Errors)))
	}
	if acts := actions(rec); acts != nil {
		blocks = append(blocks, acts)
	}
	blocks = append(blocks, contextBlock(footer(rec)))
	text := fmt.Sprintf("%s %s on %s — %s (request %s)", phaseEmoji[rec.Phase], req.Operation, plainTarget(req.Target), rec.Phase, rec.ID())
	return Rendered{Msg: Msg{Text: text, Blocks: capBlocks(blocks), Version: rec.Version}, Files: files}
}

func plainTarget(t ops.Target) string {
	if t.Namespace == "" {
		return t.Cluster
	}
	return t.Cluster + "/" + t.Namespace
}

func askedBy(rec *ops.Record) string {
	s := "asked by " + who(rec.Request.Initiator)
	if rec.Owner.ID != "" && rec.Owner.ID != rec.Request.Initiator.ID {
		s += " · owner now " + who(rec.Owner)
	}
	if rec.Request.Origin != "" {
		s += " · via " + rec.Request.Origin
	}
	return s
}

func planBlocks(rec *ops.Record, p *ops.Plan) ([]slack.Block, []File) {
	var blocks []slack.Block
	var files []File
	if p.Summary != "" {
		blocks = append(blocks, section(p.Summary))
	}
	diff := diffText(p.Changes)
	if len([]rune(diff)) > inlineLimit {
		files = append(files, File{Name: rec.ID() + "-diff.txt", Title: "Diff of " + rec.ID(), Content: diff})
		diff = fmt.Sprintf("%d changes: too long to show here, attached as a file", len(p.Changes))
	}
	if diff != "" {
		blocks = append(blocks, section("*Diff*\n"+diff))
	}
	if p.Manifest != "" {
		if len([]rune(p.Manifest)) > inlineLimit {
			files = append(files, File{Name: rec.ID() + "-manifest.yaml", Title: "Manifest of " + rec.ID(), Content: p.Manifest})
			blocks = append(blocks, contextBlock("manifest attached as a file"))
		} else {
			blocks = append(blocks, section("*Manifest*\n```"+p.Manifest+"```"))
		}
	}
	validated := "not validated by the API server"
	if p.ServerValidated {
		validated = "validated by a server-side dry run"
	}
	blocks = append(blocks, fieldsSection("*Δ cost*\n"+p.Cost.String(), "*Risk*\n"+riskText(p.Risk)), contextBlock(validated))
	if len(p.Warnings) > 0 {
		blocks = append(blocks, section(":warning: "+strings.Join(p.Warnings, "\n:warning: ")))
	}
	return blocks, files
}

func diffText(changes []ops.Change) string {
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "• %s %s `%s`\n", c.Action, c.Kind, c.Name)
		for _, f := range c.Fields {
			fmt.Fprintf(&b, "    `%s`: %s → %s\n", f.Path, orNone(f.From), orNone(f.To))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func orNone(s string) string {
	if s == "" {
		return "∅"
	}
	return "`" + s + "`"
}

func riskText(r ops.Risk) string {
	s := "*" + r.Level.String() + "*"
	for _, x := range r.Reasons {
		s += "\n• " + x.Level.String() + ": " + x.Text
	}
	return s
}

func approvalText(rec *ops.Record) string {
	a := rec.Approval
	s := fmt.Sprintf("*Approvals* %d/%d", a.Received(), a.Required)
	if a.Approvers != "" {
		s += " from `" + a.Approvers + "`"
	}
	var voters []string
	for _, v := range a.Votes {
		if v.PlanHash != a.PlanHash {
			continue
		}
		mark := ":white_check_mark:"
		if !v.Approve {
			mark = ":no_entry_sign:"
		}
		voters = append(voters, mark+" <@"+v.Voter.ID+">")
	}
	if len(voters) > 0 {
		s += " — " + strings.Join(voters, ", ")
	}
	if !a.ExpiresAt.IsZero() {
		s += "\nexpires " + slackTime(a.ExpiresAt)
	}
	if a.Rule != "" {
		s += "\n_rule: " + a.Rule + "_"
	}
	return s
}

func resultBlocks(id string, r *ops.Result) ([]slack.Block, []File) {
	var blocks []slack.Block
	var files []File
	if r.Summary != "" {
		blocks = append(blocks, section("*Result* "+r.Summary))
	}
	if len(r.Details) > 0 {
		var fields []string
		for _, d := range r.Details {
			fields = append(fields, "*"+d.Label+"*\n"+d.Value)
		}
		for len(fields) > 0 {
			n := min(10, len(fields))
			blocks = append(blocks, fieldsSection(fields[:n]...))
			fields = fields[n:]
		}
	}
	if r.Output != "" {
		if len([]rune(r.Output)) > inlineLimit {
			files = append(files, File{Name: id + "-output.txt", Title: "Output of " + id, Content: r.Output})
			blocks = append(blocks, contextBlock("full output attached as a file"))
		} else {
			blocks = append(blocks, section("```"+r.Output+"```"))
		}
	}
	return blocks, files
}

func errorsText(errs []*ops.Error) string {
	var lines []string
	for _, e := range errs {
		lines = append(lines, errorLine(e))
	}
	return strings.Join(lines, "\n")
}

func errorLine(e *ops.Error) string {
	s := ":x: `" + string(e.Code) + "`"
	if e.Field != "" {
		s += " *" + e.Field + "*"
	}
	s += ": " + e.Message
	if e.Next != "" {
		s += "\n    → " + e.Next
	}
	return s
}

func footer(rec *ops.Record) string {
	s := "request `" + rec.ID() + "`"
	if rec.Plan != nil && rec.Plan.Hash != "" {
		s += " · plan `" + ops.ShortHash(rec.Plan.Hash) + "`"
	}
	s += fmt.Sprintf(" · v%d · costs are estimates", rec.Version)
	return s
}

// Actionable lists the buttons a request offers in its phase (none once terminal or while executing).
func Actionable(rec *ops.Record) []string {
	agentOwned := rec.Owner.Kind == ops.Agent
	switch rec.Phase {
	case ops.PhaseAwaitingApproval:
		out := []string{ActionApprove, ActionDeny, ActionCancel}
		if agentOwned {
			out = append(out, ActionStop, ActionTakeOver)
		}
		return out
	case ops.PhaseReceived, ops.PhasePlanned, ops.PhaseApproved:
		return []string{ActionCancel}
	case ops.PhaseInterrupted:
		return []string{ActionTakeOver, ActionResume, ActionStop}
	}
	return nil
}

var buttonLabels = map[string]string{ActionApprove: "Approve", ActionDeny: "Deny", ActionCancel: "Cancel", ActionStop: "Stop",
	ActionTakeOver: "Take over", ActionResume: "Resume"}

func actions(rec *ops.Record) *slack.ActionBlock {
	ids := Actionable(rec)
	if len(ids) == 0 {
		return nil
	}
	els := make([]slack.BlockElement, 0, len(ids))
	for _, id := range ids {
		b := slack.NewButtonBlockElement(id, rec.ID(), plain(buttonLabels[id]))
		switch id {
		case ActionApprove:
			b.Style = slack.StylePrimary
		case ActionDeny, ActionStop:
			b.Style = slack.StyleDanger
		}
		els = append(els, b)
	}
	return slack.NewActionBlock("actions", els...)
}

func capBlocks(blocks []slack.Block) []slack.Block {
	if len(blocks) <= maxBlocks {
		return blocks
	}
	out := append([]slack.Block{}, blocks[:maxBlocks-2]...)
	out = append(out, contextBlock(fmt.Sprintf("%d more blocks left out", len(blocks)-maxBlocks+1)), blocks[len(blocks)-1])
	return out
}

// TransitionReply renders the thread reply for a transition that a person should hear about; ok is false for the
// ones told by updating the message alone.
func TransitionReply(rec *ops.Record, t ops.Transition) (Msg, bool) {
	if !Tells(t) {
		return Msg{}, false
	}
	s := fmt.Sprintf("%s %s → *%s*", phaseEmoji[t.To], t.From, t.To)
	if t.From == t.To {
		s = fmt.Sprintf("%s *%s*", phaseEmoji[t.To], t.To)
	}
	if t.By.Kind != ops.System && t.By.ID != "" {
		s += " by " + who(t.By)
	}
	if t.Note != "" {
		s += "\n" + t.Note
	}
	if t.To.Terminal() && len(rec.Errors) > 0 && (t.To == ops.PhaseFailed || t.To == ops.PhaseRejected) {
		s += "\n" + errorLine(rec.Errors[len(rec.Errors)-1])
	}
	return Msg{Text: fmt.Sprintf("%s: %s → %s", rec.ID(), t.From, t.To), Blocks: []slack.Block{section(s)}}, true
}

// Tells reports whether a transition gets a thread reply: everything but the planning steps a plan message shows.
func Tells(t ops.Transition) bool {
	switch {
	case t.From == "" || t.To == ops.PhaseReceived || t.To == ops.PhasePlanned:
		return false
	case t.From == ops.PhasePlanned && (t.To == ops.PhaseAwaitingApproval || t.To == ops.PhaseDone):
		return false
	case t.From == ops.PhaseExecuting && t.To == ops.PhaseExecuting && t.By.Kind == ops.System:
		return false // the fence is recorded, nothing to tell
	}
	return true
}

// ProgressReply renders a step an execution reported.
func ProgressReply(rec *ops.Record, msg string) Msg {
	return Msg{Text: rec.ID() + ": " + msg, Blocks: []slack.Block{contextBlock(":hourglass: " + msg)}}
}

// ErrorMessage renders a refusal: every problem with its code, field and next step.
func ErrorMessage(err error) Msg {
	var errs []*ops.Error
	if es, ok := err.(ops.Errors); ok {
		errs = es
	} else {
		errs = []*ops.Error{ops.AsError(err)}
	}
	text := make([]string, len(errs))
	for i, e := range errs {
		text[i] = e.Error()
	}
	return Msg{Text: strings.Join(text, "\n"), Blocks: []slack.Block{section(errorsText(errs))}}
}

// InfoMessage renders a short note.
func InfoMessage(s string) Msg { return Msg{Text: s, Blocks: []slack.Block{section(s)}} }

// ResultMessage renders the answer of a read-only operation.
func ResultMessage(rec *ops.Record) Rendered {
	title := fmt.Sprintf("%s *%s* on %s", phaseLabel(rec.Phase), rec.Request.Operation, target(rec.Request.Target))
	blocks := []slack.Block{section(title)}
	var files []File
	if rec.Result != nil {
		rb, rf := resultBlocks(rec.Request.Operation, rec.Result)
		blocks = append(blocks, rb...)
		files = rf
	}
	if len(rec.Errors) > 0 {
		blocks = append(blocks, section(errorsText(rec.Errors)))
	}
	text := rec.Request.Operation + ": " + string(rec.Phase)
	if rec.Result != nil {
		text += " — " + rec.Result.Summary
	}
	return Rendered{Msg: Msg{Text: text, Blocks: capBlocks(blocks)}, Files: files}
}

// RequestsMessage renders a list of requests.
func RequestsMessage(title string, recs []*ops.Record) Msg {
	blocks := []slack.Block{section("*" + title + "*")}
	if len(recs) == 0 {
		blocks = append(blocks, contextBlock("none"))
	}
	for _, r := range recs {
		if len(blocks) >= maxBlocks-1 {
			blocks = append(blocks, contextBlock(fmt.Sprintf("and %d more", len(recs)-len(blocks)+1)))
			break
		}
		blocks = append(blocks, section(fmt.Sprintf("%s `%s` *%s* on %s — %s, %s", phaseEmoji[r.Phase], r.ID(), r.Request.Operation,
			target(r.Request.Target), r.Phase, who(r.Request.Initiator))))
	}
	return Msg{Text: fmt.Sprintf("%s: %d request(s)", title, len(recs)), Blocks: blocks}
}

// HelpMessage renders help for all topics (topic "") or one topic, generated from the grammar.
func HelpMessage(g *Grammar, topic string) Msg {
	if topic == "" {
		lines := []string{"*HyperOps* — say what you want; the server plans, asks for approval and does it. Topics:"}
		for _, t := range g.Topics() {
			var verbs []string
			for _, c := range g.Commands(t) {
				if c.Verb != "" {
					verbs = append(verbs, c.Verb)
				}
			}
			l := "• `" + g.command + " " + t
			if len(verbs) > 0 {
				l += " " + strings.Join(verbs, "|")
			}
			lines = append(lines, l+"`")
		}
		lines = append(lines, fmt.Sprintf("Every operation takes `cluster=` `namespace=` `dry-run` `request-id=` `profile=`. Quote values with spaces: `command=\"python train.py --lr 0.1\"`. More: `%s <topic> help`.", g.command))
		return Msg{Text: "HyperOps help", Blocks: []slack.Block{section(strings.Join(lines, "\n"))}}
	}
	cmds := g.Commands(topic)
	if len(cmds) == 0 {
		next := "topics: " + strings.Join(g.Topics(), ", ")
		if c := ops.Closest(topic, g.Topics()); c != "" {
			next = "did you mean " + c + "? " + next
		}
		return ErrorMessage(ops.Errorf(ops.CodeUnknownOperation, "topic", next, "unknown topic %q", topic))
	}
	blocks := []slack.Block{section("*" + g.command + " " + topic + "*")}
	for _, c := range cmds {
		s := "`" + c.Usage + "`\n" + c.Summary
		if c.Spec != nil {
			for _, p := range c.Spec.Params {
				line := "\n    `" + p.Name + "` " + p.Help
				if p.Default != "" {
					line += " (default " + p.Default + ")"
				}
				s += line
			}
		}
		blocks = append(blocks, section(s))
	}
	return Msg{Text: "help: " + topic, Blocks: capBlocks(blocks)}
}

// AuditLine renders the one-line mirror of a transition for the audit channel.
func AuditLine(rec *ops.Record, t ops.Transition) Msg {
	s := fmt.Sprintf("`%s` %s on %s: %s → %s by %s", rec.ID(), rec.Request.Operation, plainTarget(rec.Request.Target), orDash(string(t.From)), t.To, who(t.By))
	if t.Note != "" {
		s += " — " + t.Note
	}
	return Msg{Text: s, Blocks: []slack.Block{contextBlock(s)}}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
