package handlers

import (
	"context"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Access decides who may use HyperOps and who may see a request; approvals.Policy implements it. Every surface
// asks CheckAccess first, for every command, read or write, help included; every view of a request (request show,
// the Details modal, the requests list, a click on its buttons, an agent's get-request) asks CheckView.
type Access interface {
	// CheckAccess reports whether who may use HyperOps at all (E_NOT_AUTHORIZED otherwise).
	CheckAccess(ctx context.Context, who ops.Initiator) error
	// CheckAsk reports whether who may ask for a change (access readers only read).
	CheckAsk(ctx context.Context, who ops.Initiator) error
	// CheckView reports whether who may see the request's details (E_NOT_AUTHORIZED otherwise).
	CheckView(ctx context.Context, rec *ops.Record, who ops.Initiator) error
}

// closedAccess refuses everybody: a Handler built without an Access answers nobody rather than everybody.
type closedAccess struct{}

func (closedAccess) CheckAccess(context.Context, ops.Initiator) error { return errNoAccess() }
func (closedAccess) CheckAsk(context.Context, ops.Initiator) error    { return errNoAccess() }
func (closedAccess) CheckView(context.Context, *ops.Record, ops.Initiator) error {
	return errNoAccess()
}

func errNoAccess() error {
	return ops.Errorf(ops.CodeNotAuthorized, "", "ask a platform admin to check how HyperOps was started (its log)",
		"HyperOps was started without an access policy, so it answers nobody")
}

// admit refuses who unless they may use HyperOps. Agents are refused slash commands: Slack never sends one from a
// bot user, and an agent's surface is its JSON DM or MCP, where its own rules apply.
func (h *Handler) admit(ctx context.Context, who ops.Initiator, slash bool) error {
	if slash && who.Kind == ops.Agent {
		return ops.Errorf(ops.CodeNotAuthorized, "", "send a JSON request in a DM to the bot, or use MCP",
			"agent %s cannot use slash commands", who.Name)
	}
	return h.access.CheckAccess(ctx, who)
}

// visible reads request id for who, refusing it unless who may see it.
func (h *Handler) visible(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error) {
	rec, err := h.engine.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := h.access.CheckView(ctx, rec, who); err != nil {
		return nil, err
	}
	return rec, nil
}

// visibleByRequestID reads the request who knows by id, refusing it unless who may see it: their own request sent
// with that request id (stored under engine.ScopedRequestID when the id was another initiator's), else the request
// stored under id. Buttons carry stored ids and read them with visible.
func (h *Handler) visibleByRequestID(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error) {
	rec, err := h.engine.Get(ctx, engine.ScopedRequestID(id, who.ID))
	if err != nil || rec.Request.Initiator.ID != who.ID {
		return h.visible(ctx, id, who)
	}
	if err := h.access.CheckView(ctx, rec, who); err != nil {
		return nil, err
	}
	return rec, nil
}

// visibleOnly keeps the records who may see, in order; one whose membership cannot be read is left out.
func (h *Handler) visibleOnly(ctx context.Context, recs []*ops.Record, who ops.Initiator) []*ops.Record {
	out := recs[:0:0]
	for _, rec := range recs {
		if h.access.CheckView(ctx, rec, who) == nil {
			out = append(out, rec)
		}
	}
	return out
}
