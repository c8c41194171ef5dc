package handlers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
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

// Teller tells people about requests from the engine's outbox (engine.Teller): the plan message, one thread reply per
// entry that matters, the agent's machine-readable replies, the audit line. The engine calls Tell in order, once
// per history entry across replicas, and Settle once after a run of entries.
type Teller struct {
	h     *Handler
	shown *shownPlans
}

// Teller returns the handler's outbox teller.
func (h *Handler) Teller() *Teller { return h.teller }

var _ engine.Teller = (*Teller)(nil)

// Tell implements engine.Teller. Each part of the entry (the plan or the thread reply, the audit line) is posted once
// (deliver); a part Slack refuses for good is recorded as undelivered, the requester is told where it could not
// go, and the entry is told: a refusal never blocks the request's later messages. Once a success is told, the
// request's messages watch the workloads it made; a subscription that fails is reported (OnError), not retried.
func (tl *Teller) Tell(ctx context.Context, rec *ops.Record, i int) error {
	if err := tl.tell(ctx, rec, i); err != nil {
		return err
	}
	if t := rec.History[i]; t.Kind == ops.KindPhase && t.To == ops.PhaseSucceeded {
		tl.h.fail(tl.h.watchResult(ctx, rec))
	}
	return nil
}

func (tl *Teller) tell(ctx context.Context, rec *ops.Record, i int) error {
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
			if _, err := tl.postPlan(ctx, rec, i, channel, thread); err != nil || !grantUsed(rec, i) {
				return err
			}
			return tl.tellGrantUse(ctx, rec, i)
		}
	} else if last, err := tl.reply(ctx, rec, i, plan); err != nil {
		return err
	} else if err := tl.finishUploads(ctx, rec, last, plan); err != nil {
		return err
	}
	if grantUsed(rec, i) {
		if err := tl.tellGrantUse(ctx, rec, i); err != nil {
			return err
		}
	}
	if h.cfg.AuditChannel != "" && (t.Kind == ops.KindPhase || t.Kind == ops.KindBreakGlassAck) {
		return tl.audit(ctx, rec, i, at, t, plan, hasPlan)
	}
	return nil
}

// audit mirrors a phase change (and a break-glass's acknowledgement) to the audit channel. When the audit channel refuses it for good, the request's
// thread says so, once per request.
func (tl *Teller) audit(ctx context.Context, rec *ops.Record, i int, at *ops.Record, t ops.Transition, plan MessageRef, hasPlan bool) error {
	h := tl.h
	_, _, err := tl.deliver(ctx, rec, i, part{name: "audit", channel: h.cfg.AuditChannel, msg: AuditLine(at, t)})
	slackCode, refusedForGood := refused(err)
	if !refusedForGood {
		return err
	}
	if !hasPlan {
		return nil
	}
	if _, told, err := h.refs.Told(ctx, rec.ID(), "auditnotice"); err != nil || told {
		return err
	}
	_, _, err = tl.deliver(ctx, rec, i, part{name: "auditnotice", channel: plan.Channel, thread: plan.TS,
		msg: AuditRefusedReply(rec, h.cfg.AuditChannel, slackCode)})
	if _, ok := refused(err); ok {
		return nil
	}
	return err
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

// postPlan posts the plan message with the latest record and remembers it. A channel that refuses it for good
// leaves the request without a plan message for now (the next entry tries again) and the requester is told.
func (tl *Teller) postPlan(ctx context.Context, rec *ops.Record, i int, channel, thread string) (MessageRef, error) {
	h := tl.h
	r := PlanMessage(h.catalog, rec)
	ts, found, err := tl.deliver(ctx, rec, i, part{name: "plan", channel: channel, thread: thread, msg: r.Msg})
	if slackCode, ok := refused(err); ok {
		return MessageRef{}, tl.fallback(ctx, rec, i, channel, slackCode, r.Msg)
	}
	if err != nil {
		return MessageRef{}, err
	}
	if ts == "" {
		// Posted earlier; its ref was recorded then, unless recording it failed: find it again.
		if ts, err = tl.findPosted(ctx, rec, i, "plan", channel, thread); ts == "" {
			return MessageRef{}, err
		}
	}
	ref := MessageRef{Kind: RefPlan, Channel: channel, TS: ts, ThreadTS: thread}
	if err := h.refs.Add(ctx, rec.ID(), ref); err != nil {
		return ref, fmt.Errorf("remember the message of %s: %w", rec.ID(), err)
	}
	if !found {
		// A message an earlier attempt posted shows that attempt's record: Settle brings it up to date.
		tl.remember(ctx, rec.ID(), rec.Version, messageKey(r.Msg))
	}
	files := planFiles(r.Files)
	if rec.Result != nil && rec.Phase.Terminal() {
		files = r.Files
	}
	return ref, tl.uploadFiles(ctx, rec, i, channel, ts, files)
}

// reply tells one entry in the plan message's thread, with the backlog of plain replies after it (tellPlain), and
// returns the last entry it told.
func (tl *Teller) reply(ctx context.Context, rec *ops.Record, i int, plan MessageRef) (last int, err error) {
	t := rec.History[i]
	switch _, kind := replyOf(rec, i); {
	case kind == replySilent:
		return i, nil
	case kind == replyPlain:
		return tl.tellPlain(ctx, rec, i, plan)
	case t.Kind == ops.KindReminder:
		return i, tl.remind(ctx, rec, i, t, plan)
	case t.Kind == ops.KindEscalation:
		return i, tl.escalate(ctx, rec, i, t, plan)
	case t.Kind == ops.KindBreakGlassAck:
		return i, tl.tellGlassAck(ctx, rec, i, plan)
	default:
		return i, tl.tellGlass(ctx, rec, i, plan)
	}
}

// remind posts a reminder to the approvers who have not voted.
func (tl *Teller) remind(ctx context.Context, rec *ops.Record, i int, t ops.Transition, plan MessageRef) error {
	m := ReminderReply(rec, t)
	m.Background = true
	_, _, err := tl.deliver(ctx, rec, i, part{name: "reply", channel: plan.Channel, thread: plan.TS, msg: m})
	if slackCode, ok := refused(err); ok {
		return tl.fallback(ctx, rec, i, plan.Channel, slackCode, m)
	}
	return err
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

// tellAgent replies to an agent about entry i. A thread that refuses it for good is recorded as undelivered and
// the agent's later replies go on (the agent can read the request with get_request).
func (tl *Teller) tellAgent(ctx context.Context, rec *ops.Record, i int, r agentRoute) error {
	t := rec.History[i]
	var m Msg
	switch {
	case t.Kind == ops.KindProgress:
		m = ProgressReply(rec, t.Note)
		m.Background = true
	case AgentTells(t):
		m = tl.h.agentReply(agentapi.NewBody(atEntry(rec, t), rec.ID(), nil))
	default:
		return nil
	}
	p := part{name: r.key(), label: "agent", channel: r.channel, thread: r.thread, msg: m}
	if m.Metadata != nil {
		if m.Metadata.EventPayload == nil {
			m.Metadata.EventPayload = map[string]any{}
		}
		// The reply's metadata is the agent contract's: the entry it tells goes in its payload, to find it by.
		m.Metadata.EventPayload[AgentEntryKey] = i
		p.find = &slack.SlackMetadata{EventType: m.Metadata.EventType,
			EventPayload: map[string]any{"requestId": rec.ID(), AgentEntryKey: i}}
	}
	_, _, err := tl.deliver(ctx, rec, i, p)
	if _, ok := refused(err); ok {
		return nil // recorded as undelivered; the agent can read the request with get-request
	}
	if err != nil {
		return fmt.Errorf("reply to agent about %s: %w", rec.ID(), err)
	}
	return nil
}

// AgentEntryKey is the key of the agent reply metadata's payload that names the history entry an outbox reply
// tells: a reply whose answer was lost is found by it instead of being posted again.
const AgentEntryKey = "entry"

// AgentTells reports whether an agent's thread hears about an entry: every phase change a person's thread hears
// of, and the end of planning (the plan, or the dry run's result).
func AgentTells(t ops.Transition) bool {
	if t.Kind != ops.KindPhase {
		return false
	}
	return Tells(t) || t.From == ops.PhasePlanned && (t.To == ops.PhaseAwaitingApproval || t.To == ops.PhaseDone)
}

// Settle implements engine.Teller: every agent thread of the request is brought up to date, and every plan message
// is updated in place to rec, once. A plan message Slack refuses to update for good (deleted, archived) is recorded
// as undelivered and left as it is.
func (tl *Teller) Settle(ctx context.Context, rec *ops.Record) error {
	h := tl.h
	refs, err := h.refs.List(ctx, rec.ID())
	if err != nil {
		return fmt.Errorf("list the messages of %s: %w", rec.ID(), err)
	}
	if err := tl.tellAgents(ctx, rec, refs); err != nil {
		return err
	}
	defer tl.forgetIfDone(rec)
	version, shown, ok := tl.shownOf(ctx, rec.ID())
	if ok && version >= rec.Version {
		return nil
	}
	// The watcher may tell a workload's state while this update is on its way (WatchTeller.showRequest): the
	// states are read again after it, and the message drawn again when they moved, so the last update shows both.
	states := toldStates(ctx, h.cfg.Workloads, rec, nil)
	for range redrawMax {
		m := RequestMessage(h.catalog, rec, states).Msg
		m.Version = rec.Version
		// An update of a request that is approved or running is nobody's answer (the approver saw the ack, the
		// thread tells the rest): it yields Slack's limits to those that are.
		m.Background = rec.Phase == ops.PhaseExecuting || rec.Phase == ops.PhaseApproved
		content := messageKey(m)
		if ok && shown == content {
			tl.remember(ctx, rec.ID(), rec.Version, content) // steps and progress change nothing the message shows
			return nil
		}
		for _, ref := range refs {
			if ref.Kind != RefPlan {
				continue
			}
			if err := tl.update(ctx, rec, ref, m); err != nil {
				return err
			}
		}
		tl.remember(ctx, rec.ID(), rec.Version, content)
		now := toldStates(ctx, h.cfg.Workloads, rec, nil)
		if slices.Equal(now, states) {
			return nil
		}
		states, shown, ok = now, content, true
	}
	return nil
}

// update updates a plan message; content Slack refuses goes as plain text, a refusal for good is recorded.
func (tl *Teller) update(ctx context.Context, rec *ops.Record, ref MessageRef, m Msg) error {
	err := tl.h.poster.Update(ctx, ref.Channel, ref.TS, m)
	if Classify(err) == Rejected {
		err = sendPlain(rec, m, func(v Msg) error { return tl.h.poster.Update(ctx, ref.Channel, ref.TS, v) })
	}
	if err == nil {
		return nil
	}
	if Classify(err) == Transient {
		return fmt.Errorf("update the message of %s: %w", rec.ID(), err)
	}
	tl.undelivered(Undelivered{RequestID: rec.ID(), Entry: len(rec.History) - 1, Part: "update", Channel: ref.Channel,
		Method: "chat.update", Code: SlackCode(err), Err: err})
	return nil
}

// forgetIfDone drops what this replica remembers of a finished request's plan message once it is settled: a
// later Settle of it reads what the message shows from the request's refs instead of a map that grows forever. A
// request whose workloads are watched is kept (until shownPlansMax pushes it out): the watcher heads its message
// with the workload's state, which a needless update would replace.
func (tl *Teller) forgetIfDone(rec *ops.Record) {
	if rec.Phase.Terminal() && (rec.Result == nil || len(rec.Result.Watch) == 0) {
		tl.shown.forget(rec.ID())
	}
}

// Routes of the request's told counters (Refs) that hold what its plan message shows, for every replica: the
// version it was last drawn from and its messageKey.
const (
	routeShown    = "plan/shown"
	routeShownKey = "plan/shownkey"
)

// remember records what the plan message shows now: in this replica's memory, and in the request's refs, so a
// replica that tells its next entries (the outbox hands a request's entries to either replica) does not send an
// update that changes nothing. A record that fails costs at most that update.
func (tl *Teller) remember(ctx context.Context, id string, version int64, content string) {
	tl.shown.put(id, version, content)
	key, err := strconv.Atoi(content)
	if err != nil {
		return
	}
	if tl.h.refs.SetTold(ctx, id, routeShown, int(version)) == nil {
		_ = tl.h.refs.SetTold(ctx, id, routeShownKey, key)
	}
}

// shownOf is what the plan message shows, as this replica remembers it or else as the request's refs record it (ok
// false: not known).
func (tl *Teller) shownOf(ctx context.Context, id string) (version int64, content string, ok bool) {
	if version, content, ok = tl.shown.get(id); ok {
		return version, content, ok
	}
	v, vok, err := tl.h.refs.Told(ctx, id, routeShown)
	if err != nil || !vok {
		return 0, "", false
	}
	k, kok, err := tl.h.refs.Told(ctx, id, routeShownKey)
	if err != nil || !kok {
		return 0, "", false
	}
	return int64(v), strconv.Itoa(k), true
}

// messageKey identifies what a message shows, to skip updates that would change nothing: 63 bits of a SHA-256 of
// its text and blocks, in decimal (a told counter holds it).
func messageKey(m Msg) string {
	b, _ := json.Marshal(struct {
		Text   string
		Blocks []slack.Block
	}{m.Text, m.Blocks})
	sum := sha256.Sum256(b)
	return strconv.FormatUint(binary.BigEndian.Uint64(sum[:8])>>1, 10)
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
