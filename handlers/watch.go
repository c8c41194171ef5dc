package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// WatchTarget is a workload a person asked to watch, as they wrote it; the bot resolves defaults and the kind.
type WatchTarget struct {
	Cluster   string
	Namespace string
	// Kind is what the person wrote (job, pytorchjob, hyperpod, deployment); "" means job.
	Kind string
	Name string
}

// WatchSubscription is where a watched object is told about. ID is the request id for a request's own workloads
// (its message is then re-rendered from the record), or a watch id for /hp watch.
type WatchSubscription struct {
	ID      string
	Channel string
	// MessageTS is the message updated in place; empty means thread replies only (an agent's DM thread).
	MessageTS string
	// ThreadTS is where replies go.
	ThreadTS string
}

// WatchChange is one status change of a watched object, as the watcher tells it.
type WatchChange struct {
	Object  ops.ObjectRef
	From    string
	To      string
	Reason  string
	Events  []string
	LogTail string
}

// Watches keeps job-watch subscriptions (the bot implements it over ops/state and the cluster clients).
type Watches interface {
	// Resolve fills the target's defaults and refuses unregistered clusters, namespaces and unknown kinds.
	Resolve(t WatchTarget) (ops.ObjectRef, error)
	// Watch subscribes sub to obj; its current state is then told like any change.
	Watch(ctx context.Context, obj ops.ObjectRef, sub WatchSubscription) error
	// Unwatch removes the subscription id from obj; false when there was none.
	Unwatch(ctx context.Context, obj ops.ObjectRef, id string) (bool, error)
}

// SetWatches enables /hp watch and /hp unwatch; without it they answer that watching is not configured.
func (h *Handler) SetWatches(w Watches) { h.watches = w }

// WatchID is the subscription id of /hp watch in a channel: one per channel and object, so unwatch finds it.
func WatchID(channel string) string { return "watch:" + channel }

// IsWatchID reports whether a subscription id came from /hp watch rather than from a request.
func IsWatchID(id string) bool { return strings.HasPrefix(id, "watch:") }

func (h *Handler) watch(ctx context.Context, inv *Invocation, who ops.Initiator, channel string) error {
	if h.watches == nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, InfoMessage("Job watching is not configured on this HyperOps."))
	}
	t := WatchTarget{Cluster: inv.Args[ArgCluster], Namespace: inv.Args[ArgNamespace], Kind: inv.Args["kind"], Name: inv.Args["job"]}
	if t.Name == "" {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(ops.Errorf(ops.CodeInvalidArgument, "job",
			"add job=<name>", "%s %s needs job=", h.cfg.Command, inv.Command.Topic)))
	}
	obj, err := h.watches.Resolve(t)
	if err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	if inv.Command.Topic == topicUnwatch {
		had, err := h.watches.Unwatch(ctx, obj, WatchID(channel))
		switch {
		case err != nil:
			return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
		case !had:
			return h.poster.Ephemeral(ctx, channel, who.ID, InfoMessage(fmt.Sprintf("%s was not watched here.", objectLabel(obj))))
		}
		_, err = h.poster.Post(ctx, channel, InfoMessage(fmt.Sprintf(":no_bell: %s stopped watching %s here.", person(who), objectLabel(obj))))
		return err
	}
	// The watch message is posted first: it is the message kept up to date, and its thread gets the replies.
	ts, err := h.poster.Post(ctx, channel, WatchMessage(obj, "", who))
	if err != nil {
		return fmt.Errorf("post the watch message: %w", err)
	}
	if err := h.watches.Watch(ctx, obj, WatchSubscription{ID: WatchID(channel), Channel: channel, MessageTS: ts, ThreadTS: ts}); err != nil {
		return h.poster.Update(ctx, channel, ts, ErrorMessage(err))
	}
	return nil
}

// Watched tells a change of a watched object to one subscription: the message is updated in place (a request's
// message keeps its plan and result and gains the workload's state) and the changes that matter get a thread reply.
func (h *Handler) Watched(ctx context.Context, sub WatchSubscription, c WatchChange) error {
	var errs []error
	if sub.MessageTS != "" {
		var m Msg
		if IsWatchID(sub.ID) {
			m = WatchMessage(c.Object, c.To, ops.Initiator{})
		} else {
			rec, err := h.engine.Get(ctx, sub.ID)
			if err != nil {
				errs = append(errs, fmt.Errorf("read request %s: %w", sub.ID, err))
			} else {
				m = WithWorkloadState(h.catalog, rec, c)
			}
		}
		if m.Text != "" {
			if err := h.poster.Update(ctx, sub.Channel, sub.MessageTS, m); err != nil {
				errs = append(errs, fmt.Errorf("update the message of %s: %w", sub.ID, err))
			}
		}
	}
	if reply, ok := WatchReply(c); ok {
		reply.ThreadTS = threadOf(sub.ThreadTS, sub.MessageTS)
		if _, err := h.poster.Post(ctx, sub.Channel, reply); err != nil {
			errs = append(errs, fmt.Errorf("reply about %s: %w", objectLabel(c.Object), err))
		}
	}
	return errors.Join(errs...)
}

var stateEmoji = map[string]string{
	"pending": ":hourglass_flowing_sand:", "suspended": ":double_vertical_bar:", "running": ":arrow_forward:",
	"completed": ":white_check_mark:", "failed": ":x:", "available": ":large_green_circle:", "progressing": ":arrows_counterclockwise:",
	"scaled-to-zero": ":zzz:", "bound": ":floppy_disk:", "deleted": ":wastebasket:",
}

func objectLabel(o ops.ObjectRef) string {
	kind := o.Kind
	if kind == "" {
		kind = "Job"
	}
	where := o.Cluster
	if o.Namespace != "" {
		where += "/" + o.Namespace
	}
	if where == "" {
		return fmt.Sprintf("%s %s", escLine(kind), code(o.Name))
	}
	return fmt.Sprintf("%s %s on %s", escLine(kind), code(o.Name), code(where))
}

// WatchMessage renders the message /hp watch keeps up to date: the object and its last state told.
func WatchMessage(obj ops.ObjectRef, state string, by ops.Initiator) Msg {
	s := ":eyes: Watching " + objectLabel(obj)
	if state != "" {
		s += " — " + stateEmoji[state] + " *" + phrase(state) + "*"
	}
	blocks := []slack.Block{section(s)}
	if by.ID != "" {
		blocks = append(blocks, contextBlock("asked by "+person(by)+" · changes are told in this thread"))
	}
	text := oneLine("watching " + obj.Kind + " " + obj.Name)
	if state != "" {
		text += ": " + state
	}
	return Msg{Text: escText(text), Blocks: blocks}
}

// WithWorkloadState renders a request's message headed by the state of the workload it made.
func WithWorkloadState(specs Specs, rec *ops.Record, c WatchChange) Msg {
	op := specOf(specs, rec)
	m := planMessage(rec, op, &c).Msg
	m.Text = escText(oneLine(fmt.Sprintf("%s %s — %s · %s: %s", stateEmoji[c.To], plainHeadline(rec, op), strings.ToLower(phaseWords[rec.Phase]), c.Object.Name, c.To)))
	return m
}

// tellsWatch reports whether a workload state gets a thread reply; the others only update the message.
func tellsWatch(c WatchChange) bool {
	switch c.To {
	case "running", "completed", "failed", "available", "scaled-to-zero", "deleted":
		return true
	case "pending":
		return c.Reason != "" // unschedulable, image pull errors: something a person should see
	}
	return false
}

// logTailLines is how many lines of a log tail a thread reply shows; the whole tail goes to a file.
const logTailLines = 20

// errorMarkers find the line a person looks for first in a failed workload's log.
var errorMarkers = []string{"error", "exception", "traceback", "out of memory", "fatal", "panic", "killed"}

// tailLines keeps the last n lines of a log and finds its most telling error line (the last one that looks like
// an error), so a reply can show it first.
func tailLines(log string, n int) (errLine string, lines []string) {
	all := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for i := len(all) - 1; i >= 0 && errLine == ""; i-- {
		low := strings.ToLower(all[i])
		for _, m := range errorMarkers {
			if strings.Contains(low, m) {
				errLine = strings.TrimSpace(all[i])
				break
			}
		}
	}
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return errLine, all
}

// WatchReply renders the thread reply for a change of a watched object: the new state, why, recent events and,
// for finished workloads, the error line and the end of the log.
func WatchReply(c WatchChange) (Msg, bool) {
	if !tellsWatch(c) {
		return Msg{}, false
	}
	head := fmt.Sprintf("%s %s is *%s*", stateEmoji[c.To], objectLabel(c.Object), phrase(c.To))
	if c.Reason != "" {
		head += ": " + escLine(c.Reason)
	}
	blocks := []slack.Block{section(head)}
	if len(c.Events) > 0 {
		ev := make([]string, 0, len(c.Events))
		for _, e := range c.Events {
			ev = append(ev, "• "+escLine(e))
		}
		blocks = append(blocks, contextBlock(strings.Join(ev, "\n")))
	}
	if tail := strings.TrimSpace(c.LogTail); tail != "" {
		errLine, lines := tailLines(tail, logTailLines)
		s := fmt.Sprintf("*Last %s of the log*", plural(int64(len(lines)), "line", "lines"))
		if errLine != "" && c.To == "failed" {
			s = "*Error* " + code(errLine) + "\n" + s
		}
		blocks = append(blocks, section(s+"\n"+codeBlock(clip(strings.Join(lines, "\n"), maxLogTail))))
	}
	text := oneLine(fmt.Sprintf("%s %s: %s", c.Object.Kind, c.Object.Name, c.To))
	if c.Reason != "" {
		text += " (" + oneLine(c.Reason) + ")"
	}
	return Msg{Text: escText(text), Blocks: blocks}, true
}

// maxLogTail bounds the log lines shown in a reply, in characters.
const maxLogTail = 2500
