package handlers

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// The action IDs of the request buttons. A button's value carries only the request id; an overflow option's
// value is "<action id>:<request id>".
const (
	ActionApprove  = "hp_approve"
	ActionDeny     = "hp_deny"
	ActionCancel   = "hp_cancel"
	ActionStop     = "hp_stop"
	ActionTakeOver = "hp_takeover"
	ActionResume   = "hp_resume"
	ActionRevert   = "hp_revert"
	// ActionDetails opens the plan's details (manifest, full diff, every risk reason) in a modal.
	ActionDetails = "hp_details"
	// ActionMore is the overflow menu holding the less frequent choices.
	ActionMore = "hp_more"
)

// Slack's limits the rendering stays inside (a section's text, a message's blocks, an option's value).
const (
	maxSectionText = 3000
	// inlineLimit is how much long text is shown in a message or modal before it goes to a file instead.
	inlineLimit    = 2500
	maxBlocks      = 50
	maxOptionValue = 150
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
	return slack.NewSectionBlock(mrkdwn(clip(nonEmpty(s), maxSectionText)), nil, nil)
}

func fieldsSection(fields ...string) *slack.SectionBlock {
	objs := make([]*slack.TextBlockObject, 0, len(fields))
	for _, f := range fields {
		objs = append(objs, mrkdwn(clip(nonEmpty(f), 2000)))
	}
	return slack.NewSectionBlock(nil, objs, nil)
}

func contextBlock(s string) *slack.ContextBlock {
	return slack.NewContextBlock("", mrkdwn(clip(nonEmpty(s), maxSectionText)))
}

// nonEmpty stands in for an empty text, which Slack refuses in a block.
func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "–"
	}
	return s
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

// phaseWords says a phase as people do.
var phaseWords = map[ops.Phase]string{
	ops.PhaseReceived: "Received", ops.PhaseRejected: "Rejected", ops.PhasePlanned: "Planned", ops.PhaseDone: "Dry run done: nothing was changed",
	ops.PhaseAwaitingApproval: "Waiting for approval", ops.PhaseDenied: "Denied", ops.PhaseExpired: "Expired: nobody approved in time",
	ops.PhaseCancelled: "Cancelled", ops.PhaseApproved: "Approved, starting", ops.PhaseExecuting: "Executing",
	ops.PhaseSucceeded: "Succeeded", ops.PhaseFailed: "Failed", ops.PhaseInterrupted: "Interrupted: a person must decide",
}

func target(t ops.Target) string {
	if t.Namespace == "" {
		return code(t.Cluster)
	}
	return code(t.Cluster + "/" + t.Namespace)
}

func slackTime(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// PlanMessage renders a request's message, decision first: what happens where; cost, risk, who asked, who must
// approve and until when; the buttons; then the diff summary, the outcome, and the request id and plan hash in
// the closing context line. The manifest and full diff are behind Details.
func PlanMessage(specs Specs, rec *ops.Record) Rendered {
	return planMessage(rec, specOf(specs, rec), nil)
}

// RequestMessage is PlanMessage with the last state told of each workload the request watches (Workloads, in
// rec.Result.Watch order; "" for one not told yet). What it renders is a function of the record and those states
// alone, so the outcome's update and a workload's update draw the same message whichever lands last.
func RequestMessage(specs Specs, rec *ops.Record, workloads []string) Rendered {
	return planMessage(rec, specOf(specs, rec), workloads)
}

// planMessage renders the message of rec, whose operation op is; workloads, when set, are the last states told of
// the workloads the request made (rec.Result.Watch order), shown under the outcome once the request has executed.
func planMessage(rec *ops.Record, op ops.Spec, workloads []string) Rendered {
	workloads = toldWorkloads(rec, workloads)
	blocks := []slack.Block{section(titleText(rec, op, workloads))}
	if rec.Plan != nil {
		blocks = append(blocks, planFields(rec))
	} else {
		blocks = append(blocks, contextBlock("asked by "+person(rec.Request.Initiator)))
	}
	if rec.Phase == ops.PhaseInterrupted {
		blocks = append(blocks, section(interruptedText(rec)))
	}
	if acts := actions(rec, op); acts != nil {
		blocks = append(blocks, acts)
	}
	var files []File
	if p := rec.Plan; p != nil {
		if !executed(rec.Phase) {
			if d := joinNonEmpty(diffSummary(p.Changes), runsAsLine(p.RunsAs), reservationLines(p.Reservations)); d != "" {
				blocks = append(blocks, section(d))
			}
			if d := driftSummary(p.Drift); d != "" {
				blocks = append(blocks, section(d))
			}
			if d := budgetLines(p.Budget); d != "" {
				blocks = append(blocks, contextBlock(d))
			}
		}
		if len(p.Warnings) > 0 {
			blocks = append(blocks, contextBlock(":warning: "+esc(clip(strings.Join(p.Warnings, "\n:warning: "), 1500))))
		}
		files = append(files, planFilesOf(rec)...)
	}
	if r := rec.Result; r != nil {
		rb, rf := resultBlocks(rec.ID(), r)
		blocks = append(blocks, rb...)
		files = append(files, rf...)
	}
	if len(rec.Errors) > 0 {
		blocks = append(blocks, section(errorsText(rec.Errors)))
	}
	blocks = append(blocks, contextBlock(footer(rec, len(workloads) > 0)))
	text := fmt.Sprintf("%s %s — %s (request %s)", headEmoji(rec, workloads), oneLine(plainHeadline(rec, op)), strings.ToLower(phaseWords[rec.Phase]), rec.ID())
	for i, st := range workloads {
		if st != "" {
			text += fmt.Sprintf(" · %s: %s", rec.Result.Watch[i].Name, st)
		}
	}
	return Rendered{Msg: Msg{Text: escText(text), Blocks: capBlocks(blocks), Version: rec.Version}, Files: files}
}

// executed reports whether a request has run (its diff is history by then).
func executed(p ops.Phase) bool {
	switch p {
	case ops.PhaseExecuting, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted:
		return true
	}
	return false
}

// plainHeadline is the headline without mrkdwn, for notifications.
func plainHeadline(rec *ops.Record, op ops.Spec) string {
	return strings.NewReplacer("`", "", "*", "", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(headline(rec, op))
}

// titleText is the headline and, below it, where each workload the request made stands (the first one's emoji
// heads the message: a failed job shows so at a glance) and where the request stands.
func titleText(rec *ops.Record, op ops.Spec, workloads []string) string {
	lines := ""
	for i, st := range workloads {
		if st != "" {
			lines += "\n" + workloadStatus(rec.Result.Watch[i], st)
		}
	}
	s := headEmoji(rec, workloads) + " " + headline(rec, op)
	if rec.Request.DryRun {
		s += " _(dry run)_"
	}
	return s + lines + "\n" + status(rec) + revertLines(rec) + glassLine(rec) + grantLine(rec)
}

// headEmoji heads a request's message: the first told workload's state once there is one, else the phase.
func headEmoji(rec *ops.Record, workloads []string) string {
	for _, st := range workloads {
		if st != "" {
			return stateEmoji[st]
		}
	}
	return phaseEmoji[rec.Phase]
}

// toldWorkloads keeps the workload states worth showing: those of a request that has executed, one per watched
// object; nil when there is none.
func toldWorkloads(rec *ops.Record, states []string) []string {
	if !executed(rec.Phase) || rec.Result == nil || len(states) != len(rec.Result.Watch) {
		return nil
	}
	for _, st := range states {
		if st != "" {
			return states
		}
	}
	return nil
}

// revertLines link a revert and the request it reverts, both ways.
func revertLines(rec *ops.Record) string {
	s := ""
	if id := rec.Request.Reverts; id != "" {
		s += "\n:leftwards_arrow_with_hook: reverts request " + code(id)
		if u := rec.Plan; u != nil && len(u.Warnings) > 0 && strings.Contains(strings.Join(u.Warnings, "\n"), "changed since "+id) {
			s += " · _its target changed since: see the warnings_"
		}
	}
	if id := rec.RevertedBy; id != "" {
		s += "\n:leftwards_arrow_with_hook: reverted by request " + code(id)
	}
	return s
}

// status is the second line of the title: the phase in words, who decided and why, and the requester for
// outcomes they should hear about.
func status(rec *ops.Record) string {
	s := "*" + phaseWords[rec.Phase] + "*"
	switch rec.Phase {
	case ops.PhaseAwaitingApproval:
		return s
	case ops.PhaseDenied:
		if v, ok := lastVote(rec, false); ok {
			s += " by " + mention(v.Voter.ID)
			if v.Reason != "" {
				s += ": _" + escLine(v.Reason) + "_"
			}
		}
	case ops.PhaseCancelled:
		if t, ok := lastTransition(rec, ops.PhaseCancelled); ok && t.By.Kind != ops.System {
			s += " by " + person(t.By)
		}
	case ops.PhaseFailed, ops.PhaseRejected:
		if n := len(rec.Errors); n > 0 {
			s += ": " + escLine(rec.Errors[n-1].Message)
		}
	case ops.PhaseSucceeded:
		if rec.Result != nil && rec.Result.Summary != "" {
			s += ": " + escLine(rec.Result.Summary)
		}
	}
	if rec.Phase.Terminal() && rec.Phase != ops.PhaseDone {
		s += requesterNote(rec)
	}
	return s
}

// requesterNote mentions the person who asked (agents are told in their own thread).
func requesterNote(rec *ops.Record) string {
	if i := rec.Request.Initiator; i.Kind == ops.Human {
		return " · " + mention(i.ID)
	}
	return ""
}

// workloadStatus is a title line for a workload the request made: its kind, name and last state told. Why it
// failed or waits is told in the thread (the reply mentions the requester); the message keeps the state only, so
// it is the same whichever replica drew it last.
func workloadStatus(obj ops.ObjectRef, state string) string {
	kind := obj.Kind
	if kind == "" {
		kind = "Job"
	}
	s := stateEmoji[state] + " " + escLine(kind) + " " + code(obj.Name) + ": *" + sentence(phrase(state)) + "*"
	if state == "failed" {
		s += " — why is told in the thread"
	}
	return s
}

func lastVote(rec *ops.Record, approve bool) (ops.Vote, bool) {
	for i := len(rec.Approval.Votes) - 1; i >= 0; i-- {
		if v := rec.Approval.Votes[i]; v.Approve == approve {
			return v, true
		}
	}
	return ops.Vote{}, false
}

func lastTransition(rec *ops.Record, to ops.Phase) (ops.Transition, bool) {
	for i := len(rec.History) - 1; i >= 0; i-- {
		if t := rec.History[i]; t.To == to {
			return t, true
		}
	}
	return ops.Transition{}, false
}

// interruptedText says what HyperOps found and what each choice does.
func interruptedText(rec *ops.Record) string {
	found := "HyperOps could not tell whether the change was made."
	if rec.Result != nil && rec.Result.Summary != "" {
		found = "HyperOps checked and found: " + escLine(rec.Result.Summary) + "."
	}
	return ":mag: " + found + "\n*Take over* makes the request yours. Then *Resume* plans it again against what is there now " +
		"(and asks for approval again if anything changed), or *Stop* closes it without running anything more."
}

// planFilesOf are the plan's long texts, uploaded in the thread: a manifest or diff too long for the Details modal.
func planFilesOf(rec *ops.Record) []File {
	p := rec.Plan
	var files []File
	if diff := fullDiff(p.Changes); len([]rune(diff)) > inlineLimit {
		files = append(files, File{Name: rec.ID() + "-diff.txt", Title: "Diff of " + rec.ID(), Content: diff})
	}
	if drift := driftText(p.Drift); len([]rune(drift)) > inlineLimit {
		files = append(files, File{Name: rec.ID() + "-drift.txt", Title: "Drift of " + rec.ID(), Content: drift})
	}
	if len([]rune(p.Manifest)) > inlineLimit {
		files = append(files, File{Name: rec.ID() + "-manifest.yaml", Title: "Manifest of " + rec.ID(), Content: p.Manifest})
	}
	return files
}

func resultBlocks(id string, r *ops.Result) ([]slack.Block, []File) {
	var blocks []slack.Block
	var files []File
	if len(r.Details) > 0 {
		var fields []string
		for _, d := range r.Details {
			fields = append(fields, "*"+escLine(d.Label)+"*\n"+escLine(d.Value))
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
			blocks = append(blocks, contextBlock("the full output is attached in the thread as a file"))
		} else {
			blocks = append(blocks, section(codeBlock(r.Output)))
		}
	}
	return blocks, files
}

func errorsText(errs []*ops.Error) string {
	return errorLines(errs, maxSectionText)
}

func errorLine(e *ops.Error) string {
	s := ":x: "
	if e.Field != "" {
		s += code(e.Field) + ": "
	}
	s += esc(clip(e.Message, 600))
	if e.Next != "" {
		s += "\n    → " + esc(clip(e.Next, 600))
	}
	return s + " (" + string(e.Code) + ")"
}

// footer is the closing context line: the ids and internals a lead does not decide on.
func footer(rec *ops.Record, executed bool) string {
	parts := []string{"request " + code(rec.ID()), escLine(rec.Request.Operation)}
	if executed {
		parts = append([]string{"request executed"}, parts...)
	}
	if p := rec.Plan; p != nil {
		if p.Hash != "" {
			parts = append(parts, "plan "+code(ops.ShortHash(p.Hash)))
		}
		if p.ServerValidated {
			parts = append(parts, "validated by a server-side dry run")
		}
	}
	if r := rec.Approval.Rule; r != "" {
		parts = append(parts, escLine(r))
	}
	if o := rec.Request.Origin; o != "" {
		parts = append(parts, "via "+escLine(o))
	}
	return strings.Join(append(parts, "costs are estimates"), " · ")
}

// Actionable lists the action IDs of the choices a request offers in its phase (ops.Record.Choices).
func Actionable(rec *ops.Record) []string {
	var out []string
	for _, c := range rec.Choices() {
		out = append(out, choiceActions[c])
	}
	return out
}

// choiceActions are the action IDs of the choices.
var choiceActions = map[ops.Choice]string{ops.ChoiceApprove: ActionApprove, ops.ChoiceDeny: ActionDeny, ops.ChoiceCancel: ActionCancel,
	ops.ChoiceStop: ActionStop, ops.ChoiceTakeOver: ActionTakeOver, ops.ChoiceResume: ActionResume, ops.ChoiceRevert: ActionRevert,
	ops.ChoiceBreakGlass: ActionBreakGlass, ops.ChoiceGrant: ActionGrant}

// menuLabels say what each overflow choice does (Slack shows at most 75 characters).
var menuLabels = map[string]string{
	ActionCancel:   "Cancel: withdraw the request (requester)",
	ActionStop:     "Stop: end the request, nothing more runs",
	ActionTakeOver: "Take over: make the request yours",
	ActionResume:   "Resume: plan again and continue",
	ActionRevert:   "Revert: ask to put back what this changed (a new request)",
	ActionGrant:    "Approve and allow similar…: a standing grant, bounded",
}

// buttons are the choices shown as buttons; the rest go to the overflow menu.
var buttons = map[ops.Phase][]string{
	ops.PhaseAwaitingApproval: {ActionApprove, ActionDeny, ActionBreakGlass},
	ops.PhaseInterrupted:      {ActionTakeOver},
}

func actions(rec *ops.Record, op ops.Spec) *slack.ActionBlock {
	ids := Actionable(rec)
	var els []slack.BlockElement
	var menu []*slack.OptionBlockObject
	for _, id := range ids {
		if !isButton(rec.Phase, id) && len(id)+1+len(rec.ID()) <= maxOptionValue {
			menu = append(menu, slack.NewOptionBlockObject(id+":"+rec.ID(), plain(menuLabels[id]), nil))
			continue
		}
		els = append(els, button(rec, op, id))
	}
	if rec.Plan != nil && (len(ids) > 0 || rec.Plan.Manifest != "" || len(rec.Plan.Changes) > 0) {
		els = append(els, slack.NewButtonBlockElement(ActionDetails, rec.ID(), plain("Details")))
	}
	if len(menu) > 0 {
		els = append(els, slack.NewOverflowBlockElement(ActionMore, menu...))
	}
	if len(els) == 0 {
		return nil
	}
	return slack.NewActionBlock("actions", els...)
}

func isButton(p ops.Phase, id string) bool {
	for _, b := range buttons[p] {
		if b == id {
			return true
		}
	}
	return false
}

var buttonLabels = map[string]string{ActionApprove: "Approve", ActionDeny: "Deny…", ActionCancel: "Cancel", ActionStop: "Stop",
	ActionTakeOver: "Take over", ActionResume: "Resume", ActionRevert: "Revert", ActionBreakGlass: "🔨 Break glass…",
	ActionGrant: "Approve and allow similar…"}

func button(rec *ops.Record, op ops.Spec, id string) *slack.ButtonBlockElement {
	value := rec.ID()
	if id == ActionApprove {
		value = ApproveValue(rec)
	}
	b := slack.NewButtonBlockElement(id, value, plain(buttonLabels[id]))
	switch id {
	case ActionApprove, ActionTakeOver:
		b.Style = slack.StylePrimary
	case ActionDeny, ActionStop, ActionBreakGlass:
		b.Style = slack.StyleDanger
	}
	// An approval that asks for a typed name confirms in its own modal instead.
	if id == ActionApprove && rec.Plan != nil && rec.Plan.Risk.Level >= ops.RiskHigh && op.Confirm == nil {
		b.Confirm = approveConfirm(rec, op)
	}
	return b
}

// planSeparator joins a request id and a plan hash in an Approve button's value; request ids never hold it.
const planSeparator = "@"

// ApproveValue is the value of request rec's Approve button: its id and the hash of the plan the message shows, so
// that a click approves that plan and no later one.
func ApproveValue(rec *ops.Record) string { return rec.ID() + planSeparator + rec.Approval.PlanHash }

// ButtonTarget reads a request button's value: the request id, and for an Approve button the plan hash it was drawn with
// ("" on buttons posted before the value carried it, which the engine refuses like a changed plan).
func ButtonTarget(value string) (id, planHash string) {
	id, planHash, _ = strings.Cut(value, planSeparator)
	return id, planHash
}

// approveConfirm is the dialog Slack shows before a high or critical risk approval is sent.
func approveConfirm(rec *ops.Record, op ops.Spec) *slack.ConfirmationBlockObject {
	why := "This is " + rec.Plan.Risk.Level.String() + " risk."
	if x, ok := deciding(rec.Plan.Risk); ok {
		why = "This is " + rec.Plan.Risk.Level.String() + " risk: " + clip(oneLine(x.Text), 200) + "."
	}
	c := slack.NewConfirmationBlockObject(plain("Approve this change?"),
		plain(clip(oneLine(plainHeadline(rec, op)), 250)+"\n"+why), plain("Approve"), plain("Not yet"))
	return c.WithStyle(slack.StylePrimary)
}

func capBlocks(blocks []slack.Block) []slack.Block {
	if len(blocks) <= maxBlocks {
		return blocks
	}
	out := append([]slack.Block{}, blocks[:maxBlocks-2]...)
	out = append(out, contextBlock(fmt.Sprintf("%d more blocks left out", len(blocks)-maxBlocks+1)), blocks[len(blocks)-1])
	return out
}

// Tells reports whether a transition gets a reply in an agent's thread: everything but the planning steps the
// first reply shows.
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

// tellsPeople reports whether a transition gets a reply in the plan message's thread: a vote, the outcome, a
// take-over; not the internal steps (approved → executing). A request whose workload is watched leaves its
// success to the watch, which tells running and completed.
func tellsPeople(rec *ops.Record, t ops.Transition) bool {
	if !Tells(t) {
		return false
	}
	switch {
	case t.To == ops.PhaseExecuting:
		return false
	case t.To == ops.PhaseSucceeded && rec.Result != nil && len(rec.Result.Watch) > 0:
		return false
	}
	return true
}

// TransitionReply renders the thread reply for a transition that a person should hear about; ok is false for the
// ones told by updating the message alone.
func TransitionReply(rec *ops.Record, t ops.Transition) (Msg, bool) {
	if !tellsPeople(rec, t) {
		return Msg{}, false
	}
	s := phaseEmoji[t.To] + " "
	word := phrase(string(t.To)) // what the notification says happened
	by := ""
	if t.By.Kind != ops.System && t.By.ID != "" {
		by = " by " + person(t.By)
	}
	switch {
	case t.From == t.To && rec.Owner.ID == t.By.ID && t.By.Kind == ops.Human:
		s = ":raising_hand: " + person(t.By) + " took the request over"
	case t.To == ops.PhaseAwaitingApproval && (t.From == ops.PhaseApproved || t.From == ops.PhaseExecuting || t.From == ops.PhaseInterrupted):
		s = ":arrows_counterclockwise: *Needs approval again*"
		if t.Note != "" {
			s += ": " + escLine(t.Note)
		}
	case t.To == ops.PhaseAwaitingApproval:
		s = ":thumbsup: Approved" + by + fmt.Sprintf(" (%d of %d)", rec.Approval.Received(), rec.Approval.Required)
	case t.To == ops.PhaseApproved && t.From == ops.PhasePlanned && t.By.Kind == ops.System && rec.Grant != nil:
		// Told without a mention: a grant's uses are not the lead's to hear of at every one (its thread says them).
		g := rec.Grant
		s += fmt.Sprintf("Approved by grant %s (given by %s, %d of %d used): starting", code(g.Grant), escLine(display(g.GivenBy)), g.Use, g.Uses)
	case t.To == ops.PhaseApproved && t.From == ops.PhaseInterrupted:
		// Resume: the owner chose to go on; nobody approved anything anew, and the plan is checked again first.
		s = ":arrow_forward: *Resumed*" + by + ": checking the plan against what is there now, then starting " +
			"(it asks for approval again if anything changed)"
		word = "resumed"
	case t.To == ops.PhaseApproved:
		s += "Approved" + by + ": starting"
	case needsRequester(t.To):
		return outcomeReply(rec, t), true
	default:
		s += status(rec)
		if t.To == ops.PhaseCancelled {
			s = phaseEmoji[t.To] + " *" + phaseWords[t.To] + "*" + by
		}
	}
	return Msg{Text: escText(fmt.Sprintf("%s: %s", rec.ID(), word)), Blocks: []slack.Block{section(s)}}, true
}

// ProgressReply renders a step an execution reported.
func ProgressReply(rec *ops.Record, msg string) Msg {
	return Msg{Text: escText(rec.ID() + ": " + oneLine(msg)), Blocks: []slack.Block{contextBlock(":hourglass: " + escLine(msg))}}
}

// ErrorMessage renders a refusal: every problem with its field, message, next step and code.
func ErrorMessage(err error) Msg {
	var errs []*ops.Error
	if es, ok := err.(ops.Errors); ok {
		errs = es
	} else {
		errs = []*ops.Error{ops.AsError(err)}
	}
	errs = cappedErrors(errs)
	text := make([]string, len(errs))
	for i, e := range errs {
		text[i] = clip(oneLine(e.Error()), maxErrorLine)
	}
	return Msg{Text: fitText(esc(strings.Join(text, "\n"))), Blocks: []slack.Block{section(errorsText(errs))}}
}

// InfoMessage renders a short note written by HyperOps (callers escape what they put in it from outside).
func InfoMessage(s string) Msg { return Msg{Text: fitText(s), Blocks: []slack.Block{section(s)}} }

// ResultMessage renders the answer of a read-only operation.
func ResultMessage(specs Specs, rec *ops.Record) Rendered {
	op := specOf(specs, rec)
	title := phaseEmoji[rec.Phase] + " " + headline(rec, op)
	if rec.Result != nil && rec.Result.Summary != "" {
		title += "\n" + escLine(rec.Result.Summary)
	}
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
	text := oneLine(plainHeadline(rec, op))
	if rec.Result != nil {
		text += " — " + oneLine(rec.Result.Summary)
	}
	return Rendered{Msg: Msg{Text: escText(text), Blocks: capBlocks(blocks)}, Files: files}
}

// RequestsMessage renders a list of requests.
func RequestsMessage(specs Specs, title string, recs []*ops.Record) Msg {
	blocks := []slack.Block{section("*" + title + "*")}
	if len(recs) == 0 {
		blocks = append(blocks, contextBlock("none"))
	}
	for _, r := range recs {
		if len(blocks) >= maxBlocks-1 {
			blocks = append(blocks, contextBlock(fmt.Sprintf("and %d more", len(recs)-len(blocks)+1)))
			break
		}
		blocks = append(blocks, section(fmt.Sprintf("%s %s\n%s · asked by %s · %s", phaseEmoji[r.Phase], headline(r, specOf(specs, r)),
			strings.ToLower(phaseWords[r.Phase]), person(r.Request.Initiator), code(r.ID()))))
	}
	return Msg{Text: fitText(fmt.Sprintf("%s: %s", title, plural(int64(len(recs)), "request", "requests"))), Blocks: blocks}
}

// AuditLine renders the one-line mirror of a transition for the audit channel.
func AuditLine(rec *ops.Record, t ops.Transition) Msg {
	badge := ""
	if bg := rec.BreakGlass; bg != nil && (bg.Broke(t) || t.Kind == ops.KindBreakGlassAck) {
		badge = "*" + GlassBadge + "* "
	}
	s := badge + fmt.Sprintf("%s %s on %s: %s → %s by %s", code(rec.ID()), escLine(rec.Request.Operation), target(rec.Request.Target),
		orDash(phrase(string(t.From))), phrase(string(t.To)), person(t.By))
	if t.Note != "" {
		s += " — " + escLine(t.Note)
	}
	return Msg{Text: escText(oneLine(fmt.Sprintf("%s %s: %s → %s", rec.ID(), rec.Request.Operation, t.From, t.To))), Blocks: []slack.Block{contextBlock(s)}}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// topicGuide is each topic's one-line description and an example, for the help.
var topicGuide = map[string]struct{ about, example string }{
	"status":    {"how a cluster is doing: nodes, GPUs in use, pods waiting", "status cluster=ml-prod-eks"},
	"capacity":  {"show or change the nodes of an instance group", "capacity scale group=gpu-workers count=4"},
	"train":     {"run, follow and stop training jobs", "train submit name=llm-ft image=REGISTRY/trainer:v1 replicas=2 gpus=8 max-hours=12"},
	"infer":     {"deploy, scale, roll out and delete inference servers", "infer scale name=fraud-scorer replicas=3"},
	"storage":   {"create, list and delete volume claims", "storage create name=checkpoints size=500Gi"},
	"bootstrap": {"check a cluster works, or create its HyperPod cluster", "bootstrap verify"},
	"requests":  {"recent requests: yours, or those waiting for approval", "requests pending"},
	"request":   {"one request: its state, or cancel, stop or revert it", "request show id=train-20250308-001"},
	"report":    {"a capacity report with a chart, here and now", "report capacity"},
	"watch":     {"tell a workload's changes in this channel", "watch job=llm-ft"},
	"unwatch":   {"stop telling a workload's changes here", "unwatch job=llm-ft"},
	"help":      {"this help, or one topic's", "train help"},
	"budget":    {"your spend budgets: what they used and when they reset", "budget"},
	"grants":    {"standing grants: list them, or revoke one", "grants revoke id=g-3f9a2c1d"},
}

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
			l += "`"
			if d, ok := topicGuide[t]; ok {
				l += " — " + d.about + "\n      e.g. `" + g.command + " " + d.example + "`"
			}
			lines = append(lines, l)
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
	title := "*" + g.command + " " + topic + "*"
	if d, ok := topicGuide[topic]; ok {
		title += " — " + d.about + "\ne.g. `" + g.command + " " + d.example + "`"
	}
	blocks := []slack.Block{section(title)}
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
	return Msg{Text: escText("help: " + topic), Blocks: capBlocks(blocks)}
}

// DMAnswer answers a person's direct message that is not a command: words that are no topic ("hello", "what can
// you do") get the help; a command with a mistake gets the refusal, which names the fix.
func DMAnswer(g *Grammar, err error) Msg {
	var e *ops.Error
	if errors.As(err, &e) && e.Code == ops.CodeUnknownOperation && e.Field == "topic" {
		help := HelpMessage(g, "")
		help.Blocks = append([]slack.Block{section(":wave: Hi! Here is what you can ask me.")}, help.Blocks...)
		return help
	}
	return ErrorMessage(err)
}

// budgetLines says where a plan stands in each spend budget that covers it, one line each.
func budgetLines(places []ops.BudgetPlace) string {
	lines := make([]string, 0, len(places))
	for _, p := range places {
		icon := ":moneybag:"
		if len(p.Over) > 0 {
			icon = ":warning:"
		}
		lines = append(lines, icon+" Budget "+code(p.Budget.Name)+": "+escLine(p.Sentence()))
	}
	return strings.Join(lines, "\n")
}
