package handlers

import (
	"context"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// A thread that fell behind (twenty requests sharing a channel's one post a second, Slack down for a while) is told
// its backlog in one reply instead of one per entry: the latest entry first, in its own words and with its
// mentions, then what happened before it. The reply is posted as the part of the run's last entry, so the entries
// it covers are told once, and an attempt whose answer was lost is found, or repeated, with the same run (its
// "reply/try" counter says where the run ended).

// maxCoalesced bounds the entries one reply tells: the latest entry's blocks and one line for each before it.
const maxCoalesced = 10

// replyKind is how an entry is told in the thread.
type replyKind int

const (
	replySilent  replyKind = iota // nothing to tell in the thread
	replyPlain                    // an ordinary reply, which a backlog tells together with its neighbours
	replySpecial                  // told its own way (a reminder, an escalation, break-glass): never coalesced
)

// replyOf is the thread reply of entry i, and how it is told.
func replyOf(rec *ops.Record, i int) (Msg, replyKind) {
	t := rec.History[i]
	switch t.Kind {
	case ops.KindStep:
		return Msg{}, replySilent
	case ops.KindProgress:
		return ProgressReply(rec, t.Note), replyPlain
	case ops.KindReminder, ops.KindEscalation:
		if rec.Phase != ops.PhaseAwaitingApproval {
			return Msg{}, replySilent // decided since: nobody is left to remind or ask
		}
		return Msg{}, replySpecial
	case ops.KindBreakGlassAck:
		return Msg{}, replySpecial
	case ops.KindGrantRevoked:
		return GrantRevokedReply(t), replyPlain
	}
	if rec.BrokeAt(i) {
		return Msg{}, replySpecial
	}
	m, ok := TransitionReply(atEntry(rec, t), t)
	if !ok {
		return Msg{}, replySilent
	}
	return m, replyPlain
}

// replyRun is the plain replies of entries i..last told as one: the run an earlier attempt began (tried, the
// "reply/try" counter, past i), or else the backlog from i up to the first entry told its own way, a terminal
// phase, or maxCoalesced replies.
func replyRun(rec *ops.Record, i, tried int) (msgs []Msg, last int) {
	m, _ := replyOf(rec, i)
	msgs, last = []Msg{m}, i
	end := len(rec.History) - 1
	if tried > i {
		end = min(tried-1, end) // repeat exactly what the attempt whose answer was lost sent
	}
	for k := i + 1; k <= end && (tried > i || len(msgs) < maxCoalesced); k++ {
		if tried <= i && rec.History[k-1].Kind == ops.KindPhase && rec.History[k-1].To.Terminal() {
			break
		}
		m, kind := replyOf(rec, k)
		if kind == replySpecial && tried <= i {
			break
		}
		if kind == replyPlain {
			msgs = append(msgs, m)
		}
		last = k
	}
	if tried <= i {
		last = trimSilent(rec, i, last)
	}
	return msgs, last
}

// trimSilent ends a fresh run at its last entry with a reply: silent entries after it are told on their own (as
// nothing), so a run never claims an entry it says nothing of.
func trimSilent(rec *ops.Record, i, last int) int {
	for last > i {
		if _, kind := replyOf(rec, last); kind == replyPlain {
			break
		}
		last--
	}
	return last
}

// coalesced is one reply telling msgs (oldest first): the latest message as it is, so its mentions lead and its
// text is what a notification shows, then a line for each earlier one. The text holds each message's text on a
// line of its own, the latest first, mentions kept: an earlier outcome's mention was never posted on its own.
func coalesced(msgs []Msg) Msg {
	latest := msgs[len(msgs)-1]
	if len(msgs) == 1 {
		return latest
	}
	texts := []string{latest.Text}
	lines := make([]string, 0, len(msgs)-1)
	for _, m := range msgs[:len(msgs)-1] {
		texts = append(texts, m.Text)
		lines = append(lines, "• "+blockLine(m))
	}
	blocks := append([]slack.Block{}, latest.Blocks...)
	blocks = append(blocks, contextBlock("Before that:\n"+strings.Join(lines, "\n")))
	return Msg{Text: strings.Join(texts, "\n"), Blocks: blocks, Background: latest.Background}
}

// blockLine is what a one-block reply says, on one line (its text when it has no block).
func blockLine(m Msg) string {
	for _, b := range m.Blocks {
		switch b := b.(type) {
		case *slack.SectionBlock:
			if b.Text != nil {
				return oneLine(b.Text.Text)
			}
		case *slack.ContextBlock:
			for _, e := range b.ContextElements.Elements {
				if t, ok := e.(*slack.TextBlockObject); ok {
					return oneLine(t.Text)
				}
			}
		}
	}
	return escText(oneLine(m.Text))
}

// tellPlain posts the thread reply of entry i, with the backlog after it (replyRun), and returns the last entry it
// told. A thread that refuses it for good sends it to the requester.
func (tl *Teller) tellPlain(ctx context.Context, rec *ops.Record, i int, plan MessageRef) (last int, err error) {
	tried, _, err := tl.h.refs.Told(ctx, rec.ID(), "reply/try")
	if err != nil {
		return i, err
	}
	msgs, last := replyRun(rec, i, tried)
	m := coalesced(msgs)
	t := rec.History[last]
	// An outcome is what the requester waits for; the steps before it give Slack's limits to those who wait.
	m.Background = t.Kind != ops.KindPhase || !t.To.Terminal() && !needsRequester(t.To)
	ts, _, err := tl.deliver(ctx, rec, last, part{name: "reply", channel: plan.Channel, thread: plan.TS, msg: m, from: i})
	if slackCode, ok := refused(err); ok {
		return last, tl.fallbackRun(ctx, rec, i, last, plan.Channel, slackCode, m)
	}
	if err != nil {
		return last, err
	}
	if ts != "" && t.Kind == ops.KindPhase && rec.Result != nil && (t.To == ops.PhaseSucceeded || t.To == ops.PhaseFailed || t.To == ops.PhaseInterrupted) {
		return last, tl.uploadFiles(ctx, rec, last, plan.Channel, plan.TS, resultFiles(PlanMessage(tl.h.catalog, rec).Files))
	}
	return last, nil
}
