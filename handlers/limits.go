package handlers

import (
	"encoding/json"
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
	// maxAgentBody is the most JSON an agent reply carries (in its text and again as metadata); a larger body is cut
	// down to what fits (see fitAgentBody).
	maxAgentBody = 30000
	// maxIDEcho is how much of a request id is repeated back: valid ids have at most 128 characters.
	maxIDEcho = 130
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

// fitAgentBody keeps an agent reply's body inside Slack's limits: every problem clipped, at most the capped list,
// and when the body is still too large (a huge result), the result's data and output are left out with a note
// saying so, since the agent can read them again with get-request.
func fitAgentBody(b AgentReplyBody) AgentReplyBody {
	b.RequestID = clip(b.RequestID, maxIDEcho)
	if len(b.Errors) > ops.MaxErrors+1 {
		rest := 0
		for _, e := range b.Errors[ops.MaxErrors:] {
			rest += max(e.Omitted, 1)
		}
		b.Errors = append(b.Errors[:ops.MaxErrors:ops.MaxErrors], AgentError{Code: b.Errors[ops.MaxErrors].Code,
			Message: moreLine(rest), Next: "fix the problems above and send again to see the rest", Omitted: rest})
	}
	for i, e := range b.Errors {
		b.Errors[i] = AgentError{Code: e.Code, Field: clip(e.Field, maxIDEcho), Message: clip(e.Message, maxErrorLine),
			Next: clip(e.Next, maxErrorLine), Omitted: e.Omitted}
	}
	if js, err := json.Marshal(b); err == nil && len(js) > maxAgentBody && b.Result != nil {
		r := *b.Result
		r.Data, r.Output = nil, ""
		r.Summary = clip(r.Summary, maxErrorLine) + " (output too long for Slack: read it with get-request or " + ops.Ask("request show") + ")"
		b.Result = &r
	}
	if js, err := json.Marshal(b); err == nil && len(js) > maxAgentBody {
		b.History = nil // the last resort: the phase and errors are what the agent acts on
		if b.Plan != nil {
			p := *b.Plan
			p.Changes = nil
			b.Plan = &p
		}
	}
	return b
}
