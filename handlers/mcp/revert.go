package mcp

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

// ToolRevertRequest asks for a new request that puts back what one of the agent's succeeded requests replaced.
const ToolRevertRequest = "revert_request"

// fieldReverts names the request to revert.
const fieldReverts = "reverts"

func (a *agentServer) addRevertTool() {
	destructive, openWorld := true, true
	a.srv.AddTool(&mcp.Tool{Name: ToolRevertRequest,
		Description: "Revert one of your succeeded requests: a new request (under requestId, your idempotency key) that puts back " +
			"the state it replaced, planned, priced, risk-rated and approved like any other, and subject to your operations and " +
			"scope. E_NOT_REVERTIBLE says why a request cannot be reverted (a deleted volume's data is gone).",
		Annotations: &mcp.ToolAnnotations{Title: "Revert a request", DestructiveHint: &destructive, IdempotentHint: true, OpenWorldHint: &openWorld},
		InputSchema: Schema{"type": "object", "additionalProperties": false, "required": []string{agentapi.FieldRequestID, fieldReverts},
			"properties": Schema{agentapi.FieldRequestID: requestIDSchema(),
				fieldReverts: Schema{"type": "string", "minLength": 1, "maxLength": 128, "description": "the id of your request to revert"}}}},
		a.counted(ToolRevertRequest, a.revertRequest))
}

func (a *agentServer) revertRequest(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Reverts string `json:"reverts"`
	}
	fa, err := decodeFollow(req.Params.Arguments, agentapi.FieldRequestID, fieldReverts)
	if err == nil {
		_ = json.Unmarshal(req.Params.Arguments, &args)
		if args.Reverts == "" {
			err = ops.Errorf(ops.CodeInvalidArgument, fieldReverts, "add reverts: the id of your request to revert", "reverts is required")
		}
	}
	if err != nil {
		r := a.reply(ctx, nil, fa.RequestID, err)
		return result(r, r), nil
	}
	orig, err := a.own(ctx, args.Reverts)
	if err != nil {
		r := a.reply(ctx, nil, fa.RequestID, err)
		return result(r, r), nil
	}
	rec, err := a.s.opts.Engine.Revert(ctx, orig.ID(), ops.Request{ID: fa.RequestID, Initiator: a.agent.Initiator, Origin: "mcp"})
	if err == nil && rec != nil && planning(rec.Phase) {
		rec = a.settled(ctx, rec)
	}
	r := a.reply(ctx, rec, fa.RequestID, err)
	return result(r, r), nil
}
