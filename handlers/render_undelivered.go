package handlers

import (
	"fmt"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// plainTextMax is how much of a message's text the plain-text version keeps (Slack takes 40,000 characters;
// a short version is what a person reads in a thread).
const plainTextMax = 2900

// PlainVersions are the versions of m to try in turn when Slack refused it for its content (invalid_blocks,
// msg_too_long): the start of its text and the command that shows the rest, first with the message's buttons (a
// plan awaiting a vote must stay approvable: without them nobody could act on it until it expired), then, should
// Slack refuse that too, as plain text alone.
func PlainVersions(rec *ops.Record, m Msg) []Msg {
	text := clip(m.Text, plainTextMax)
	if text == "" {
		text = rec.ID()
	}
	plain := m
	plain.Text = text + "\n(Slack refused the full message; " + ops.Ask("request show id="+rec.ID()) + " shows all of it.)"
	plain.Blocks = nil
	var buttons []slack.Block
	for _, b := range m.Blocks {
		if b.BlockType() == slack.MBTAction {
			buttons = append(buttons, b)
		}
	}
	if len(buttons) == 0 {
		return []Msg{plain}
	}
	withButtons := plain
	withButtons.Blocks = append([]slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType,
		clip(plain.Text, plainTextMax), false, false), nil, nil)}, buttons...)
	return []Msg{withButtons, plain}
}

// sendPlain sends the plain versions of m (PlainVersions) in turn with send while Slack refuses them for their
// content; it returns send's last answer. A plain version is never background: Slack already took the refused call
// in, and the message or thread is wrong until its retry lands, so the retry goes at once and does not give way to
// newer entries of its request (a background call may, engine.ErrSuperseded).
func sendPlain(rec *ops.Record, m Msg, send func(Msg) error) error {
	var err error
	for _, v := range PlainVersions(rec, m) {
		v.Background = false
		if err = send(v); Classify(err) != Rejected {
			return err
		}
	}
	return err
}

// UndeliveredNotice is the direct message to the requester when the request's own channel or thread refused one
// of its messages: which request, which event, where it could not go, Slack's answer, what to do, and the message
// itself.
func UndeliveredNotice(rec *ops.Record, t ops.Transition, channel, slackCode string, m Msg) Msg {
	what := eventName(t)
	head := fmt.Sprintf(":warning: I could not post %s of request %s in <#%s>: Slack answered %s. %s",
		what, code(rec.ID()), channel, code(slackCode), nextStep(slackCode, channel))
	tail := "Read the request with " + code(ops.Ask("request show id="+rec.ID())) + "."
	text := fmt.Sprintf("I could not post %s of request %s in %s: Slack answered %s. %s", what, rec.ID(), channel, slackCode,
		"Read it with "+ops.Ask("request show id="+rec.ID())+".")
	blocks := []slack.Block{section(head)}
	if m.Text != "" {
		blocks = append(blocks, contextBlock(escLine(m.Text)))
	}
	blocks = append(blocks, contextBlock(tail))
	return Msg{Text: escText(text), Blocks: blocks}
}

// AuditRefusedReply is the reply in the request's thread when the audit channel refused its audit line: the
// audit trail of the request is still in its record.
func AuditRefusedReply(rec *ops.Record, auditChannel, slackCode string) Msg {
	s := fmt.Sprintf(":warning: The audit channel <#%s> refused the audit line of %s: Slack answered %s. %s "+
		"Or set `slack.auditChannel` to a channel the bot can post in. The request's full history is in %s.",
		auditChannel, code(rec.ID()), code(slackCode), nextStep(slackCode, auditChannel), code(ops.Ask("request show id="+rec.ID())))
	text := fmt.Sprintf("The audit channel %s refused the audit line of %s: Slack answered %s.", auditChannel, rec.ID(), slackCode)
	return Msg{Text: escText(text), Blocks: []slack.Block{contextBlock(s)}, Background: true}
}

// nextStep says what fixes a channel Slack refuses.
func nextStep(slackCode, channel string) string {
	switch slackCode {
	case "is_archived", "channel_is_archived":
		return "Unarchive <#" + channel + ">."
	case "not_in_channel":
		return "Invite the bot to <#" + channel + "> (`/invite @hyperops`)."
	case "channel_not_found":
		return "Check that the channel exists and the bot can see it."
	case "thread_not_found", "message_not_found":
		return "The request's message was deleted."
	case "invalid_blocks", "invalid_blocks_format", "msg_too_long":
		return "The message was too large for Slack."
	}
	return "Ask a Slack admin to check the bot's access to <#" + channel + ">."
}

// eventName names a history entry in a sentence: "the update executing → succeeded", "a progress update".
func eventName(t ops.Transition) string {
	switch {
	case t.Kind == ops.KindProgress:
		return "a progress update"
	case t.From == "":
		return "the plan"
	}
	return fmt.Sprintf("the update %s → %s", t.From, t.To)
}
