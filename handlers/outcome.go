package handlers

import (
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// Slack notifies nobody of a mention that an edit adds, so the outcomes a requester must hear of go as a new thread
// reply that mentions them first: what happened, then what to do next. The plan message is still updated in place,
// for whoever looks at it. The outbox posts each reply once per transition (deliver), the job watch once per state
// (engine.Watches), whichever replica tells it.

// needsRequester reports whether a phase is an outcome its requester must hear of: it failed, expired or was denied,
// or it waits for a person's choice (interrupted: Take over, then Resume or Stop).
func needsRequester(p ops.Phase) bool {
	switch p {
	case ops.PhaseFailed, ops.PhaseExpired, ops.PhaseDenied, ops.PhaseInterrupted:
		return true
	}
	return false
}

// addressees are the mentions an outcome reply starts with: the request's owner and its requester, when they are
// people (an agent hears in its own DM thread). An interrupted request nobody can answer for (an agent's) asks its
// approvers, who may take it over.
func addressees(rec *ops.Record, phase ops.Phase) []string {
	var out []string
	seen := map[string]bool{}
	for _, who := range []ops.Initiator{rec.Owner, rec.Request.Initiator} {
		if who.Kind == ops.Human && slackID(who.ID) && !seen[who.ID] {
			seen[who.ID] = true
			out = append(out, mention(who.ID))
		}
	}
	if len(out) > 0 || phase != ops.PhaseInterrupted {
		return out
	}
	for _, g := range rec.Approval.ApproverUserGroups {
		if slackID(g) {
			out = append(out, groupMention(g))
		}
	}
	for _, u := range rec.Approval.ApproverUsers {
		if slackID(u) {
			out = append(out, mention(u))
		}
	}
	return out
}

// addressed puts the mentions in front of a reply: in its blocks, and in its plain text (escaped by the caller),
// which is what the notification shows.
func addressed(who []string, text, body string) Msg {
	lead := ""
	if len(who) > 0 {
		lead = strings.Join(who, " ") + " "
	}
	return Msg{Text: lead + text, Blocks: []slack.Block{section(lead + body)}}
}

// Unaddressed is a reply's text without the mentions an outcome reply starts with: what a reader (or a test)
// compares when it looks for the reply of a request.
func Unaddressed(text string) string {
	for strings.HasPrefix(text, "<@") || strings.HasPrefix(text, "<!subteam^") {
		end := strings.Index(text, "> ")
		if end < 0 {
			return text
		}
		text = text[end+2:]
	}
	return text
}

// outcomeReply renders the thread reply of an outcome its requester must hear of (needsRequester).
func outcomeReply(rec *ops.Record, t ops.Transition) Msg {
	what, next := outcomeWords(rec, t)
	body := phaseEmoji[t.To] + " " + what
	if next != "" {
		body += "\n→ " + next
	}
	text := fmt.Sprintf("%s: %s", rec.ID(), strings.ToLower(phaseWords[t.To]))
	if n := len(rec.Errors); t.To == ops.PhaseFailed && n > 0 {
		text += ": " + oneLine(rec.Errors[n-1].Message)
	}
	return addressed(addressees(rec, t.To), escText(text), body)
}

// outcomeWords says what happened and what to do next, in the reader's terms.
func outcomeWords(rec *ops.Record, t ops.Transition) (what, next string) {
	switch t.To {
	case ops.PhaseExpired:
		a := rec.Approval
		what = fmt.Sprintf("*Expired*: nobody approved it in time (%d of %d approvals", a.Received(), a.Required)
		if !a.ExpiresAt.IsZero() {
			what += " by " + slackTime(a.ExpiresAt)
		}
		what += "). Nothing was changed."
		if in := rec.Request.Initiator; in.Kind == ops.Agent {
			return what, person(in) + " was told in its own thread, and may send the request again."
		}
		next = "To go ahead, send the command again (with a new `request-id=` if you gave one)"
		if who := approverMentions(a); who != "" {
			next += " and ask " + strings.Replace(who, " and ", " or ", 1) + " to approve it in time"
		}
		return what, next + "."
	case ops.PhaseDenied:
		what, next = "*Denied*. Nothing was changed.", "Change the request and send it again."
		if v, ok := lastVote(rec, false); ok {
			what = "*Denied* by " + mention(v.Voter.ID)
			if v.Reason != "" {
				what += ": _" + escLine(v.Reason) + "_"
			}
			what += ". Nothing was changed."
			next = "Ask " + mention(v.Voter.ID) + " what would be approved, or change the request and send it again."
		}
		return what, next
	case ops.PhaseInterrupted:
		what = "*" + phaseWords[t.To] + "*"
		if t.By.Kind != ops.System && t.By.ID != "" {
			what += " by " + person(t.By)
		}
		found := "HyperOps could not tell whether the change was made."
		if rec.Result != nil && rec.Result.Summary != "" {
			found = "HyperOps checked and found: " + escLine(rec.Result.Summary) + "."
		}
		return what + ". " + found, "*Take over* on the request's message makes it yours; then *Resume* plans it " +
			"again against what is there now, or *Stop* closes it without running anything more."
	}
	// Failed: the last error says why, and its next step what to do.
	what, next = "*Failed*", esc(ops.Ask("request show id="+rec.ID()))+" shows what ran."
	if n := len(rec.Errors); n > 0 {
		e := rec.Errors[n-1]
		what += ": " + escLine(e.Message)
		if e.Next != "" {
			next = esc(clip(e.Next, 600))
		}
	}
	return what, next
}

// failedWorkloadReply renders the thread reply of a request whose workload failed: the requester's mention first,
// the workload and why it failed in words, then the error line and the end of the log as WatchReply shows them.
func failedWorkloadReply(rec *ops.Record, c ops.WatchChange) Msg {
	m, _ := WatchReply(c)
	body := "\n→ Fix what failed and submit it again; the error and the last lines of the log are below."
	if strings.TrimSpace(c.LogTail) == "" {
		body = "\n→ Fix what failed and submit it again; " + esc(ops.Ask("request show id="+rec.ID())) + " shows the request."
	}
	who := addressees(rec, ops.PhaseFailed)
	out := addressed(who, m.Text, watchHead(c)+body)
	out.Blocks = append(out.Blocks, m.Blocks[1:]...)
	return out
}
