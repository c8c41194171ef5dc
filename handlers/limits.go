package handlers

import (
	"strconv"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// Slack's limits on a whole message, besides those of blocks in render.go.
const (
	// maxMessageText is the most characters of a message's top-level text chat.postMessage takes.
	maxMessageText = 40000
	// maxErrorLine is how much of one problem a reply shows: its code, field, message and next step.
	maxErrorLine = 700
)

// cappedErrors is the list a reply shows: the first ops.MaxErrors problems and a count of the rest.
func cappedErrors(errs []*ops.Error) []*ops.Error { return ops.Errors(errs).Capped() }

// errorLines renders problems one per entry within budget characters: the capped list, and when even that does
// not fit, as many as fit and a line counting the rest, so the count is never cut off.
func errorLines(errs []*ops.Error, budget int) string {
	left := 0 // the problems not shown yet
	for _, e := range errs {
		left += e.Count()
	}
	var b strings.Builder
	for i, e := range cappedErrors(errs) {
		line := clip(errorLine(e), maxErrorLine)
		if i > 0 && b.Len()+len(line)+len(moreLine(left))+2 > budget {
			b.WriteString("\n" + moreLine(left))
			break
		}
		left -= e.Count()
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(line)
	}
	return b.String()
}

func moreLine(n int) string { return "…and " + strconv.Itoa(n) + " more problems" }

// fitText clips a message's top-level text to what Slack takes.
func fitText(s string) string { return clip(s, maxMessageText) }
