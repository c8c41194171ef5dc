package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

// Reply is a tool's structuredContent: the reply object of the DM contract (requestId, phase, plan with cost, risk
// and approvals, errors with code, field and next step) and, for a request waiting on people, where it waits.
type Reply struct {
	agentapi.Body
	Waiting *Waiting `json:"waiting,omitempty"`
}

// WaitReply is wait_request's answer: the request as it is, and whether it reached the phase waited for.
type WaitReply struct {
	Reply
	Until   string `json:"until"`
	Reached bool   `json:"reached"`
}

// ListReply is list_requests' answer, newest first.
type ListReply struct {
	Requests []agentapi.Body `json:"requests"`
}

// reply builds the reply to a call from the record (nil when nothing was stored) and the error of the call.
func (a *agentServer) reply(ctx context.Context, rec *ops.Record, id string, err error) Reply {
	r := Reply{Body: agentapi.NewBody(rec, id, agentapi.ArgumentErrors(err))}
	if rec != nil && rec.Phase == ops.PhaseAwaitingApproval && a.s.opts.Where != nil {
		w, werr := a.s.opts.Where.Where(ctx, rec)
		if werr == nil {
			r.Waiting = w
		}
	}
	return agentapi.InTerms(r, a.s.steps, agentapi.Tools)
}

// failed reports whether the call did not get what it asked for (a refusal or a failed read).
func (r Reply) failed() bool {
	return r.Phase == ops.PhaseRejected || r.Phase == ops.PhaseFailed
}

// code is the metrics label of a reply: its first error code, or OK.
func (r Reply) code() string {
	if r.failed() && len(r.Errors) > 0 {
		return string(r.Errors[0].Code)
	}
	if r.failed() {
		return string(ops.CodeInternal)
	}
	return "OK"
}

// result wraps a reply for the client: structuredContent and a one-paragraph summary.
func result(r Reply, structured any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: Summary(r)}}, StructuredContent: structured,
		IsError: r.failed()}
}

// Summary is the one paragraph a person (or a model) reads first.
func Summary(r Reply) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Request %s", r.RequestID)
	if r.Operation != "" {
		fmt.Fprintf(&b, " (%s)", r.Operation)
	}
	fmt.Fprintf(&b, " is %s.", r.Phase)
	if p := r.Plan; p != nil {
		if p.Summary != "" {
			fmt.Fprintf(&b, " Plan: %s.", strings.TrimSuffix(p.Summary, "."))
		}
		fmt.Fprintf(&b, " Risk %s", p.Risk.Level)
		if len(p.Risk.Reasons) > 0 {
			fmt.Fprintf(&b, " (%s)", p.Risk.Reasons[0].Text)
		}
		fmt.Fprintf(&b, "; estimated cost %s.", p.Cost.String())
		for _, x := range p.Budget {
			fmt.Fprintf(&b, " Budget: %s.", x)
		}
		if p.Approvals.Required > 0 {
			fmt.Fprintf(&b, " Approvals %d of %d.", p.Approvals.Received, p.Approvals.Required)
		}
	}
	if w := r.Waiting; w != nil {
		fmt.Fprintf(&b, " It waits for a lead in Slack channel %s", w.Channel)
		if w.Permalink != "" {
			fmt.Fprintf(&b, " (%s)", w.Permalink)
		}
		if len(w.Approvers) > 0 {
			fmt.Fprintf(&b, "; who may approve: %s", strings.Join(w.Approvers, ", "))
		}
		b.WriteString(". Follow it with wait_request.")
	}
	if r.Result != nil && r.Result.Summary != "" {
		fmt.Fprintf(&b, " Result: %s.", strings.TrimSuffix(r.Result.Summary, "."))
	}
	for i, e := range r.Errors {
		if i == 3 {
			fmt.Fprintf(&b, " (%d more errors in structuredContent.)", len(r.Errors)-3)
			break
		}
		fmt.Fprintf(&b, " %s", e.Code)
		if e.Field != "" {
			fmt.Fprintf(&b, " at %s", e.Field)
		}
		fmt.Fprintf(&b, ": %s.", strings.TrimSuffix(e.Message, "."))
		if e.Next != "" {
			fmt.Fprintf(&b, " Next: %s.", strings.TrimSuffix(e.Next, "."))
		}
	}
	return b.String()
}
