package handlers

import (
	"context"
	"fmt"
	"sync"

	"github.com/hyperops/hyperops/ops"
)

// DM is a direct message to the bot.
type DM struct {
	Channel  string
	User     string
	UserName string
	TS       string
	ThreadTS string
	Text     string
}

func (d DM) thread() string { return threadOf(d.ThreadTS, d.TS) }

// DirectMessage answers a DM: registered agents send JSON requests (replies go in the thread, machine-readable);
// people get read-only commands and help; an unregistered JSON request is refused clearly.
func (h *Handler) DirectMessage(ctx context.Context, dm DM) error {
	agent, isAgent := h.cfg.Agents[dm.User]
	raw, hasJSON := ExtractJSON(dm.Text)
	switch {
	case isAgent && hasJSON:
		return h.agentRequest(ctx, dm, agent, raw)
	case isAgent:
		return h.replyAgent(ctx, dm, AgentBody(nil, "", ops.Errorf(ops.CodeInvalidArgument, "", "post a JSON object, raw or in a ```json block (see DESIGN.md, agent request contract)",
			"no JSON request found in the message")))
	case hasJSON:
		return h.replyText(ctx, dm, ErrorMessage(ops.Errorf(ops.CodeNotAuthorized, "", "ask the platform team to register the agent in config (agents:)",
			"<@%s> is not a registered agent, so HyperOps takes no requests from it", dm.User)))
	}
	return h.personDM(ctx, dm)
}

func (h *Handler) replyText(ctx context.Context, dm DM, m Msg) error {
	m.ThreadTS = dm.thread()
	_, err := h.poster.Post(ctx, dm.Channel, m)
	return err
}

func (h *Handler) replyAgent(ctx context.Context, dm DM, body AgentReplyBody) error {
	_, err := h.postAgent(ctx, dm, body)
	return err
}

func (h *Handler) postAgent(ctx context.Context, dm DM, body AgentReplyBody) (string, error) {
	m := AgentReply(body)
	m.ThreadTS = dm.thread()
	ts, err := h.poster.Post(ctx, dm.Channel, m)
	if err != nil {
		return "", fmt.Errorf("reply to agent: %w", err)
	}
	return ts, nil
}

// personDM runs read-only slash commands written in a DM by a person.
func (h *Handler) personDM(ctx context.Context, dm DM) error {
	inv, err := h.grammar.Parse(dm.Text)
	if err != nil {
		return h.replyText(ctx, dm, ErrorMessage(err))
	}
	if inv.Help {
		return h.replyText(ctx, dm, HelpMessage(h.grammar, inv.HelpTopic))
	}
	if mutates(inv) {
		return h.replyText(ctx, dm, ErrorMessage(h.wrongPlace(dm.Channel)))
	}
	who := h.initiator(dm.User, dm.UserName)
	if inv.Command.Spec == nil {
		return h.run(ctx, inv, who, dm.Channel, dm.thread(), "")
	}
	return h.read(ctx, inv.Request(who, "dm"), who, dm.Channel, dm.thread())
}

func (h *Handler) agentRequest(ctx context.Context, dm DM, agent AgentInfo, raw []byte) error {
	ar, err := DecodeAgentRequest(raw, h.catalog)
	if err != nil {
		return h.replyAgent(ctx, dm, AgentBody(nil, "", err))
	}
	who := ops.Initiator{Kind: ops.Agent, ID: dm.User, Name: agent.Name}
	if ar.Operation == "get-request" {
		rec, err := h.engine.Get(ctx, ar.RequestID)
		return h.replyAgent(ctx, dm, AgentBody(rec, ar.RequestID, err))
	}
	if !agent.Allows(ar.Operation) {
		return h.replyAgent(ctx, dm, AgentBody(nil, ar.RequestID, ops.Errorf(ops.CodeNotAuthorized, "operation",
			"ask the platform team to allow it for agent "+agent.Name, "agent %s may not request %s", agent.Name, ar.Operation)))
	}
	req := ar.Request(who)
	if req.ID == "" {
		req.ID = ops.NewRequestID()
	}
	var p *pendingPost
	if h.cfg.ApprovalsChannel != "" {
		p = &pendingPost{channel: h.cfg.ApprovalsChannel, onlyWhenAwaiting: true}
		h.pending.Store(req.ID, p)
		defer h.pending.Delete(req.ID)
	}
	ref := MessageRef{Kind: RefAgent, Channel: dm.Channel, ThreadTS: dm.thread()}
	held := h.holdAgentThread(ctx, req, ref)
	rec, err := h.engine.Submit(ctx, req)
	_, perr := h.postAgent(ctx, dm, AgentBody(rec, req.ID, err))
	if held != nil {
		// Transitions told while the first reply was on its way were held back: tell the latest if it moved on.
		latest := h.releaseAgentThread(req.ID, ref, held)
		if perr == nil && latest != nil && (rec == nil || latest.Version > rec.Version) {
			perr = h.replyAgent(ctx, dm, AgentBody(latest, req.ID, nil))
		}
		return perr
	}
	if perr != nil || rec == nil || rec.Phase.Terminal() || rec.Phase == "" {
		return perr
	}
	return h.rememberAgentThread(ctx, rec.ID(), ref)
}

// agentHold holds back the transitions of a request told to an agent's thread until the first reply is posted.
type agentHold struct {
	mu       sync.Mutex
	released bool
	latest   *ops.Record
}

func agentHoldKey(id string, ref MessageRef) string {
	return id + "\x00" + ref.Channel + "\x00" + ref.ThreadTS
}

// holdAgentThread remembers the agent's thread before the request is submitted, so no transition can happen
// before the thread is known, and holds transitions back until the first reply is posted. It returns nil when the
// thread could not be remembered first: read-only operations (nothing stored), a request id another caller owns,
// or a store error; the thread is then remembered after the first reply, as before.
func (h *Handler) holdAgentThread(ctx context.Context, req ops.Request, ref MessageRef) *agentHold {
	op, err := h.catalog.Lookup(req.Operation)
	if err != nil || !op.Spec().Mutates {
		return nil
	}
	if existing, err := h.engine.Get(ctx, req.ID); err == nil && existing != nil && existing.Owner.ID != req.Initiator.ID {
		return nil // an idempotency conflict: this thread must not hear about another caller's request
	}
	hold := &agentHold{}
	h.agentHolds.Store(agentHoldKey(req.ID, ref), hold)
	if err := h.rememberAgentThread(ctx, req.ID, ref); err != nil {
		h.agentHolds.Delete(agentHoldKey(req.ID, ref))
		h.fail(err)
		return nil
	}
	return hold
}

// releaseAgentThread ends the hold and returns the latest record whose transition was held back, if any.
func (h *Handler) releaseAgentThread(id string, ref MessageRef, hold *agentHold) *ops.Record {
	hold.mu.Lock()
	defer hold.mu.Unlock()
	hold.released = true
	h.agentHolds.Delete(agentHoldKey(id, ref))
	return hold.latest
}

// heldBack reports whether a transition for the agent's thread is held back (and keeps it as the latest).
func (h *Handler) heldBack(rec *ops.Record, ref MessageRef) bool {
	v, ok := h.agentHolds.Load(agentHoldKey(rec.ID(), ref))
	if !ok {
		return false
	}
	hold := v.(*agentHold)
	hold.mu.Lock()
	defer hold.mu.Unlock()
	if hold.released {
		return false
	}
	if hold.latest == nil || rec.Version > hold.latest.Version {
		hold.latest = rec
	}
	return true
}

// rememberAgentThread keeps the agent's thread for later transitions, once per thread.
func (h *Handler) rememberAgentThread(ctx context.Context, id string, ref MessageRef) error {
	refs, err := h.refs.List(ctx, id)
	if err != nil {
		return fmt.Errorf("list the messages of %s: %w", id, err)
	}
	for _, r := range refs {
		if r.Kind == RefAgent && r.Channel == ref.Channel && r.ThreadTS == ref.ThreadTS {
			return nil
		}
	}
	if err := h.refs.Add(ctx, id, ref); err != nil {
		return fmt.Errorf("remember the agent thread of %s: %w", id, err)
	}
	return nil
}

// Busy answers a DM the bot had no room to take: nothing was done. Agents get the machine-readable reply with
// E_BUSY and their requestId, so they resend the same request; people get a short note. It only posts to Slack.
func (h *Handler) Busy(ctx context.Context, dm DM) error {
	busy := ops.Errorf(ops.CodeBusy, "", "resend the same request (same requestId) in a moment", "HyperOps is busy right now: nothing was done")
	_, isAgent := h.cfg.Agents[dm.User]
	raw, hasJSON := ExtractJSON(dm.Text)
	if !isAgent || !hasJSON {
		return h.replyText(ctx, dm, InfoMessage("HyperOps is busy right now: nothing was done, please send your message again in a moment."))
	}
	ar, err := DecodeAgentRequest(raw, h.catalog)
	if err != nil {
		return h.replyAgent(ctx, dm, AgentBody(nil, "", err)) // the answer it would get when not busy
	}
	return h.replyAgent(ctx, dm, AgentBody(nil, ar.RequestID, busy))
}
