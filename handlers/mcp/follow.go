package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// The tools that follow requests, and the resource of a request.
const (
	ToolGetRequest   = agentapi.ToolGetRequest
	ToolListRequests = agentapi.ToolListRequests
	ToolWaitRequest  = "wait_request"
	// ResourceTemplate is the URI template of a request's resource.
	ResourceTemplate = "hyperops://requests/{id}"
	resourcePrefix   = "hyperops://requests/"
	// MaxWait bounds wait_request's timeoutSeconds.
	MaxWait = 60
	// untilTerminal waits for any phase after which nothing more happens.
	untilTerminal = "terminal"
)

var allPhases = []ops.Phase{ops.PhaseReceived, ops.PhaseRejected, ops.PhasePlanned, ops.PhaseDone, ops.PhaseAwaitingApproval,
	ops.PhaseDenied, ops.PhaseExpired, ops.PhaseCancelled, ops.PhaseApproved, ops.PhaseExecuting, ops.PhaseSucceeded,
	ops.PhaseFailed, ops.PhaseInterrupted}

func phaseNames() []string {
	out := make([]string, len(allPhases))
	for i, p := range allPhases {
		out[i] = string(p)
	}
	return out
}

var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(bool), OpenWorldHint: new(bool)}

func requestIDSchema() Schema {
	return Schema{"type": "string", "pattern": `^[A-Za-z0-9._:-]{1,128}$`, "description": "the request's id (requestId)"}
}

func (a *agentServer) addFollowTools() {
	a.srv.AddTool(&mcp.Tool{Name: ToolGetRequest, Annotations: readOnly,
		Description: "The state of one of your requests: phase, plan (cost, risk, approvals), result, errors, history, and " +
			"where it waits. The same record a DM get-request shows.",
		InputSchema: Schema{"type": "object", "additionalProperties": false, "required": []string{agentapi.FieldRequestID},
			"properties": Schema{agentapi.FieldRequestID: requestIDSchema()}}}, a.counted(ToolGetRequest, a.getRequest))
	a.srv.AddTool(&mcp.Tool{Name: ToolListRequests, Annotations: readOnly,
		Description: "Your recent requests, newest first, optionally only those in some phases.",
		InputSchema: Schema{"type": "object", "additionalProperties": false, "properties": Schema{
			"phases": Schema{"type": "array", "items": Schema{"type": "string", "enum": phaseNames()}, "description": "only these phases"},
			"limit":  Schema{"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
		}}}, a.counted(ToolListRequests, a.listRequests))
	a.srv.AddTool(&mcp.Tool{Name: ToolWaitRequest, Annotations: readOnly,
		Description: fmt.Sprintf("Wait until one of your requests reaches a phase (or any final phase: %q), at most "+
			"timeoutSeconds (≤ %d); sends a progress notification for each transition while it waits. Call it again to "+
			"wait longer.", untilTerminal, MaxWait),
		InputSchema: Schema{"type": "object", "additionalProperties": false, "required": []string{agentapi.FieldRequestID},
			"properties": Schema{agentapi.FieldRequestID: requestIDSchema(),
				"until":          Schema{"type": "string", "enum": append(phaseNames(), untilTerminal), "default": untilTerminal},
				"timeoutSeconds": Schema{"type": "integer", "minimum": 1, "maximum": MaxWait, "default": 30},
			}}}, a.counted(ToolWaitRequest, a.waitRequest))
	a.srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "request", URITemplate: ResourceTemplate, MIMEType: "application/json",
		Description: "One of your requests, as get_request returns it; subscribe to be told of each transition."}, a.readResource)
}

// followArgs are the arguments of the follow tools, decoded strictly.
type followArgs struct {
	RequestID      string   `json:"requestId"`
	Phases         []string `json:"phases"`
	Limit          *int     `json:"limit"`
	Until          string   `json:"until"`
	TimeoutSeconds *int     `json:"timeoutSeconds"`
}

func decodeFollow(raw json.RawMessage, allowed ...string) (followArgs, error) {
	var fa followArgs
	m, err := agentapi.ReadArguments(raw)
	if err != nil {
		return fa, err
	}
	var errs ops.Errors
	for k := range m {
		if !slices.Contains(allowed, k) {
			errs = append(errs, ops.Errorf(ops.CodeInvalidArgument, k, "valid arguments: "+strings.Join(allowed, ", "), "unknown argument %s", k))
		}
	}
	if len(errs) > 0 {
		return fa, errs
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &fa); err != nil {
			return fa, ops.Errorf(ops.CodeInvalidArgument, "", "see the tool's input schema", "bad arguments: %v", err)
		}
	}
	if slices.Contains(allowed, agentapi.FieldRequestID) && fa.RequestID == "" {
		return fa, ops.Errorf(ops.CodeInvalidArgument, agentapi.FieldRequestID, "add requestId: the id the request was made with", "requestId is required")
	}
	return fa, nil
}

// own reads a request and refuses another initiator's: an agent sees its own requests (its DMs' included), also
// after a person took one over.
func (a *agentServer) own(ctx context.Context, id string) (*ops.Record, error) {
	// The agent's own request with this id is stored under a scoped id when another initiator had the id first.
	if rec, err := a.s.opts.Engine.Get(ctx, engine.ScopedRequestID(id, a.agent.Initiator.ID)); err == nil && rec.Request.Initiator.ID == a.agent.Initiator.ID {
		return rec, nil
	}
	rec, err := a.s.opts.Engine.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Request.Initiator.ID != a.agent.Initiator.ID {
		return nil, ops.Errorf(ops.CodeNotAuthorized, agentapi.FieldRequestID, "use list_requests to see your own requests",
			"request %s was not asked by agent %s: an agent sees only its own requests", id, a.agent.Name())
	}
	return rec, nil
}

func (a *agentServer) getRequest(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fa, err := decodeFollow(req.Params.Arguments, agentapi.FieldRequestID)
	if err != nil {
		r := a.reply(ctx, nil, "", err)
		return result(r, r), nil
	}
	rec, err := a.own(ctx, fa.RequestID)
	r := a.reply(ctx, rec, fa.RequestID, err)
	return result(r, r), nil
}

func (a *agentServer) listRequests(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fa, err := decodeFollow(req.Params.Arguments, "phases", "limit")
	q := engine.ListQuery{Initiator: a.agent.Initiator.ID, Limit: 20}
	if err == nil && fa.Limit != nil {
		if *fa.Limit < 1 || *fa.Limit > 100 {
			err = ops.Errorf(ops.CodeInvalidArgument, "limit", "use 1 to 100", "limit=%d is out of range", *fa.Limit)
		}
		q.Limit = *fa.Limit
	}
	for _, p := range fa.Phases {
		if err == nil && !slices.Contains(allPhases, ops.Phase(p)) {
			err = ops.Errorf(ops.CodeInvalidArgument, "phases", "phases: "+strings.Join(phaseNames(), ", "), "unknown phase %q", p)
		}
		q.Phases = append(q.Phases, ops.Phase(p))
	}
	var recs []*ops.Record
	if err == nil {
		recs, err = a.s.opts.Engine.List(ctx, q)
	}
	if err != nil {
		r := a.reply(ctx, nil, "", err)
		return result(r, r), nil
	}
	out := ListReply{Requests: []agentapi.Body{}}
	for _, rec := range recs {
		b := agentapi.NewBody(rec, rec.ID(), nil)
		b.History = nil
		out.Requests = append(out.Requests, b)
	}
	out = agentapi.InTerms(out, a.s.steps, agentapi.Tools)
	text := fmt.Sprintf("%d request(s) of agent %s.", len(out.Requests), a.agent.Name())
	for _, b := range out.Requests {
		text += fmt.Sprintf(" %s (%s): %s.", b.RequestID, b.Operation, b.Phase)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
}

// waitRequest reads the request when the wait starts and after each change (Options.Changes) until it reaches the
// phase, ends elsewhere, or the time is up, telling each new version as a progress notification (progress = the
// record's version) when the client asked for progress.
func (a *agentServer) waitRequest(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fa, err := decodeFollow(req.Params.Arguments, agentapi.FieldRequestID, "until", "timeoutSeconds")
	timeout := 30
	if err == nil && fa.TimeoutSeconds != nil {
		if timeout = *fa.TimeoutSeconds; timeout < 1 || timeout > MaxWait {
			err = ops.Errorf(ops.CodeInvalidArgument, "timeoutSeconds", fmt.Sprintf("use 1 to %d, and call again to wait longer", MaxWait),
				"timeoutSeconds=%d is out of range", timeout)
		}
	}
	until := fa.Until
	if until == "" {
		until = untilTerminal
	}
	if err == nil && until != untilTerminal && !slices.Contains(allPhases, ops.Phase(until)) {
		err = ops.Errorf(ops.CodeInvalidArgument, "until", "until: "+strings.Join(append(phaseNames(), untilTerminal), ", "), "unknown phase %q", until)
	}
	if err != nil {
		r := a.reply(ctx, nil, fa.RequestID, err)
		return result(r, WaitReply{Reply: r, Until: until}), nil
	}
	release, err := a.holdWait()
	if err != nil {
		r := a.reply(ctx, nil, fa.RequestID, err)
		return result(r, WaitReply{Reply: r, Until: until}), nil
	}
	defer release()
	wctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Second)
	defer cancel()
	token := req.Params.GetProgressToken()
	// Watch before the first read: a change stored between the read and the wait still wakes it.
	changed, stop := a.s.opts.Changes.Watch(fa.RequestID)
	defer stop()
	var told int64
	for {
		rec, err := a.own(ctx, fa.RequestID)
		if err != nil {
			r := a.reply(ctx, nil, fa.RequestID, err)
			return result(r, WaitReply{Reply: r, Until: until}), nil
		}
		reached := reachedPhase(rec.Phase, until)
		if token != nil && rec.Version > told {
			told = rec.Version
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(rec.Version),
				Message: fmt.Sprintf("%s is %s", rec.ID(), rec.Phase)})
		}
		if reached || rec.Phase.Terminal() {
			return a.waited(ctx, rec, until, reached), nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return a.waited(ctx, rec, until, false), nil
		case <-changed:
		}
	}
}

func reachedPhase(p ops.Phase, until string) bool {
	if until == untilTerminal {
		return p.Terminal()
	}
	return string(p) == until
}

func (a *agentServer) waited(ctx context.Context, rec *ops.Record, until string, reached bool) *mcp.CallToolResult {
	r := a.reply(ctx, rec, rec.ID(), nil)
	res := result(r, WaitReply{Reply: r, Until: until, Reached: reached})
	if !reached {
		tc := res.Content[0].(*mcp.TextContent)
		tc.Text += fmt.Sprintf(" It has not reached %s yet.", until)
		if !rec.Phase.Terminal() {
			tc.Text += " Call wait_request again to wait longer."
		}
	}
	return res
}

func requestURI(id string) string { return resourcePrefix + id }

func idOfURI(uri string) (string, bool) {
	id, ok := strings.CutPrefix(uri, resourcePrefix)
	return id, ok && id != "" && !strings.ContainsAny(id, "/?#")
}

func (a *agentServer) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	id, ok := idOfURI(req.Params.URI)
	if !ok {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	rec, err := a.own(ctx, id)
	if err != nil {
		if ue := ops.AsError(err); ue.Code == ops.CodeNotFound || ue.Code == ops.CodeNotAuthorized {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return nil, err
	}
	b, err := json.Marshal(a.reply(ctx, rec, id, nil))
	if err != nil {
		return nil, fmt.Errorf("encode request %s: %w", id, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscriptions are what follows the agent's requests: the requests each session subscribed to (a session's own:
// another session's unsubscribe or close leaves them alone), the version last told of each request that may still
// change, and the wait_request calls in flight. Together they are capped (Limits.WaitsPerAgent).
type subscriptions struct {
	mu        sync.Mutex
	bySession map[*mcp.ServerSession]map[string]bool
	told      map[string]int64
	// subscribed counts the entries of bySession; waiting the wait_request calls in flight.
	subscribed int
	waiting    int
}

func newSubscriptions() *subscriptions {
	return &subscriptions{bySession: map[*mcp.ServerSession]map[string]bool{}, told: map[string]int64{}}
}

func (s *subscriptions) heldLocked() int { return s.subscribed + s.waiting }

func (a *agentServer) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	id, ok := idOfURI(req.Params.URI)
	if !ok {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	rec, err := a.own(ctx, id)
	if err != nil {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	a.pruneClosed() // a closed session's subscriptions count no more
	a.subs.mu.Lock()
	defer a.subs.mu.Unlock()
	ids := a.subs.bySession[req.Session]
	if ids[id] {
		return nil // subscribed already: still one subscription
	}
	if err := a.subs.roomLocked(a); err != nil {
		return limitError(err, "waits per agent", "mcp.maxWaitsPerAgent", a.s.limits.WaitsPerAgent, a.subs.heldLocked())
	}
	if ids == nil {
		ids = map[string]bool{}
		a.subs.bySession[req.Session] = ids
	}
	ids[id] = true
	a.subs.subscribed++
	// A request that ended changes no more: it stays subscribed (and counted) but is not read again.
	if _, watched := a.subs.told[id]; !watched && !rec.Phase.Terminal() {
		a.subs.told[id] = rec.Version
	}
	return nil
}

// limitError is a refusal over a limit as a JSON-RPC error, for the methods whose answer is not a tool result.
func limitError(err error, limit, key string, max, held int) error {
	e := ops.AsError(err)
	data, _ := json.Marshal(LimitData{Limit: limit, ConfigKey: key, Max: max, Held: held, Next: e.Next})
	return &jsonrpc.Error{Code: CodeLimit, Message: e.Message + ": " + e.Next, Data: data}
}

func (a *agentServer) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	id, _ := idOfURI(req.Params.URI)
	a.subs.mu.Lock()
	defer a.subs.mu.Unlock()
	a.subs.dropLocked(req.Session, id)
	return nil
}

// dropLocked ends one session's subscription to a request, and stops reading the request when no session is left
// subscribed to it.
func (s *subscriptions) dropLocked(ss *mcp.ServerSession, id string) {
	ids := s.bySession[ss]
	if !ids[id] {
		return
	}
	delete(ids, id)
	s.subscribed--
	if len(ids) == 0 {
		delete(s.bySession, ss)
	}
	for _, other := range s.bySession {
		if other[id] {
			return
		}
	}
	delete(s.told, id)
}

// pruneClosed drops the subscriptions of sessions that ended (closed by the client, or idle too long).
func (a *agentServer) pruneClosed() {
	live := map[*mcp.ServerSession]bool{}
	for ss := range a.srv.Sessions() {
		live[ss] = true
	}
	a.subs.mu.Lock()
	defer a.subs.mu.Unlock()
	for ss, ids := range a.subs.bySession {
		if live[ss] {
			continue
		}
		for id := range ids {
			a.subs.dropLocked(ss, id)
		}
	}
}

// tellSubscribers sends notifications/resources/updated for every subscribed request that may have changed (read
// says which) and whose version did. A request that ended is told once more and then no longer read; one that is
// gone from the store is not read again.
func (a *agentServer) tellSubscribers(ctx context.Context, read func(id string) bool) {
	a.pruneClosed()
	a.subs.mu.Lock()
	ids := make([]string, 0, len(a.subs.told))
	for id := range a.subs.told {
		if read(id) {
			ids = append(ids, id)
		}
	}
	a.subs.mu.Unlock()
	for _, id := range ids {
		rec, err := a.own(ctx, id)
		if err != nil {
			if ops.AsError(err).Code == ops.CodeNotFound {
				a.subs.mu.Lock()
				delete(a.subs.told, id)
				a.subs.mu.Unlock()
			}
			continue
		}
		a.subs.mu.Lock()
		v, watched := a.subs.told[id]
		changed := watched && rec.Version > v
		if changed {
			a.subs.told[id] = rec.Version
		}
		if watched && rec.Phase.Terminal() {
			delete(a.subs.told, id)
		}
		a.subs.mu.Unlock()
		if changed {
			_ = a.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: requestURI(id)})
		}
	}
}

// Followed is how many requests the agents' subscriptions still follow (for tests and metrics).
func (s *Server) Followed() int {
	n := 0
	for _, a := range s.agents {
		a.pruneClosed() // sessions end without telling: what they followed is dropped when anyone looks
		a.subs.mu.Lock()
		n += len(a.subs.told)
		a.subs.mu.Unlock()
	}
	return n
}
