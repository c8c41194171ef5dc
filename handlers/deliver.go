package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// TellEventType is the metadata event type of the messages the outbox posts: its payload names the request, the
// history entry and the part, so a post whose answer was lost can be found before it is posted again.
const TellEventType = "hyperops_tell"

// Undelivered is a message Slack refused for good (Classify: Permanent, or Rejected even as plain text).
type Undelivered struct {
	RequestID string
	Entry     int
	// Part is what the message was: "plan", "reply", "audit", "agent", "notice" (a fallback), "update".
	Part    string
	Channel string
	Method  string // the Web API method, e.g. "chat.postMessage"
	Code    string // Slack's error code
	Err     error
}

// PostedFinder finds a message the bot posted, by its metadata: in the thread threadTS of channel, or among the
// channel's latest top-level messages when threadTS is empty. The bot's Slack client implements it with
// conversations.replies / conversations.history and include_all_metadata.
type PostedFinder interface {
	FindPosted(ctx context.Context, channel, threadTS string, meta slack.SlackMetadata) (ts string, found bool, err error)
}

// errUndelivered says a part was refused for good and recorded as undelivered: the caller posts a fallback.
type errUndelivered struct{ code string }

func (e errUndelivered) Error() string { return "undeliverable: " + e.code }

// part is one message an entry posts: the plan, the thread reply, the audit line, a fallback. Its name keys what
// was posted in the refs' told counters: the part of entry i was posted (or given up) once the counter passed i.
type part struct {
	name    string
	channel string
	thread  string
	msg     Msg
	// label is what Undelivered.Part says (default name): an agent thread's part is named by its route.
	label string
	// find is the metadata a post of this part is found by, for a message that carries its own (an agent reply);
	// nil means tellMeta, which deliver then puts on the message.
	find *slack.SlackMetadata
	// from is the first entry the part tells, when it tells a run of entries ending at the one it is delivered as
	// (a thread's backlog in one reply); 0 or the entry itself for a part of one entry.
	from int
}

// tellMeta is the metadata that identifies a part of an entry.
func tellMeta(id string, i int, name string) slack.SlackMetadata {
	return slack.SlackMetadata{EventType: TellEventType, EventPayload: map[string]any{"request": id, "entry": i, "part": name}}
}

// runMeta is tellMeta for a part that tells entries from..i, which it names ("from"), so a reader of the thread or
// of a notice knows every entry it stands for.
func runMeta(id string, from, i int, name string) slack.SlackMetadata {
	m := tellMeta(id, i, name)
	if from > 0 && from < i {
		m.EventPayload["from"] = from
	}
	return m
}

// deliver posts the part of entry i once: not again once recorded, and, after an attempt whose outcome is unknown
// (a 5xx or a dropped connection after Slack posted it), only if it is not found in Slack by its metadata. A
// refusal for good is recorded as undelivered and answered with errUndelivered; a message refused for its content
// is tried once more as plain text first. Any other error is transient: the entry is retried later.
//
// found says the part was posted by an earlier attempt (ts is then where it was found, or "" when it was recorded
// as posted): what it shows is that attempt's.
func (tl *Teller) deliver(ctx context.Context, rec *ops.Record, i int, p part) (ts string, found bool, err error) {
	h := tl.h
	id := rec.ID()
	if n, _, err := h.refs.Told(ctx, id, p.name); err != nil {
		return "", false, fmt.Errorf("read what was posted of %s: %w", id, err)
	} else if n > i {
		return "", true, nil
	}
	meta := runMeta(id, p.from, i, p.name)
	if p.find != nil {
		meta = *p.find
	}
	tried, _, err := h.refs.Told(ctx, id, p.name+"/try")
	if err != nil {
		return "", false, fmt.Errorf("read what was tried of %s: %w", id, err)
	}
	recorded := false // this call recorded the attempt
	if tried > i && h.finder != nil {
		ts, err := tl.findByMeta(ctx, rec, p.name, p.channel, p.thread, meta)
		if err != nil {
			return "", false, err
		}
		if ts != "" {
			return ts, true, tl.posted(ctx, id, i, p.name)
		}
	} else if err := h.refs.SetTold(ctx, id, p.name+"/try", i+1); err != nil {
		return "", false, fmt.Errorf("record an attempt for %s: %w", id, err)
	} else {
		recorded = true
	}
	m := p.msg
	if m.Metadata == nil {
		m.Metadata = &meta
	}
	m.ThreadTS = p.thread
	ts, err = h.poster.Post(ctx, p.channel, m)
	if errors.Is(err, engine.ErrSuperseded) {
		// Given up before it was sent, for newer entries: the attempt is taken back, so the next one tells a run
		// of its own (the backlog with them) instead of repeating this one.
		if recorded {
			if rerr := h.refs.SetTold(ctx, id, p.name+"/try", tried); rerr != nil {
				return "", false, fmt.Errorf("take back an attempt for %s: %w", id, rerr)
			}
		}
		return "", false, fmt.Errorf("post the %s of %s: %w", p.name, id, err)
	}
	if Classify(err) == Rejected {
		err = sendPlain(rec, m, func(v Msg) error {
			var perr error
			ts, perr = h.poster.Post(ctx, p.channel, v)
			return perr
		})
	}
	if err == nil {
		return ts, false, tl.posted(ctx, id, i, p.name)
	}
	if Classify(err) == Transient {
		return "", false, fmt.Errorf("post the %s of %s: %w", p.name, id, err)
	}
	label := p.label
	if label == "" {
		label = p.name
	}
	tl.undelivered(Undelivered{RequestID: id, Entry: i, Part: label, Channel: p.channel, Method: "chat.postMessage",
		Code: SlackCode(err), Err: err})
	if err := tl.posted(ctx, id, i, p.name); err != nil {
		return "", false, err
	}
	return "", false, errUndelivered{code: SlackCode(err)}
}

func (tl *Teller) posted(ctx context.Context, id string, i int, name string) error {
	if err := tl.h.refs.SetTold(ctx, id, name, i+1); err != nil {
		return fmt.Errorf("record the %s of %s: %w", name, id, err)
	}
	return nil
}

func (tl *Teller) undelivered(u Undelivered) {
	if f := tl.h.cfg.OnUndelivered; f != nil {
		f(u)
	}
}

// refused reports whether err is a refusal for good (already recorded), and Slack's code.
func refused(err error) (string, bool) {
	var u errUndelivered
	if errors.As(err, &u) {
		return u.code, true
	}
	return "", false
}

// fallback tells the requester that a message about their request could not go where it belonged: a person in a
// direct message, an agent in its DM thread. A fallback refused in turn is only recorded.
func (tl *Teller) fallback(ctx context.Context, rec *ops.Record, i int, channel, slackCode string, m Msg) error {
	return tl.fallbackRun(ctx, rec, i, i, channel, slackCode, m)
}

// fallbackRun is fallback for a message that told entries from..i (a thread's backlog): the notice names them all.
func (tl *Teller) fallbackRun(ctx context.Context, rec *ops.Record, from, i int, channel, slackCode string, m Msg) error {
	to, thread, ok := tl.fallbackRoute(rec)
	if !ok || to == channel {
		return nil
	}
	notice := UndeliveredNotice(rec, rec.History[i], channel, slackCode, m)
	_, _, err := tl.deliver(ctx, rec, i, part{name: "notice", channel: to, thread: thread, msg: notice, from: from})
	if _, ok := refused(err); ok {
		return nil
	}
	return err
}

// fallbackRoute is where the requester hears about a message that could not be posted: a person's direct message
// (chat.postMessage to their user id), an agent's DM thread. Nobody for the system's own requests.
func (tl *Teller) fallbackRoute(rec *ops.Record) (channel, thread string, ok bool) {
	in := rec.Request.Initiator
	switch {
	case in.Kind == ops.Agent && rec.Annotations[AnnAgentChannel] != "":
		return rec.Annotations[AnnAgentChannel], rec.Annotations[AnnAgentThread], true
	case in.Kind == ops.Human && in.ID != "":
		return in.ID, "", true
	}
	return "", "", false
}

// findPosted finds the part of entry i in Slack by its metadata ("" when it is not there or cannot be looked for).
func (tl *Teller) findPosted(ctx context.Context, rec *ops.Record, i int, name, channel, thread string) (string, error) {
	return tl.findByMeta(ctx, rec, name, channel, thread, tellMeta(rec.ID(), i, name))
}

// findByMeta finds a message of the request in Slack by its metadata.
func (tl *Teller) findByMeta(ctx context.Context, rec *ops.Record, name, channel, thread string, meta slack.SlackMetadata) (string, error) {
	if tl.h.finder == nil {
		return "", nil
	}
	ts, _, err := tl.h.finder.FindPosted(ctx, channel, thread, meta)
	if err != nil && Classify(err) != Transient {
		return "", nil // the conversation cannot be read (gone, or not the bot's): posting says what Slack thinks
	}
	if err != nil {
		return "", fmt.Errorf("look for the %s of %s in Slack: %w", name, rec.ID(), err)
	}
	return ts, nil
}
