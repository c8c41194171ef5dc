package handlers

import (
	"strings"
	"unicode"
)

// Every string that did not come from HyperOps itself (names, images, commands, reasons, error texts from
// Kubernetes and AWS, what a person or an agent typed) goes through one of these before it is put in mrkdwn, so it
// can never become a live mention, link or channel ping, nor break out of the code span it is shown in. Each
// redacts it first (SetRedactor), while it is still the raw text the secrets and patterns are written for.

// mrkdwnEscaper escapes the three characters Slack's mrkdwn gives meaning to: with < and > escaped no
// <@U…>, <!channel>, <#C…> or <https://…|…> can form.
var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// maxInline is how much of one outside value is shown inline (a name, an image, a reason); the rest is cut.
const maxInline = 200

// esc redacts and escapes outside text for mrkdwn, keeping its lines.
func esc(s string) string { return escRedacted(redactOutside(s)) }

func escRedacted(s string) string { return mrkdwnEscaper.Replace(stripControls(s, true)) }

// escLine escapes outside text for one line of mrkdwn: newlines become spaces and it is cut at maxInline.
func escLine(s string) string { return escRedacted(clip(oneLine(redactOutside(s)), maxInline)) }

// escText escapes a message's plain text (what notifications show), cut to what a section holds.
func escText(s string) string { return escRedacted(clip(redactOutside(s), maxSectionText)) }

// code renders an outside value as an inline code span: escaped, on one line, cut at maxInline, and with its
// backticks replaced by a look-alike so it cannot close the span and let the rest render as mrkdwn.
func code(s string) string {
	s = clip(oneLine(redactOutside(s)), maxInline)
	if s == "" {
		return "–"
	}
	return "`" + mrkdwnEscaper.Replace(strings.ReplaceAll(s, "`", "ˋ")) + "`"
}

// codeBlock renders outside text (a manifest, a log) as a preformatted block that a ``` inside cannot close.
func codeBlock(s string) string {
	s = stripControls(redactOutside(s), true)
	s = strings.ReplaceAll(s, "```", "ˋˋˋ")
	return "```" + mrkdwnEscaper.Replace(s) + "```"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(stripControls(s, false)), " ")
}

// stripControls drops control characters (they can reorder or hide text), keeping newlines and tabs if asked.
func stripControls(s string, keepLines bool) string {
	return strings.Map(func(r rune) rune {
		switch {
		case keepLines && (r == '\n' || r == '\t'):
			return r
		case r == '\n' || r == '\t' || r == '\r':
			return ' '
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			return -1
		}
		return r
	}, s)
}

// slackID reports whether s looks like a Slack user, bot or group ID, so it may go into <@…> markup.
func slackID(s string) bool {
	if len(s) < 2 || len(s) > 24 {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// mention renders a Slack user ID as a mention, or as escaped text when it is not an ID.
func mention(id string) string {
	if slackID(id) {
		return "<@" + id + ">"
	}
	return code(id)
}

// groupMention renders a Slack user group ID as a mention.
func groupMention(id string) string {
	if slackID(id) {
		return "<!subteam^" + id + ">"
	}
	return code(id)
}
