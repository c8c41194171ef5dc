package handlers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// Where a request's Slack messages go is decided when the request is created and stored in its record
// (Record.Annotations), so whichever replica tells a transition posts it in the same place, and a second submit of
// the same id can never move it.
const (
	// AnnChannel and AnnThread: the plan message is posted there at the request's first entry (slash commands).
	AnnChannel = "slack.channel"
	AnnThread  = "slack.thread"
	// AnnAgentChannel and AnnAgentThread: an agent's DM thread, which gets the machine-readable replies.
	AnnAgentChannel = "slack.agent.channel"
	AnnAgentThread  = "slack.agent.thread"
	// AnnSubmission is a nonce of the call that submitted the request: a caller finding its own nonce in the
	// returned record created it, and leaves the telling to the outbox.
	AnnSubmission = "slack.submission"
)

// newSubmission returns a fresh nonce for AnnSubmission.
func newSubmission() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createdBy reports whether rec was created by the call that used nonce.
func createdBy(rec *ops.Record, nonce string) bool {
	return rec != nil && rec.Annotations[AnnSubmission] == nonce
}

// Teller tells people about requests from the engine's outbox (ops.Teller): the plan message, one thread reply per
// entry that matters, the agent's machine-readable replies, the audit line. The engine calls Tell in order, once
// per history entry across replicas, and Settle once after a run of entries.
type Teller struct {
	h *Handler
	// settled remembers the last version each plan message was updated to, and shown a digest of what it shows, so
	// a Settle with nothing new does not call Slack.
	settled sync.Map
	shown   sync.Map
}

// Teller returns the handler's outbox teller.
func (h *Handler) Teller() *Teller { return h.teller }

var _ ops.Teller = (*Teller)(nil)

// Tell implements ops.Teller.
func (tl *Teller) Tell(ctx context.Context, rec *ops.Record, i int) error {
	h := tl.h
	t := rec.History[i]
	at := atEntry(rec, t)
	refs, err := h.refs.List(ctx, rec.ID())
	if err != nil {
		return fmt.Errorf("list the messages of %s: %w", rec.ID(), err)
	}
	plan, hasPlan := findKind(refs, RefPlan)
	if !hasPlan {
		if channel, thread, ok := h.planRoute(rec, t); ok {
			_, err := tl.postPlan(ctx, rec, channel, thread)
			return err
		}
	} else if err := tl.reply(ctx, rec, at, t, plan); err != nil {
		return err
	}
	if h.cfg.AuditChannel != "" && t.Kind == ops.KindPhase {
		if _, err := h.poster.Post(ctx, h.cfg.AuditChannel, AuditLine(at, t)); err != nil {
			return fmt.Errorf("mirror %s to the audit channel: %w", rec.ID(), err)
		}
	}
	return nil
}

// atEntry is the record as it stood after entry t, for the replies that describe that entry.
func atEntry(rec *ops.Record, t ops.Transition) *ops.Record {
	if t.To == rec.Phase || t.To == "" {
		return rec
	}
	at := *rec
	at.Phase = t.To
	return &at
}

// planRoute says where a request's plan message goes, if it has not been posted: where the command was typed, or,
// for an agent's request, the approvals channel once it waits for approval.
func (h *Handler) planRoute(rec *ops.Record, t ops.Transition) (channel, thread string, ok bool) {
	if ch := rec.Annotations[AnnChannel]; ch != "" {
		return ch, rec.Annotations[AnnThread], true
	}
	if rec.Request.Initiator.Kind == ops.Agent && h.cfg.ApprovalsChannel != "" && t.Kind == ops.KindPhase &&
		t.To == ops.PhaseAwaitingApproval {
		return h.cfg.ApprovalsChannel, "", true
	}
	return "", "", false
}

// postPlan posts the plan message with the latest record and remembers it.
func (tl *Teller) postPlan(ctx context.Context, rec *ops.Record, channel, thread string) (MessageRef, error) {
	h := tl.h
	r := PlanMessage(rec)
	r.Msg.ThreadTS = thread
	ts, err := h.poster.Post(ctx, channel, r.Msg)
	if err != nil {
		return MessageRef{}, fmt.Errorf("post the plan of %s: %w", rec.ID(), err)
	}
	ref := MessageRef{Kind: RefPlan, Channel: channel, TS: ts, ThreadTS: thread}
	if err := h.refs.Add(ctx, rec.ID(), ref); err != nil {
		return ref, fmt.Errorf("remember the message of %s: %w", rec.ID(), err)
	}
	tl.settled.Store(rec.ID(), rec.Version)
	tl.shown.Store(rec.ID(), messageKey(r.Msg))
	files := planFiles(r.Files)
	if rec.Result != nil && rec.Phase.Terminal() {
		files = r.Files
	}
	if err := h.upload(ctx, channel, ts, files); err != nil {
		h.fail(err)
	}
	return ref, nil
}

// reply tells one entry in the plan message's thread.
func (tl *Teller) reply(ctx context.Context, rec, at *ops.Record, t ops.Transition, plan MessageRef) error {
	h := tl.h
	var m Msg
	switch t.Kind {
	case ops.KindStep:
		return nil
	case ops.KindProgress:
		m = ProgressReply(rec, t.Note)
	default:
		var ok bool
		if m, ok = TransitionReply(at, t); !ok {
			return nil
		}
	}
	m.ThreadTS, m.Background = plan.TS, true
	if _, err := h.poster.Post(ctx, plan.Channel, m); err != nil {
		return fmt.Errorf("reply about %s: %w", rec.ID(), err)
	}
	if t.Kind == ops.KindPhase && rec.Result != nil && (t.To == ops.PhaseSucceeded || t.To == ops.PhaseFailed || t.To == ops.PhaseInterrupted) {
		if err := h.upload(ctx, plan.Channel, plan.TS, resultFiles(PlanMessage(rec).Files)); err != nil {
			h.fail(err)
		}
	}
	return nil
}

// agentRoute is an agent thread that hears about a request: the creator's (from the record) or a follower's (a
// later caller of the same request id, from the refs).
type agentRoute struct {
	channel, thread string
	from            int
}

func (r agentRoute) key() string { return r.channel + "/" + r.thread }

func (tl *Teller) agentRoutes(rec *ops.Record, refs []MessageRef) []agentRoute {
	var out []agentRoute
	if ch := rec.Annotations[AnnAgentChannel]; ch != "" {
		out = append(out, agentRoute{channel: ch, thread: rec.Annotations[AnnAgentThread]})
	}
	for _, r := range refs {
		if r.Kind == RefAgent {
			out = append(out, agentRoute{channel: r.Channel, thread: r.ThreadTS, from: r.From})
		}
	}
	return out
}

// tellAgents brings every agent thread of the request up to date, each from where it was last told, in order:
// the entries an agent needs (planned, approved, executing, the outcome) with the machine-readable body, progress
// as a line. Each thread's count is recorded after every reply, so none is told twice.
func (tl *Teller) tellAgents(ctx context.Context, rec *ops.Record, refs []MessageRef) error {
	h := tl.h
	for _, r := range tl.agentRoutes(rec, refs) {
		n, ok, err := h.refs.Told(ctx, rec.ID(), r.key())
		if err != nil {
			return fmt.Errorf("read what %s was told: %w", r.key(), err)
		}
		if !ok {
			n = r.from
		}
		for i := n; i < len(rec.History); i++ {
			if err := tl.tellAgent(ctx, rec, i, r); err != nil {
				return err
			}
			if err := h.refs.SetTold(ctx, rec.ID(), r.key(), i+1); err != nil {
				return fmt.Errorf("record what %s was told: %w", r.key(), err)
			}
		}
	}
	return nil
}

func (tl *Teller) tellAgent(ctx context.Context, rec *ops.Record, i int, r agentRoute) error {
	t := rec.History[i]
	var m Msg
	switch {
	case t.Kind == ops.KindProgress:
		m = ProgressReply(rec, t.Note)
		m.Background = true
	case AgentTells(t):
		m = AgentReply(AgentBody(atEntry(rec, t), rec.ID(), nil))
	default:
		return nil
	}
	m.ThreadTS = r.thread
	if _, err := tl.h.poster.Post(ctx, r.channel, m); err != nil {
		return fmt.Errorf("reply to agent about %s: %w", rec.ID(), err)
	}
	return nil
}

// AgentTells reports whether an agent's thread hears about an entry: every phase change a person's thread hears
// of, and the end of planning (the plan, or the dry run's result).
func AgentTells(t ops.Transition) bool {
	if t.Kind != ops.KindPhase {
		return false
	}
	return Tells(t) || t.From == ops.PhasePlanned && (t.To == ops.PhaseAwaitingApproval || t.To == ops.PhaseDone)
}

// Settle implements ops.Teller: every agent thread of the request is brought up to date, and every plan message
// is updated in place to rec, once.
func (tl *Teller) Settle(ctx context.Context, rec *ops.Record) error {
	h := tl.h
	refs, err := h.refs.List(ctx, rec.ID())
	if err != nil {
		return fmt.Errorf("list the messages of %s: %w", rec.ID(), err)
	}
	if err := tl.tellAgents(ctx, rec, refs); err != nil {
		return err
	}
	if v, ok := tl.settled.Load(rec.ID()); ok && v.(int64) >= rec.Version {
		return nil
	}
	m := PlanMessage(rec).Msg
	m.Version = rec.Version
	// An update of a request that is approved or running is nobody's answer (the approver saw the ack, the thread
	// tells the rest): it yields Slack's limits to those that are.
	m.Background = rec.Phase == ops.PhaseExecuting || rec.Phase == ops.PhaseApproved
	content := messageKey(m)
	if v, ok := tl.shown.Load(rec.ID()); ok && v.(string) == content {
		tl.settled.Store(rec.ID(), rec.Version) // steps and progress change nothing the message shows
		return nil
	}
	for _, ref := range refs {
		if ref.Kind != RefPlan {
			continue
		}
		if err := h.poster.Update(ctx, ref.Channel, ref.TS, m); err != nil {
			return fmt.Errorf("update the message of %s: %w", rec.ID(), err)
		}
	}
	tl.settled.Store(rec.ID(), rec.Version)
	tl.shown.Store(rec.ID(), content)
	return nil
}

// messageKey identifies what a message shows, to skip updates that would change nothing.
func messageKey(m Msg) string {
	b, _ := json.Marshal(struct {
		Text   string
		Blocks []slack.Block
	}{m.Text, m.Blocks})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func planFiles(fs []File) []File {
	var out []File
	for _, f := range fs {
		if !isOutput(f) {
			out = append(out, f)
		}
	}
	return out
}

func resultFiles(fs []File) []File {
	var out []File
	for _, f := range fs {
		if isOutput(f) {
			out = append(out, f)
		}
	}
	return out
}

func isOutput(f File) bool { return len(f.Name) > 11 && f.Name[len(f.Name)-11:] == "-output.txt" }

func findKind(refs []MessageRef, k RefKind) (MessageRef, bool) {
	for _, r := range refs {
		if r.Kind == k {
			return r, true
		}
	}
	return MessageRef{}, false
}

func (h *Handler) fail(err error) {
	if h.cfg.OnError != nil && err != nil {
		h.cfg.OnError(err)
	}
}
