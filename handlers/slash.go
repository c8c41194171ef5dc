package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Slash handles a slash command that was acked already.
func (h *Handler) Slash(ctx context.Context, cmd slack.SlashCommand) error {
	who := h.initiator(cmd.UserID, cmd.UserName)
	if err := h.admit(ctx, who, true); err != nil {
		return h.poster.Ephemeral(ctx, cmd.ChannelID, cmd.UserID, ErrorMessage(err))
	}
	inv, err := h.grammar.Parse(cmd.Text)
	if err != nil {
		return h.poster.Ephemeral(ctx, cmd.ChannelID, cmd.UserID, ErrorMessage(err))
	}
	if inv.Help {
		return h.poster.Ephemeral(ctx, cmd.ChannelID, cmd.UserID, HelpMessage(h.grammar, inv.HelpTopic))
	}
	if !h.commandChannel(cmd.ChannelID) {
		if !isDM(cmd.ChannelID) || mutates(inv) {
			return h.poster.Ephemeral(ctx, cmd.ChannelID, cmd.UserID, ErrorMessage(h.wrongPlace(cmd.ChannelID)))
		}
	}
	return h.run(ctx, inv, who, cmd.ChannelID, "", cmd.TriggerID)
}

func (h *Handler) wrongPlace(channel string) *ops.Error {
	where := make([]string, 0, len(h.cfg.Channels))
	for _, c := range h.cfg.Channels {
		where = append(where, "<#"+c+">")
	}
	if isDM(channel) {
		return ops.Errorf(ops.CodeNotAuthorized, "", "run it in "+strings.Join(where, ", "),
			"in a direct message HyperOps answers read-only commands and help only")
	}
	return ops.Errorf(ops.CodeNotAuthorized, "", "run it in "+strings.Join(where, ", "), "HyperOps does not take commands in this channel")
}

// mutates reports whether an invocation could change anything.
func mutates(inv *Invocation) bool {
	if inv.Command.Spec != nil {
		return inv.Command.Spec.Mutates
	}
	return (inv.Command.Topic == topicRequest && inv.Command.Verb != "show") || (inv.Command.Topic == topicGrants && inv.Command.Verb != "")
}

// run executes an invocation for who, answering in channel (thread when threadTS is set).
func (h *Handler) run(ctx context.Context, inv *Invocation, who ops.Initiator, channel, threadTS, trigger string) error {
	switch inv.Command.Topic {
	case topicRequests:
		return h.listRequests(ctx, inv, who, channel)
	case topicRequest:
		return h.requestVerb(ctx, inv, who, channel)
	case topicReport:
		return h.report(ctx, inv, who, channel)
	case topicWatch, topicUnwatch:
		return h.watch(ctx, inv, who, channel)
	case topicBudget:
		return h.budget(ctx, who, channel)
	case topicGrants:
		return h.grants(ctx, inv, who, channel)
	}
	req := inv.Request(who, "slash")
	if req.ID == "" && trigger != "" {
		// The same slash invocation (a redelivered envelope) always names the same request.
		sum := sha256.Sum256([]byte(trigger))
		req.ID = "req-" + hex.EncodeToString(sum[:8])
	}
	if !inv.Command.Spec.Mutates {
		return h.read(ctx, req, who, channel, threadTS)
	}
	if err := h.access.CheckAsk(ctx, who); err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	req.Annotations = map[string]string{AnnChannel: channel, AnnThread: threadTS}
	if !isDM(channel) {
		// Approvers of a request asked in a channel must be members of that channel, not of the approvals one.
		req.Annotations[approvals.ChannelAnnotation] = channel
	}
	return h.submit(ctx, req, who, channel)
}

func (h *Handler) read(ctx context.Context, req ops.Request, who ops.Initiator, channel, threadTS string) error {
	rec, err := h.engine.Submit(ctx, req)
	if rec == nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	r := ResultMessage(h.catalog, rec)
	r.Msg.ThreadTS = threadTS
	ts, perr := h.poster.Post(ctx, channel, r.Msg)
	if perr != nil {
		return fmt.Errorf("post the result of %s: %w", req.Operation, perr)
	}
	return h.upload(ctx, channel, threadOf(threadTS, ts), r.Files)
}

func threadOf(threadTS, ts string) string {
	if threadTS != "" {
		return threadTS
	}
	return ts
}

func (h *Handler) upload(ctx context.Context, channel, threadTS string, files []File) error {
	for _, f := range files {
		f.Channel, f.ThreadTS = channel, threadTS
		if err := h.poster.Upload(ctx, f); err != nil {
			return fmt.Errorf("upload %s: %w", f.Name, err)
		}
	}
	return nil
}

// submit hands a mutating request to the engine. Its plan message is posted from the outbox where the record says
// (the channel it was asked in), so a request refused before it is stored only answers the person who asked, and
// one whose id names an existing request shows that request to the asker without a second message.
func (h *Handler) submit(ctx context.Context, req ops.Request, who ops.Initiator, channel string) error {
	return h.submitWith(ctx, req, who, channel, h.engine.Submit)
}

// revert asks, as who, for the request that reverts the request id (Engine.Revert), under the rules of any request
// they ask; its plan message is posted in channel from the outbox, and a revert already asked is shown as it stands.
func (h *Handler) revert(ctx context.Context, id string, who ops.Initiator, channel string) error {
	if err := h.access.CheckAsk(ctx, who); err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	ask := ops.Request{Initiator: who, Origin: "revert", Annotations: map[string]string{AnnChannel: channel}}
	if !isDM(channel) {
		ask.Annotations[approvals.ChannelAnnotation] = channel
	}
	return h.submitWith(ctx, ask, who, channel, func(ctx context.Context, req ops.Request) (*ops.Record, error) {
		return h.engine.Revert(ctx, id, req)
	})
}

func (h *Handler) submitWith(ctx context.Context, req ops.Request, who ops.Initiator, channel string,
	send func(context.Context, ops.Request) (*ops.Record, error)) error {
	nonce := newSubmission()
	req.Annotations[AnnSubmission] = nonce
	rec, err := send(ctx, req)
	if rec == nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	if !createdBy(rec, nonce) {
		msg := PlanMessage(h.catalog, rec).Msg
		msg.Blocks = append([]slack.Block{contextBlock(fmt.Sprintf("request `%s` already exists; this is where it stands", rec.ID()))}, msg.Blocks...)
		return h.poster.Ephemeral(ctx, channel, who.ID, withoutActions(msg))
	}
	if err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	return nil
}

// withoutActions drops the buttons, for copies of a request's message that are not the one kept up to date.
func withoutActions(m Msg) Msg {
	out := m
	out.Blocks = nil
	for _, b := range m.Blocks {
		if b.BlockType() != slack.MBTAction {
			out.Blocks = append(out.Blocks, b)
		}
	}
	return out
}

// listScan is how many recent requests the list reads before keeping the ones the viewer may see.
const listScan = 200

// listShown is how many requests the list shows.
const listShown = 20

func (h *Handler) listRequests(ctx context.Context, inv *Invocation, who ops.Initiator, channel string) error {
	q, title := engine.ListQuery{Limit: listScan}, "Recent requests"
	for _, w := range inv.Words {
		switch w {
		case "mine":
			q.Initiator, title = who.ID, "Your requests"
		case "pending":
			q.Phases, title = []ops.Phase{ops.PhaseAwaitingApproval}, "Requests awaiting approval"
		}
	}
	recs, err := h.engine.List(ctx, q)
	if err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	recs = h.visibleOnly(ctx, recs, who)
	if len(recs) > listShown {
		recs = recs[:listShown]
	}
	return h.poster.Ephemeral(ctx, channel, who.ID, RequestsMessage(h.catalog, title, recs))
}

func (h *Handler) requestVerb(ctx context.Context, inv *Invocation, who ops.Initiator, channel string) error {
	id := inv.Args["id"]
	if id == "" {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(ops.Errorf(ops.CodeInvalidArgument, "id",
			"add id=<request id> (see "+h.cfg.Command+" requests)", "%s request %s needs id=", h.cfg.Command, inv.Command.Verb)))
	}
	rec, err := h.visibleByRequestID(ctx, id, who)
	if err == nil {
		id = rec.ID()
	}
	switch {
	case err != nil:
	case inv.Command.Verb == "cancel":
		rec, err = h.engine.Cancel(ctx, id, who)
	case inv.Command.Verb == "stop":
		rec, err = h.engine.Stop(ctx, id, who)
	case inv.Command.Verb == "revert":
		return h.revert(ctx, id, who, channel)
	}
	if err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	r := PlanMessage(h.catalog, rec)
	return h.poster.Ephemeral(ctx, channel, who.ID, withoutActions(r.Msg))
}

func (h *Handler) report(ctx context.Context, inv *Invocation, who ops.Initiator, channel string) error {
	if h.reporter == nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, InfoMessage("Capacity reports are not configured on this HyperOps."))
	}
	var clusters []string
	if c := inv.Args[ArgCluster]; c != "" {
		clusters = []string{c}
	}
	if err := h.reporter.CapacityReport(ctx, channel, clusters); err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	return nil
}
