package handlers

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
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
		return h.replyAgent(ctx, dm, agentapi.NewBody(nil, "", ops.Errorf(ops.CodeInvalidArgument, "", "post a JSON object, raw or in a ```json block (the request contract is in the README)",
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

func (h *Handler) replyAgent(ctx context.Context, dm DM, body agentapi.Body) error {
	_, err := h.postAgent(ctx, dm, body)
	return err
}

func (h *Handler) postAgent(ctx context.Context, dm DM, body agentapi.Body) (string, error) {
	m := h.agentReply(body)
	m.ThreadTS = dm.thread()
	ts, err := h.poster.Post(ctx, dm.Channel, m)
	if err != nil {
		return "", fmt.Errorf("reply to agent: %w", err)
	}
	return ts, nil
}

// agentReply renders a reply in an agent's DM thread, its next steps said as the JSON requests that take them.
func (h *Handler) agentReply(body agentapi.Body) Msg {
	return AgentReply(agentapi.InTerms(body, agentapi.NewSteps(h.catalog.Specs()), agentapi.DM))
}

// personDM runs read-only slash commands written in a DM by a person.
func (h *Handler) personDM(ctx context.Context, dm DM) error {
	who := h.initiator(dm.User, dm.UserName)
	if err := h.admit(ctx, who, false); err != nil {
		return h.replyText(ctx, dm, ErrorMessage(err))
	}
	inv, err := h.grammar.Parse(dm.Text)
	if err != nil {
		return h.replyText(ctx, dm, DMAnswer(h.grammar, err))
	}
	if inv.Help {
		return h.replyText(ctx, dm, HelpMessage(h.grammar, inv.HelpTopic))
	}
	if mutates(inv) {
		return h.replyText(ctx, dm, ErrorMessage(h.wrongPlace(dm.Channel)))
	}
	if inv.Command.Spec == nil {
		return h.run(ctx, inv, who, dm.Channel, dm.thread(), "")
	}
	return h.read(ctx, inv.Request(who, "dm"), who, dm.Channel, dm.thread())
}

func (h *Handler) agentRequest(ctx context.Context, dm DM, agent AgentInfo, raw []byte) error {
	ar, err := agentapi.Decode(raw, h.catalog)
	if err != nil {
		return h.replyAgent(ctx, dm, agentapi.NewBody(nil, "", err))
	}
	who := ops.Initiator{Kind: ops.Agent, ID: dm.User, Name: agent.Name}
	if err := h.admit(ctx, who, false); err != nil {
		return h.replyAgent(ctx, dm, agentapi.NewBody(nil, ar.RequestID, err))
	}
	if ar.Operation == agentapi.GetRequest {
		rec, err := h.visibleByRequestID(ctx, ar.RequestID, who)
		return h.replyAgent(ctx, dm, agentapi.NewBody(rec, ar.RequestID, err))
	}
	if !agent.Allows(ar.Operation) {
		return h.replyAgent(ctx, dm, agentapi.NewBody(nil, ar.RequestID, ops.Errorf(ops.CodeNotAuthorized, "operation",
			"ask the platform team to allow it for agent "+agent.Name, "agent %s may not request %s", agent.Name, ar.Operation)))
	}
	req := ar.Request(who)
	if req.ID == "" {
		req.ID = engine.NewRequestID()
	}
	// The record keeps the agent's thread: the outbox tells it every transition, in order, whichever replica runs.
	nonce := newSubmission()
	req.Annotations = map[string]string{AnnAgentChannel: dm.Channel, AnnAgentThread: dm.thread(), AnnSubmission: nonce}
	rec, err := h.engine.Submit(ctx, req)
	if createdBy(rec, nonce) {
		return nil
	}
	// Not stored (read-only, or refused first), or the id names an existing request: answer here.
	if err := h.replyAgent(ctx, dm, agentapi.NewBody(rec, req.ID, err)); err != nil {
		return err
	}
	if rec == nil || len(rec.History) == 0 || rec.Phase.Terminal() || err != nil {
		return nil
	}
	// This thread follows the existing request from what the reply showed: the outbox tells it what comes next.
	ref := MessageRef{Kind: RefAgent, Channel: dm.Channel, ThreadTS: dm.thread(), From: len(rec.History)}
	if err := h.refs.Add(ctx, rec.ID(), ref); err != nil {
		return fmt.Errorf("follow %s in the agent's thread: %w", rec.ID(), err)
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
	ar, err := agentapi.Decode(raw, h.catalog)
	if err != nil {
		return h.replyAgent(ctx, dm, agentapi.NewBody(nil, "", err)) // the answer it would get when not busy
	}
	return h.replyAgent(ctx, dm, agentapi.NewBody(nil, ar.RequestID, busy))
}

var fenced = regexp.MustCompile("(?s)```json\\s*\\n?(.*?)```")

// ExtractJSON finds the request in a DM: the whole message as a JSON object, or the first ```json fenced block.
func ExtractJSON(text string) ([]byte, bool) {
	t := strings.TrimSpace(text)
	// Slack escapes &, < and > in message text.
	unescape := strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">")
	if strings.HasPrefix(t, "{") {
		return []byte(unescape.Replace(t)), true
	}
	if m := fenced.FindStringSubmatch(t); m != nil {
		return []byte(unescape.Replace(strings.TrimSpace(m[1]))), true
	}
	return nil, false
}
