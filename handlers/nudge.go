package handlers

import (
	"context"
	"fmt"
	"slices"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// A rule's reminder and escalation (ops.KindReminder, ops.KindEscalation entries, recorded once by the sweep) are
// told like any entry, once across replicas by the outbox, each as a new message that mentions who must act: an
// edit would notify nobody. A request decided (or expired, cancelled) by the time its entry is told gets neither:
// nobody has anything left to do.

// ReminderReply renders the thread reply of a reminder: the approvers who have not voted (as the sweep resolved
// them, else the group's user groups and the listed users who have not voted), how far the quorum is and until when.
func ReminderReply(rec *ops.Record, t ops.Transition) Msg {
	a := rec.Approval
	who := reminded(rec)
	what := fmt.Sprintf(":bell: *Reminder*: this request still needs %s (%d of %d so far)",
		plural(int64(a.Required-a.Received()), "more approval", "more approvals"), a.Received(), a.Required)
	if !a.ExpiresAt.IsZero() {
		what += "; it expires " + slackTime(a.ExpiresAt)
	}
	body := what + ".\n→ Review the plan above, then *Approve* or *Deny…* it there."
	if len(who) == 0 {
		body += " " + approverMentions(a) + " may decide."
	}
	text := fmt.Sprintf("%s: waits for your approval (%d of %d)", rec.ID(), a.Received(), a.Required)
	return addressed(who, escText(text), body)
}

// reminded are the mentions a reminder starts with.
func reminded(rec *ops.Record) []string {
	a := rec.Approval
	var out []string
	if len(a.RemindUsers) > 0 {
		for _, u := range a.RemindUsers {
			if slackID(u) && !voted(rec, u) {
				out = append(out, mention(u))
			}
		}
		return out
	}
	return append(out, yetToVote(rec, a.ApproverUserGroups, a.ApproverUsers)...)
}

// yetToVote are the mentions of an approver group: its user groups, then its listed users but the requester and
// those who voted already.
func yetToVote(rec *ops.Record, userGroups, users []string) []string {
	var out []string
	for _, g := range userGroups {
		if slackID(g) {
			out = append(out, groupMention(g))
		}
	}
	for _, u := range users {
		if slackID(u) && u != rec.Request.Initiator.ID && !voted(rec, u) {
			out = append(out, mention(u))
		}
	}
	return out
}

func voted(rec *ops.Record, id string) bool {
	return slices.ContainsFunc(rec.Approval.Votes, func(v ops.Vote) bool {
		return v.Voter.ID == id && v.PlanHash == rec.Approval.PlanHash
	})
}

// escalatedTo are the mentions of the group a request was escalated to: its user groups, then its listed users
// (but the requester, and those who voted already).
func escalatedTo(rec *ops.Record) []string {
	return yetToVote(rec, rec.Approval.EscalateUserGroups, rec.Approval.EscalateUsers)
}

// waited is how long the request has waited for approval when entry t was recorded.
func waited(rec *ops.Record, t ops.Transition) string {
	for i := len(rec.History) - 1; i >= 0; i-- {
		h := rec.History[i]
		if h.Kind == ops.KindPhase && h.To == ops.PhaseAwaitingApproval && h.From != ops.PhaseAwaitingApproval {
			return duration(t.At.Sub(h.At))
		}
	}
	return duration(t.At.Sub(rec.CreatedAt))
}

// EscalationMessage renders the new message in the approvals channel that asks the second group: its members
// mentioned first, why they are asked (how long it waited for which group, named without a mention: they were
// reminded already; how far the quorum is), then the request's message itself, with its Approve and Deny…
// buttons. The outbox keeps it up to date like the plan message.
func EscalationMessage(specs Specs, rec *ops.Record, t ops.Transition) Msg {
	a := rec.Approval
	plan := PlanMessage(specs, rec).Msg
	lead := fmt.Sprintf(":rotating_light: *Escalated to %s*: this request has waited %s for %s (%d of %d approvals so far). "+
		"You may approve or deny it now; your vote counts towards the same quorum.",
		code(a.EscalateTo), waited(rec, t), code(a.Approvers), a.Received(), a.Required)
	m := addressed(escalatedTo(rec), plan.Text, lead)
	m.Blocks = append(m.Blocks, plan.Blocks...)
	m.Blocks = capBlocks(m.Blocks)
	m.Version = plan.Version
	return m
}

// EscalationReply renders the request thread's note of an escalation: who was asked, and where.
func EscalationReply(rec *ops.Record, channel string) Msg {
	a := rec.Approval
	s := fmt.Sprintf(":rotating_light: *Escalated* to %s in <#%s>: its members may now approve or deny (%d of %d so far).",
		code(a.EscalateTo), channel, a.Received(), a.Required)
	return Msg{Text: escText(fmt.Sprintf("%s: escalated to %s", rec.ID(), a.EscalateTo)), Blocks: []slack.Block{section(s)}}
}

// escalate tells an escalation: the new message in the approvals channel (remembered as a plan message, so Settle
// keeps its buttons and state current and its clicks count), then the note in the request's thread. Each is
// posted once (deliver); an escalation message posted by an attempt whose answer was lost is found by its
// metadata, not posted again.
func (tl *Teller) escalate(ctx context.Context, rec *ops.Record, i int, t ops.Transition, plan MessageRef) error {
	h := tl.h
	channel := h.cfg.ApprovalsChannel
	if channel == "" {
		channel = plan.Channel
	}
	m := EscalationMessage(h.catalog, rec, t)
	ts, found, err := tl.deliver(ctx, rec, i, part{name: "escalation", channel: channel, msg: m})
	if _, ok := refused(err); ok {
		return nil // recorded as undelivered; the thread note below still says who was asked
	}
	if err != nil {
		return err
	}
	if found && ts == "" {
		ts, err = tl.findPosted(ctx, rec, i, "escalation", channel, "")
		if err != nil {
			return err
		}
	}
	if ts != "" && !h.isPlanMessage(ctx, rec.ID(), channel, ts) {
		if err := h.refs.Add(ctx, rec.ID(), MessageRef{Kind: RefPlan, Channel: channel, TS: ts}); err != nil {
			return fmt.Errorf("remember the escalation of %s: %w", rec.ID(), err)
		}
	}
	reply := EscalationReply(rec, channel)
	reply.Background = true
	_, _, err = tl.deliver(ctx, rec, i, part{name: "reply", channel: plan.Channel, thread: plan.TS, msg: reply})
	if _, ok := refused(err); ok {
		return nil
	}
	return err
}
