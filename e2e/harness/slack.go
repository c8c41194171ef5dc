package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hyperops/hyperops/internal/fakeslack"
)

// Visible is what a person sees of a message: its text and every text in its blocks (button labels included),
// one per line, with Slack's escaping undone.
func Visible(text string, blocks json.RawMessage) string {
	var b strings.Builder
	b.WriteString(text)
	if len(blocks) > 0 {
		var v any
		if json.Unmarshal(blocks, &v) == nil {
			collectText(&b, v)
		}
	}
	r := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
	return r.Replace(b.String())
}

func collectText(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		if t, ok := x["text"].(string); ok {
			b.WriteString("\n")
			b.WriteString(t)
		}
		for k, c := range x {
			if k != "text" || !isString(c) {
				collectText(b, c)
			}
		}
	case []any:
		for _, c := range x {
			collectText(b, c)
		}
	}
}

func isString(v any) bool { _, ok := v.(string); return ok }

// MessageText is Visible for a recorded message.
func MessageText(m fakeslack.Message) string { return Visible(m.Text, m.Blocks) }

// containsAll reports whether s holds every want, case-insensitively.
func containsAll(s string, want []string) bool {
	ls := strings.ToLower(s)
	for _, w := range want {
		if !strings.Contains(ls, strings.ToLower(w)) {
			return false
		}
	}
	return true
}

// Slash types a slash command as user in channel and waits for its ack.
func (w *World) Slash(ctx context.Context, user, channel, text string) (fakeslack.Delivery, error) {
	d, err := w.Slack.SlashCommand(ctx, fakeslack.SlashCommand{Command: "/hp", Text: text, User: user, Channel: channel})
	if err != nil {
		return d, fmt.Errorf("/hp %s: %w", text, err)
	}
	if _, err := d.Ack(ctx); err != nil {
		return d, fmt.Errorf("/hp %s: ack: %w", text, err)
	}
	return d, nil
}

// Click presses a button on a message as user and waits for the ack; the Delivery says which connection (and so
// which replica, see ReplicaOf) handled it. Like a person, it first waits (up to Patience) until the message shows
// the button: messages are told asynchronously, so the record may be ahead of what Slack shows.
func (w *World) Click(ctx context.Context, user, channel, ts, action string) (fakeslack.Delivery, error) {
	if _, err := w.WaitMessage(ctx, Patience, channel, func(m fakeslack.Message) bool {
		return m.TS == ts && HasButton(m, action)
	}); err != nil {
		return fakeslack.Delivery{}, fmt.Errorf("click %s: the button never showed: %w", action, err)
	}
	d, err := w.Slack.ClickButton(ctx, fakeslack.Click{User: user, Channel: channel, MessageTS: ts, ActionID: action})
	if err != nil {
		return d, err
	}
	if _, err := d.Ack(ctx); err != nil {
		return d, fmt.Errorf("click %s: ack: %w", action, err)
	}
	return d, nil
}

// DM posts text in the agent's direct message with the bot, as the agent, and waits for the event's ack.
func (w *World) DM(ctx context.Context, text string) (fakeslack.Message, error) {
	m, d, err := w.Slack.PostMessage(ctx, fakeslack.Post{Channel: AgentDM, User: Agent, Text: text})
	if err != nil {
		return m, fmt.Errorf("post in %s: %w", AgentDM, err)
	}
	if _, err := d.Ack(ctx); err != nil {
		return m, fmt.Errorf("post in %s: ack: %w", AgentDM, err)
	}
	return m, nil
}

// WaitMessage waits for a message in channel (top-level or reply) matching match; the error says what the
// channel held instead.
func (w *World) WaitMessage(ctx context.Context, timeout time.Duration, channel string, match func(fakeslack.Message) bool) (fakeslack.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var found fakeslack.Message
	snap, err := w.Slack.WaitFor(ctx, func(s fakeslack.Snapshot) bool {
		for _, m := range s.Messages[channel] {
			if !m.Deleted && match(m) {
				found = m
				return true
			}
		}
		return false
	})
	if err != nil {
		return found, fmt.Errorf("%w; %s held:\n%s", err, channel, describe(snap.Messages[channel]))
	}
	return found, nil
}

// WaitText waits for a message in channel whose visible text holds every want (case-insensitive).
func (w *World) WaitText(ctx context.Context, timeout time.Duration, channel string, want ...string) (fakeslack.Message, error) {
	m, err := w.WaitMessage(ctx, timeout, channel, func(m fakeslack.Message) bool { return containsAll(MessageText(m), want) })
	if err != nil {
		return m, fmt.Errorf("no message in %s with %q: %w", channel, want, err)
	}
	return m, nil
}

// WaitReply waits for a reply in the thread of ts whose visible text holds every want.
func (w *World) WaitReply(ctx context.Context, timeout time.Duration, channel, ts string, want ...string) (fakeslack.Message, error) {
	m, err := w.WaitMessage(ctx, timeout, channel, func(m fakeslack.Message) bool {
		return m.ThreadTS == ts && m.TS != ts && containsAll(MessageText(m), want)
	})
	if err != nil {
		return m, fmt.Errorf("no reply in thread %s/%s with %q: %w", channel, ts, want, err)
	}
	return m, nil
}

// WaitInThread waits until the message at ts (as updated) or one of its replies holds every want.
func (w *World) WaitInThread(ctx context.Context, timeout time.Duration, channel, ts string, want ...string) (fakeslack.Message, error) {
	m, err := w.WaitMessage(ctx, timeout, channel, func(m fakeslack.Message) bool {
		return (m.TS == ts || m.ThreadTS == ts) && containsAll(MessageText(m), want)
	})
	if err != nil {
		return m, fmt.Errorf("thread %s/%s never showed %q: %w", channel, ts, want, err)
	}
	return m, nil
}

// WaitCurrent waits until the message at ts, as it stands now (after updates), holds every want.
func (w *World) WaitCurrent(ctx context.Context, timeout time.Duration, channel, ts string, want ...string) (fakeslack.Message, error) {
	m, err := w.WaitMessage(ctx, timeout, channel, func(m fakeslack.Message) bool {
		return m.TS == ts && containsAll(MessageText(m), want)
	})
	if err != nil {
		return m, fmt.Errorf("message %s/%s never showed %q: %w", channel, ts, want, err)
	}
	return m, nil
}

// WaitEphemeral waits for an ephemeral message to user whose visible text holds every want.
func (w *World) WaitEphemeral(ctx context.Context, timeout time.Duration, user string, want ...string) (fakeslack.Ephemeral, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var found fakeslack.Ephemeral
	snap, err := w.Slack.WaitFor(ctx, func(s fakeslack.Snapshot) bool {
		for _, e := range s.Ephemerals {
			if e.User == user && containsAll(Visible(e.Text, e.Blocks), want) {
				found = e
				return true
			}
		}
		return false
	})
	if err != nil {
		var b strings.Builder
		for _, e := range snap.Ephemerals {
			if e.User == user {
				fmt.Fprintf(&b, "- %s\n", oneLine(Visible(e.Text, e.Blocks)))
			}
		}
		return found, fmt.Errorf("no ephemeral to %s with %q: %w; it got:\n%s", user, want, err, b.String())
	}
	return found, nil
}

// HasButton reports whether the message offers a button with that action id.
func HasButton(m fakeslack.Message, action string) bool {
	// A choice is a button, or an option of the overflow menu (its value is "<action>:<request id>").
	return strings.Contains(string(m.Blocks), `"action_id":"`+action+`"`) || strings.Contains(string(m.Blocks), `"value":"`+action+`:`)
}

func describe(msgs []fakeslack.Message) string {
	if len(msgs) == 0 {
		return "(nothing)"
	}
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "- ts=%s thread=%s: %s\n", m.TS, m.ThreadTS, oneLine(MessageText(m)))
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
