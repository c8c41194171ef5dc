package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

func (s *Server) newAgentServer(a Agent) *agentServer {
	as := &agentServer{s: s, agent: a, subs: newSubscriptions()}
	as.srv = mcp.NewServer(&mcp.Implementation{Name: "hyperops", Title: "HyperOps", Version: s.opts.Version}, &mcp.ServerOptions{
		Instructions: "HyperOps runs guarded operations on EKS and SageMaker HyperPod. Every mutating tool needs a requestId " +
			"(your idempotency key: retry with the same one); try dryRun first. Changes that need approval wait for a " +
			"lead in Slack: the call answers at once with phase awaiting-approval and where it waits; follow it with " +
			"wait_request, get_request or the resource hyperops://requests/{id}.",
		Logger:             s.opts.Logger,
		SubscribeHandler:   as.subscribe,
		UnsubscribeHandler: as.unsubscribe,
	})
	changes := false
	for _, spec := range s.opts.Catalog.Specs() {
		if a.lists(spec) {
			as.srv.AddTool(operationTool(spec, s.opts.Bounds, s.opts.Targets), as.counted(spec.Name, as.callOperation(spec)))
			changes = changes || spec.Mutates
		}
	}
	as.addFollowTools()
	as.addBudgetTool()
	// Reverting asks for a change: an agent that may change nothing is not shown it.
	if changes {
		as.addRevertTool()
	}
	as.srv.AddReceivingMiddleware(as.refuseOthers)
	return as
}

func operationTool(spec ops.Spec, bounds Bounds, targets Targets) *mcp.Tool {
	destructive := spec.Mutates && spec.Destructive
	openWorld := true
	desc := spec.Summary + "."
	if spec.Topic != "" {
		desc += " In Slack: the slash command's \"" + strings.TrimSpace(spec.Topic+" "+spec.Verb) + "\"."
	}
	if spec.Mutates {
		desc += " Mutating: needs requestId; may wait for a lead's approval in Slack."
	}
	return &mcp.Tool{Name: spec.Name, Description: desc, InputSchema: InputSchema(spec, bounds, targets),
		Annotations: &mcp.ToolAnnotations{Title: spec.Summary, ReadOnlyHint: spec.ReadOnly(), DestructiveHint: &destructive,
			// The same requestId never executes twice, so every call is idempotent; reads are idempotent anyway.
			IdempotentHint: true, OpenWorldHint: &openWorld}}
}

// counted tells OnCall about every call of a tool.
func (a *agentServer) counted(tool string, h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := h(ctx, req)
		code := "OK"
		switch {
		case err != nil:
			code = string(ops.CodeInternal)
		case res != nil && res.IsError:
			code = string(ops.CodeInvalidArgument)
			if r, ok := replyOf(res.StructuredContent); ok {
				code = r.code()
			}
		}
		a.s.opts.OnCall(tool, code)
		return res, err
	}
}

func replyOf(v any) (Reply, bool) {
	switch r := v.(type) {
	case Reply:
		return r, true
	case WaitReply:
		return r.Reply, true
	}
	return Reply{}, false
}

// refuseOthers answers a call of a catalog operation the agent may not use with E_NOT_AUTHORIZED, as a DM would,
// instead of the SDK's "unknown tool": the agent learns what to ask for. Nothing is recorded.
func (a *agentServer) refuseOthers(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		name := call.Params.Name
		spec, known := a.s.opts.Catalog.Spec(name)
		if !known || a.agent.lists(spec) {
			return next(ctx, method, req)
		}
		if a.agent.Allows(name) {
			r := Reply{Body: agentapi.NewBody(nil, requestIDOf(call.Params.Arguments), approvals.ReadOnlyRefusal(a.agent.Name(), a.agent.scopeAt, name))}
			a.s.opts.OnCall(name, string(ops.CodeOutOfScope))
			return result(r, r), nil
		}
		r := Reply{Body: agentapi.NewBody(nil, requestIDOf(call.Params.Arguments), ops.Errorf(ops.CodeNotAuthorized, "operation",
			"ask the platform team to allow it for agent "+a.agent.Name()+" (agents[].operations)",
			"agent %s may not request %s", a.agent.Name(), name))}
		a.s.opts.OnCall(name, string(ops.CodeNotAuthorized))
		return result(r, r), nil
	}
}

func requestIDOf(raw json.RawMessage) string {
	var args struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(raw, &args)
	return args.RequestID
}

// callOperation handles a call of an operation's tool: the arguments are read as the DM contract's request, by the
// same strict rules (unknown and forbidden fields refused), then go to the engine as the agent.
func (a *agentServer) callOperation(spec ops.Spec) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ar, err := agentapi.DecodeArguments(spec.Name, req.Params.Arguments, a.s.opts.Catalog)
		if err != nil {
			r := a.reply(ctx, nil, requestIDOf(req.Params.Arguments), err)
			return result(r, r), nil
		}
		if err := a.s.opts.Bounds.check(spec.Name, ar.Workload); err != nil {
			r := a.reply(ctx, nil, ar.RequestID, err)
			return result(r, r), nil
		}
		if spec.Mutates && ar.RequestID == "" {
			r := a.reply(ctx, nil, "", ops.Errorf(ops.CodeInvalidArgument, agentapi.FieldRequestID,
				"add requestId: a key of your choosing (e.g. train-20250308-001), the same on every retry",
				"requestId is required for %s, which changes things", spec.Name))
			return result(r, r), nil
		}
		r := ar.Request(a.agent.Initiator)
		r.Origin = "mcp"
		if r.ID == "" {
			r.ID = engine.NewRequestID()
		}
		rec, err := a.s.opts.Engine.Submit(ctx, r)
		if err == nil && rec != nil && planning(rec.Phase) {
			rec = a.settled(ctx, rec)
		}
		rep := a.reply(ctx, rec, r.ID, err)
		return result(rep, rep), nil
	}
}

// settled waits a little for a request another call is still planning (a client's retry racing its first call),
// so every caller gets the plan and the phase it led to rather than "received" or "planned".
func (a *agentServer) settled(ctx context.Context, rec *ops.Record) *ops.Record {
	ctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	changed, stop := a.s.opts.Changes.Watch(rec.ID())
	defer stop()
	// The record may have moved on before the watch began: read it once more first.
	if next, err := a.s.opts.Engine.Get(ctx, rec.ID()); err == nil {
		rec = next
	}
	for planning(rec.Phase) {
		select {
		case <-ctx.Done():
			return rec
		case <-changed:
		}
		next, err := a.s.opts.Engine.Get(ctx, rec.ID())
		if err != nil {
			return rec
		}
		rec = next
	}
	return rec
}

// planning reports the phases a request passes through while its first Submit is still planning it.
func planning(p ops.Phase) bool { return p == ops.PhaseReceived || p == ops.PhasePlanned }

// settleWait bounds how long a retry waits for the first call's plan.
const settleWait = 10 * time.Second
