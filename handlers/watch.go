package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Watches keeps job-watch subscriptions (engine.Watches implements it).
type Watches interface {
	// Resolve fills the target's defaults and refuses unregistered clusters, namespaces and unknown kinds.
	Resolve(t ops.WatchTarget) (ops.ObjectRef, error)
	// Watch subscribes sub to obj; its current state is then told like any change.
	Watch(ctx context.Context, obj ops.ObjectRef, sub ops.WatchSubscription) error
	// Unwatch removes the subscription id from obj; false when there was none.
	Unwatch(ctx context.Context, obj ops.ObjectRef, id string) (bool, error)
}

// WatchID is the subscription id of /hp watch in a channel: one per channel and object, so unwatch finds it.
func WatchID(channel string) string { return "watch:" + channel }

// WatchRequest names the request whose workload a change is about: the request the object's label names, else
// the request the subscription was made for. A subscription's first state is told from a read of the cluster
// (engine.Watches catch-up), which carries no label: a job already running when its request was told succeeded is
// still its request's. "" for a person's /hp watch of an object HyperOps did not make.
func WatchRequest(sub ops.WatchSubscription, c ops.WatchChange) string {
	if c.RequestID != "" || IsWatchID(sub.ID) {
		return c.RequestID
	}
	return strings.TrimSuffix(sub.ID, agentSubSuffix)
}

// agentSubSuffix marks the subscription of an agent's DM thread to its request's workload (watchResult).
const agentSubSuffix = "#agent"

// IsWatchID reports whether a subscription id came from /hp watch rather than from a request.
func IsWatchID(id string) bool { return strings.HasPrefix(id, "watch:") }

func (h *Handler) watch(ctx context.Context, inv *Invocation, who ops.Initiator, channel string) error {
	if h.watches == nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, InfoMessage("Job watching is not configured on this HyperOps."))
	}
	t := ops.WatchTarget{Cluster: inv.Args[ArgCluster], Namespace: inv.Args[ArgNamespace], Kind: inv.Args["kind"], Name: inv.Args["job"]}
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
	if err := h.watches.Watch(ctx, obj, ops.WatchSubscription{ID: WatchID(channel), Channel: channel, Message: ts, Thread: ts}); err != nil {
		return h.poster.Update(ctx, channel, ts, ErrorMessage(err))
	}
	return nil
}

// Records reads the record of a request (the engine's Get).
type Records interface {
	Get(ctx context.Context, id string) (*ops.Record, error)
}

// WatchTeller tells the changes of watched objects in Slack (engine.WatchSink). It stands apart from the Handler, so
// the protocol that calls it (engine.Watches) and the Handler that subscribes through that protocol need no pointer
// back to each other.
type WatchTeller struct {
	specs   Specs
	records Records
	told    WorkloadStates
	poster  Poster
}

var _ engine.WatchSink = (*WatchTeller)(nil)

// NewWatchTeller returns the teller of watched objects, posting with poster as the Handler built from cfg does;
// specs are the operations' facts its request messages are drawn with, and cfg.Workloads the states last told of
// the workloads they show.
func NewWatchTeller(cfg Config, specs Specs, records Records, poster Poster) *WatchTeller {
	return &WatchTeller{specs: specs, records: records, told: cfg.Workloads, poster: commandPoster{poster, commandOf(cfg)}}
}

// Watched tells a change of a watched object to one subscription: the message is updated in place (a request's
// message keeps its plan and result and gains the workload's state) and the changes that matter get a thread reply.
//
// A request's workload that fails is told to its requester by a reply that mentions them (an edit notifies nobody).
func (w *WatchTeller) Watched(ctx context.Context, sub ops.WatchSubscription, c ops.WatchChange) error {
	var errs []error
	var rec *ops.Record
	switch {
	case sub.Message == "":
	case IsWatchID(sub.ID):
		if err := w.poster.Update(ctx, sub.Channel, sub.Message, WatchMessage(c.Object, c.To, ops.Initiator{})); err != nil {
			errs = append(errs, fmt.Errorf("update the message of %s: %w", sub.ID, err))
		}
	default:
		var err error
		if rec, err = w.showRequest(ctx, sub, c); err != nil {
			errs = append(errs, err)
		}
	}
	if reply, ok := WatchReply(c); ok {
		if rec != nil && c.To == "failed" {
			reply = failedWorkloadReply(rec, c)
		}
		reply.ThreadTS = threadOf(sub.Thread, sub.Message)
		if _, err := w.poster.Post(ctx, sub.Channel, reply); err != nil {
			errs = append(errs, fmt.Errorf("reply about %s: %w", objectLabel(c.Object), err))
		}
	}
	return errors.Join(errs...)
}

// showRequest updates a request's message to its record and its workloads' states (RequestMessage), then reads
// both again: when the outcome or another state landed meanwhile, it draws the message again, so the last update
// shows the final state whichever of the outcome's and the workload's updates came last.
func (w *WatchTeller) showRequest(ctx context.Context, sub ops.WatchSubscription, c ops.WatchChange) (*ops.Record, error) {
	var shown *ops.Record
	var shownStates []string
	for range redrawMax {
		rec, err := w.records.Get(ctx, sub.ID)
		if err != nil {
			return shown, fmt.Errorf("read request %s: %w", sub.ID, err)
		}
		states := toldStates(ctx, w.told, rec, &c)
		if shown != nil && shown.Version == rec.Version && slices.Equal(shownStates, states) {
			return rec, nil
		}
		m := RequestMessage(w.specs, rec, states).Msg
		err = w.poster.Update(ctx, sub.Channel, sub.Message, m)
		if Classify(err) == Rejected {
			// Refused for its blocks or length, as the teller's updates may be: the plain versions say the same.
			err = sendPlain(rec, m, func(v Msg) error { return w.poster.Update(ctx, sub.Channel, sub.Message, v) })
		}
		if err != nil {
			return rec, fmt.Errorf("update the message of %s: %w", sub.ID, err)
		}
		shown, shownStates = rec, states
	}
	return shown, nil
}

// redrawMax bounds how often one telling draws a message again because what it shows changed under it.
const redrawMax = 3

// toldStates reads the last state told of each workload rec watches, in rec.Result.Watch order ("" for one not
// told, or unread); c, when set, is a change being told now, which stands for its object's state when the read
// finds nothing newer. Nil when rec watches nothing or nothing reads the states.
func toldStates(ctx context.Context, told WorkloadStates, rec *ops.Record, c *ops.WatchChange) []string {
	if !watches(rec) {
		return nil
	}
	states := make([]string, len(rec.Result.Watch))
	for i, obj := range rec.Result.Watch {
		if told != nil {
			states[i], _ = told.LastTold(ctx, obj)
		}
		if states[i] == "" && c != nil && c.Object == obj {
			states[i] = c.To
		}
	}
	return states
}

// watchResult subscribes the messages of a request that succeeded to the objects its result asks to watch: the
// plan message is updated in place and replied to, an agent's DM thread gets replies.
func (h *Handler) watchResult(ctx context.Context, rec *ops.Record) error {
	if h.watches == nil || rec.Result == nil || len(rec.Result.Watch) == 0 {
		return nil
	}
	refs, err := h.refs.List(ctx, rec.ID())
	if err != nil {
		return fmt.Errorf("list the messages of %s: %w", rec.ID(), err)
	}
	var errs []error
	for _, obj := range rec.Result.Watch {
		for _, ref := range refs {
			sub := ops.WatchSubscription{ID: rec.ID(), Channel: ref.Channel, Message: ref.TS, Thread: ref.TS}
			if ref.Kind == RefAgent {
				// One subscription per id and object: the agent's thread gets its own, for replies only.
				sub = ops.WatchSubscription{ID: rec.ID() + agentSubSuffix, Channel: ref.Channel, Thread: ref.ThreadTS}
			}
			errs = append(errs, h.watches.Watch(ctx, obj, sub))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("watch the workloads of %s: %w", rec.ID(), err)
	}
	return nil
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

// tellsWatch reports whether a workload state gets a thread reply; the others only update the message.
func tellsWatch(c ops.WatchChange) bool {
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
func WatchReply(c ops.WatchChange) (Msg, bool) {
	if !tellsWatch(c) {
		return Msg{}, false
	}
	blocks := []slack.Block{section(watchHead(c))}
	var ev []string
	if failureWords(c) != "" {
		ev = append(ev, "• "+kubeSaid(c)) // the words above say it; what Kubernetes said stays, to search for
	}
	for _, e := range c.Events {
		ev = append(ev, "• "+escLine(e))
	}
	if len(ev) > 0 {
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
	if words := failureWords(c); words != "" {
		text += ": " + words
	} else if c.Reason != "" {
		text += " (" + oneLine(c.Reason) + ")"
	}
	return Msg{Text: escText(text), Blocks: blocks}, true
}

// watchHead is the first line of a watch reply: the object, its new state and why, in words when HyperOps knows
// how to say its reason.
func watchHead(c ops.WatchChange) string {
	head := fmt.Sprintf("%s %s is *%s*", stateEmoji[c.To], objectLabel(c.Object), phrase(c.To))
	if words := failureWords(c); words != "" {
		return head + ": " + words
	}
	if c.Reason != "" {
		head += ": " + escLine(c.Reason)
	}
	return head
}

// maxLogTail bounds the log lines shown in a reply, in characters.
const maxLogTail = 2500
