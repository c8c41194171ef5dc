package bot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/handlers/agentapi"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// The agents' MCP tokens: ops-agent (also on Slack as U0AGENT) and reader, an MCP-only agent that may only read.
const (
	tokenOps    = "hyperops-mcp-ops-agent-0123456789"
	tokenReader = "hyperops-mcp-reader-0123456789"
)

func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// startMCP starts the harness with the MCP listener on and both agents registered; ops-agent may also scale widgets
// (a plan with a cost).
func startMCP(t testing.TB) *harness { return startMCPWith(t, harnessOptions{}) }

// startMCPWith is startMCP over other harness options (o.edit runs after the agents are set).
func startMCPWith(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	edit := o.edit
	o.mcp = true
	o.edit = func(c *config.Config) {
		c.Agents[0].MCP.TokenSHA256 = digest(tokenOps)
		c.Agents[0].Operations = append(c.Agents[0].Operations, "scale-widget")
		c.Agents = append(c.Agents, config.Agent{Name: "reader", MCP: config.AgentMCP{TokenSHA256: digest(tokenReader)},
			Operations: []string{"get-*"}})
		if edit != nil {
			edit(c)
		}
	}
	return startWith(t, o)
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func (h *harness) mcpEndpoint() string { return "http://" + h.mcpAddr + hmcp.Path }

// connect opens an MCP session as the SDK's own client does, over real HTTP.
func (h *harness) connect(token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	return h.connectWith(&mcp.StreamableClientTransport{Endpoint: h.mcpEndpoint(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, opts)
}

func (h *harness) connectWith(tr *mcp.StreamableClientTransport, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v0"}, opts)
	s, err := c.Connect(h.ctx(), tr, nil)
	if err == nil {
		h.t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

func (h *harness) session(token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	s, err := h.connect(token, opts)
	if err != nil {
		h.t.Fatalf("connect to MCP: %v", err)
	}
	return s
}

// call calls a tool and decodes its structuredContent.
func call(t testing.TB, s *mcp.ClientSession, tool string, args map[string]any) (hmcp.WaitReply, *mcp.CallToolResult) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return decodeReply(t, res), res
}

func decodeReply(t testing.TB, res *mcp.CallToolResult) hmcp.WaitReply {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var r hmcp.WaitReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	// Every MCP reply of every test: ops' slash placeholder never reaches an agent.
	if strings.Contains(string(b), ops.Command) {
		t.Errorf("structuredContent holds %s: %s", ops.Command, b)
	}
	if len(res.Content) != 1 {
		t.Fatalf("content = %v, want one text paragraph", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	if strings.Contains(tc.Text, ops.Command) {
		t.Errorf("summary holds %s: %s", ops.Command, tc.Text)
	}
	return r
}

func text(res *mcp.CallToolResult) string { return res.Content[0].(*mcp.TextContent).Text }

// trainArgs is the seed's training request as tool arguments.
func trainArgs(id string, dryRun bool) map[string]any {
	return map[string]any{"name": "fraud-model-v17", "image": "registry.example.com/trainer:v17", "replicas": 4,
		"target": map[string]any{"cluster": clusterTst, "namespace": "ml"}, "requestId": id, "dryRun": dryRun}
}

// keys lists the harness's Redis keys, to show a refused call recorded nothing.
// stateKeys are the keys of the state store: every key of the test's prefix but the Slack client's rate limits
// (the bot's own calls to Slack, such as reconnecting Socket Mode, add those at any time).
func (h *harness) stateKeys() []string {
	return slices.DeleteFunc(h.keys(), func(k string) bool { return strings.HasPrefix(k, "rate:") })
}

func (h *harness) keys() []string {
	h.t.Helper()
	opt, err := redis.ParseURL(h.redis.URL())
	if err != nil {
		h.t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	keys, err := rdb.Keys(h.ctx(), "*"+h.prefix+"*").Result()
	if err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func toolNames(t *testing.T, s *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func TestMCPToolsPerAgent(t *testing.T) {
	h := startMCP(t)
	follow := []string{hmcp.ToolGetRequest, hmcp.ToolListRequests, hmcp.ToolWaitRequest, hmcp.ToolGetBudget}
	for _, tc := range []struct {
		token string
		want  []string
	}{
		// revert_request asks for a change: an agent that may change something is offered it, a reader is not.
		{tokenOps, append([]string{"get-widget", "scale-widget", "submit-training-job", hmcp.ToolRevertRequest}, follow...)},
		{tokenReader, append([]string{"get-widget"}, follow...)},
	} {
		tools := toolNames(t, h.session(tc.token, nil))
		var got []string
		for n := range tools {
			got = append(got, n)
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("tools/list = %v, want %v", got, tc.want)
		}
	}
	tools := toolNames(t, h.session(tokenOps, nil))
	submit, read := tools["submit-training-job"], tools["get-widget"]
	if a := submit.Annotations; a == nil || a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("submit-training-job annotations = %+v, want mutating, idempotent, not destructive", a)
	}
	if a := read.Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("get-widget annotations = %+v, want read-only", a)
	}
	if a := tools["scale-widget"].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("scale-widget annotations = %+v, want destructive (it may scale down)", a)
	}
	schema := func(tl *mcp.Tool) map[string]any {
		b, _ := json.Marshal(tl.InputSchema)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	s := schema(submit)
	if req := fmt.Sprint(s["required"]); !strings.Contains(req, "requestId") || !strings.Contains(req, "name") {
		t.Errorf("submit-training-job requires %s, want name, image and requestId", req)
	}
	replicas := s["properties"].(map[string]any)["replicas"].(map[string]any)
	if replicas["type"] != "integer" || replicas["maximum"] != float64(8) || replicas["minimum"] != float64(1) {
		t.Errorf("replicas schema = %v, want an integer from 1 to the cluster's maxTrainingReplicas 8", replicas)
	}
	if req := fmt.Sprint(schema(read)["required"]); strings.Contains(req, "requestId") {
		t.Errorf("get-widget requires %s, want no requestId for a read", req)
	}
}

// compiled compiles a tool's published input schema with an independent JSON Schema validator.
func compiled(t *testing.T, tl *mcp.Tool) *jsonschema.Schema {
	t.Helper()
	b, _ := json.Marshal(tl.InputSchema)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("tool.json")
	if err != nil {
		t.Fatalf("the schema of %s does not compile: %v", tl.Name, err)
	}
	return sch
}

func validates(t *testing.T, sch *jsonschema.Schema, args map[string]any) error {
	b, _ := json.Marshal(args)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

// The published schema refuses what the server refuses, and the server refuses it whether or not the client
// validated: a wrong type, a count above every cluster's limit, an unknown field, a field that picks an identity.
func TestMCPSchemaRejectsWhatTheEngineRejects(t *testing.T) {
	h := startMCP(t)
	s := h.session(tokenOps, nil)
	sch := compiled(t, toolNames(t, s)["submit-training-job"])
	if err := validates(t, sch, trainArgs("schema-ok", true)); err != nil {
		t.Fatalf("the seed's request does not validate against its own schema: %v", err)
	}
	with := func(k string, v any) map[string]any {
		a := trainArgs("schema-bad", true)
		a[k] = v
		return a
	}
	for _, tc := range []struct {
		name  string
		args  map[string]any
		code  ops.Code
		field string
	}{
		{"wrong type", with("replicas", "four"), ops.CodeInvalidArgument, "replicas"},
		{"out of range", with("replicas", 9), ops.CodeQuotaExceeded, "replicas"},
		{"below range", with("replicas", 0), ops.CodeInvalidArgument, "replicas"},
		{"unknown field", with("replicaz", 2), ops.CodeInvalidArgument, "replicaz"},
		{"forbidden field", with("serviceAccount", "cluster-admin"), ops.CodeForbiddenField, "serviceAccount"},
		{"forbidden field in target", with("target", map[string]any{"cluster": clusterTst, "roleArn": "arn:aws:iam::1:role/x"}),
			ops.CodeForbiddenField, "target.roleArn"},
		{"no requestId", with("requestId", ""), ops.CodeInvalidArgument, "requestId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.args["requestId"] == "" {
				delete(tc.args, "requestId")
			}
			if err := validates(t, sch, tc.args); err == nil {
				t.Errorf("the published schema accepts %v", tc.args)
			}
			r, res := call(t, s, "submit-training-job", tc.args)
			if !res.IsError || r.Phase != ops.PhaseRejected || len(r.Errors) == 0 {
				t.Fatalf("reply = %+v (isError %v), want a rejection", r, res.IsError)
			}
			e := r.Errors[0]
			if e.Code != tc.code || e.Field != tc.field || e.Next == "" {
				t.Errorf("error = %+v, want %s at %s with a next step", e, tc.code, tc.field)
			}
			if !strings.Contains(text(res), string(tc.code)) {
				t.Errorf("summary %q does not name %s", text(res), tc.code)
			}
		})
	}
	if recs, err := h.bot.Engine().List(h.ctx(), engine.ListQuery{}); err != nil || len(recs) != 0 {
		t.Errorf("refused calls recorded %d request(s) (%v)", len(recs), err)
	}
}

func TestMCPAuthentication(t *testing.T) {
	h := startMCP(t)
	// The executors and the tellers create their streams as the bot starts; once both exist, only the refused calls
	// could add a key.
	h.waitUntil("the execution queue and the outbox created", func() bool {
		keys := h.keys()
		return slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "}:exec") }) &&
			slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "}:outbox") })
	})
	before := h.stateKeys()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, tc := range []struct{ name, auth string }{
		{"no token", ""},
		{"wrong token", "Bearer not-a-registered-token"},
		{"not bearer", "Basic " + tokenOps},
	} {
		req, _ := http.NewRequestWithContext(h.ctx(), http.MethodPost, h.mcpEndpoint(), strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: HTTP %d, WWW-Authenticate %q; want 401 with a Bearer challenge", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if _, err := h.connect("not-a-registered-token", nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("SDK client with a wrong token: %v, want a 401", err)
	}
	r, res := call(t, h.session(tokenReader, nil), "submit-training-job", trainArgs("reader-1", false))
	if !res.IsError || len(r.Errors) != 1 || r.Errors[0].Code != ops.CodeNotAuthorized || r.Errors[0].Field != "operation" {
		t.Errorf("reader submitting: %+v, want E_NOT_AUTHORIZED on operation", r)
	}
	if after := h.stateKeys(); !slices.Equal(before, after) {
		t.Errorf("refused calls changed Redis: keys %v, then %v", before, after)
	}
	if n := testutil.ToFloat64(h.bot.Metrics().MCPCalls.WithLabelValues("submit-training-job", string(ops.CodeNotAuthorized))); n != 1 {
		t.Errorf("hyperops_mcp_calls_total{submit-training-job,E_NOT_AUTHORIZED} = %v, want 1", n)
	}
}

// A dry run plans with cost and risk and changes nothing; the same id then commits it: awaiting approval, posted
// once to the approvals channel, and the reply tells where it waits.
func TestMCPDryRunThenCommit(t *testing.T) {
	h := startMCP(t)
	s := h.session(tokenOps, nil)
	args := map[string]any{"name": "w1", "count": 2, "requestId": "scale-w1", "dryRun": true}
	r, res := call(t, s, "scale-widget", args)
	if res.IsError || r.Phase != ops.PhaseDone || r.Plan == nil || r.Plan.Cost.HourlyDelta != 120 || r.Plan.Risk.Level < ops.RiskMedium {
		t.Fatalf("dry run = %+v, want done with a plan costing $120/h at medium risk or more", r)
	}
	if !strings.Contains(text(res), "Risk medium") || !strings.Contains(text(res), "estimated cost") {
		t.Errorf("summary %q does not tell risk and cost", text(res))
	}
	if n := h.ops["scale-widget"].runs.Load(); n != 0 {
		t.Fatalf("a dry run executed %d time(s)", n)
	}
	args["dryRun"] = false
	r, _ = call(t, s, "scale-widget", args)
	if r.Phase != ops.PhaseAwaitingApproval || r.RequestID != "scale-w1" {
		t.Fatalf("commit = %+v, want awaiting-approval", r)
	}
	snap := h.waitFor("the plan in the approvals channel", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chApprove)) == 1 })
	plan := topLevel(snap, chApprove)[0]
	if !hasButton(plan, handlers.ActionApprove) || !hasButton(plan, handlers.ActionTakeOver) || requestID(t, plan) != "scale-w1" {
		t.Errorf("approval message lacks Approve / Take over for scale-w1: %s", plan.Blocks)
	}
	// The plan message is posted by the outbox; its permalink is known once it is remembered.
	h.waitUntil("the permalink", func() bool {
		r, res = call(t, s, hmcp.ToolGetRequest, map[string]any{"requestId": "scale-w1"})
		return r.Waiting != nil && r.Waiting.Permalink != ""
	})
	w := r.Waiting
	if w == nil || w.Channel != chApprove || w.Permalink != fakeslack.Permalink(h.srv.Options().TeamDomain, chApprove, plan.TS) ||
		w.ApproverGroup != "leads" || !slices.Contains(w.Approvers, userLead1) || w.Until == nil {
		t.Errorf("waiting = %+v, want the approvals channel, the plan's permalink and the leads", w)
	}
	if !strings.Contains(text(res), plan.TS[:4]) && !strings.Contains(text(res), "slack.com/archives/"+chApprove) {
		t.Errorf("summary %q does not link the approval message", text(res))
	}
	// The link is made from the workspace's address: an agent's call never waits on Slack.
	if calls := h.srv.APICalls("chat.getPermalink"); len(calls) != 0 {
		t.Errorf("the MCP replies called chat.getPermalink %d times, want none", len(calls))
	}
}

// Client retries: the same call three times (also concurrently) is one request and one approval message; the same
// id with other content is E_IDEMPOTENCY_CONFLICT.
func TestMCPRetriesAreOneRequest(t *testing.T) {
	h := startMCP(t)
	s := h.session(tokenOps, nil)
	var wg sync.WaitGroup
	replies := make([]hmcp.WaitReply, 3)
	for i := range replies {
		wg.Go(func() { replies[i], _ = call(t, s, "submit-training-job", trainArgs("train-retry", false)) })
	}
	wg.Wait()
	for _, r := range replies {
		if r.RequestID != "train-retry" || r.Phase != ops.PhaseAwaitingApproval || r.Version != replies[0].Version {
			t.Errorf("reply = %+v, want the one request awaiting approval", r)
		}
	}
	h.waitFor("the approval message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chApprove)) >= 1 })
	r, _ := call(t, s, "submit-training-job", trainArgs("train-retry", false))
	if r.Version != replies[0].Version {
		t.Errorf("a later retry moved the request: version %d, then %d", replies[0].Version, r.Version)
	}
	if n := len(topLevel(h.srv.Snapshot(), chApprove)); n != 1 {
		t.Errorf("%d approval messages, want 1", n)
	}
	other := trainArgs("train-retry", false)
	other["replicas"] = 2
	r, res := call(t, s, "submit-training-job", other)
	if !res.IsError || len(r.Errors) == 0 || r.Errors[0].Code != ops.CodeIdempotencyConflict || r.Errors[0].Field != "requestId" {
		t.Errorf("other content under the same id = %+v, want E_IDEMPOTENCY_CONFLICT at requestId", r)
	}
	if recs, _ := h.bot.Engine().List(h.ctx(), engine.ListQuery{}); len(recs) != 1 {
		t.Errorf("%d records, want 1", len(recs))
	}
}

// An agent's DM and its MCP calls are one initiator: get_request sees the DM's record, the same request through
// MCP is the same request, and list_requests lists it.
func TestMCPAndDMAreOneRequest(t *testing.T) {
	h := startMCP(t)
	dm := h.agentSays(strings.Replace(seedAgentRequest, `"dryRun": true`, `"dryRun": false`, 1))
	snap := h.waitFor("the DM reply", func(s fakeslack.Snapshot) bool { return len(agentReplies(s, dm.TS)) == 1 })
	viaDM := replyBody(t, agentReplies(snap, dm.TS)[0])
	s := h.session(tokenOps, nil)
	got, _ := call(t, s, hmcp.ToolGetRequest, map[string]any{"requestId": "train-20250308-001"})
	if got.RequestID != viaDM.RequestID || got.Phase != viaDM.Phase || got.Version < viaDM.Version || got.Plan == nil ||
		got.Plan.Hash != viaDM.Plan.Hash {
		t.Fatalf("get_request = %+v, want the DM's record %+v", got.Body, viaDM)
	}
	args := trainArgs("train-20250308-001", false)
	args["requiresApproval"] = true
	again, res := call(t, s, "submit-training-job", args)
	if res.IsError || again.RequestID != viaDM.RequestID || again.Version != got.Version {
		t.Errorf("the DM's request sent over MCP = %+v, want the same request unchanged", again)
	}
	list, _ := s.CallTool(context.Background(), &mcp.CallToolParams{Name: hmcp.ToolListRequests, Arguments: map[string]any{}})
	b, _ := json.Marshal(list.StructuredContent)
	var lr hmcp.ListReply
	_ = json.Unmarshal(b, &lr)
	if len(lr.Requests) != 1 || lr.Requests[0].RequestID != viaDM.RequestID {
		t.Errorf("list_requests = %s, want the one request", b)
	}
	r, res := call(t, h.session(tokenReader, nil), hmcp.ToolGetRequest, map[string]any{"requestId": viaDM.RequestID})
	if !res.IsError || len(r.Errors) == 0 || r.Errors[0].Code != ops.CodeNotAuthorized {
		t.Errorf("another agent reading it = %+v, want E_NOT_AUTHORIZED", r)
	}
	if recs, _ := h.bot.Engine().List(h.ctx(), engine.ListQuery{}); len(recs) != 1 {
		t.Errorf("%d records, want 1", len(recs))
	}
}

// wait_request returns when a lead approved in Slack and the request succeeded, with a progress notification for
// each transition it saw; a subscriber to the request's resource is told of the changes.
func TestMCPWaitRequestAndSubscription(t *testing.T) {
	h := startMCP(t)
	progress := make(chan float64, 64)
	updated := make(chan string, 16)
	s := h.session(tokenOps, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params.Progress },
		ResourceUpdatedHandler:      func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	r, _ := call(t, s, "submit-training-job", trainArgs("train-wait", false))
	if r.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("submit = %+v", r)
	}
	uri := "hyperops://requests/train-wait"
	if err := s.Subscribe(h.ctx(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	read, err := s.ReadResource(h.ctx(), &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, `"phase":"awaiting-approval"`) {
		t.Fatalf("read %s = %+v, %v", uri, read, err)
	}
	short, _ := call(t, s, hmcp.ToolWaitRequest, map[string]any{"requestId": "train-wait", "until": "succeeded", "timeoutSeconds": 1})
	if short.Reached || short.Phase != ops.PhaseAwaitingApproval {
		t.Errorf("wait of 1s before any approval = %+v, want not reached", short)
	}
	done := make(chan hmcp.WaitReply, 1)
	go func() {
		params := &mcp.CallToolParams{Name: hmcp.ToolWaitRequest, Arguments: map[string]any{"requestId": "train-wait", "until": "succeeded", "timeoutSeconds": 60}}
		params.SetProgressToken("wait-1")
		res, err := s.CallTool(context.Background(), params)
		if err != nil {
			t.Error(err)
			done <- hmcp.WaitReply{}
			return
		}
		done <- decodeReply(t, res)
	}()
	snap := h.waitFor("the approval message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chApprove)) == 1 })
	h.click(userLead1, chApprove, topLevel(snap, chApprove)[0].TS, handlers.ActionApprove)
	w := <-done
	if !w.Reached || w.Phase != ops.PhaseSucceeded || w.Result == nil {
		t.Fatalf("wait_request = %+v, want succeeded", w)
	}
	if n := h.ops["submit-training-job"].runs.Load(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	// Notifications may be handled after the call's answer: read them until the final version.
	var seen []float64
	for len(seen) == 0 || seen[len(seen)-1] < float64(w.Version) {
		select {
		case p := <-progress:
			seen = append(seen, p)
		case <-h.ctx().Done():
			t.Fatalf("progress = %v, want versions up to %d", seen, w.Version)
		}
	}
	if len(seen) < 2 || !slices.IsSorted(seen) || seen[len(seen)-1] != float64(w.Version) {
		t.Errorf("progress = %v, want increasing versions ending at %d", seen, w.Version)
	}
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("resource updated %q, want %q", got, uri)
		}
	case <-h.ctx().Done():
		t.Error("no notifications/resources/updated after the approval")
	}
}

// An agent without a Slack user (MCP only) is a registered agent too: it reads, recorded as agent:<name>.
func TestMCPOnlyAgentReads(t *testing.T) {
	h := startMCP(t)
	r, res := call(t, h.session(tokenReader, nil), "get-widget", map[string]any{"name": "w1"})
	if res.IsError || r.Phase != ops.PhaseSucceeded || r.Result == nil || r.Owner != "agent:reader" {
		t.Errorf("reader's get-widget = %+v (%s), want succeeded as agent:reader", r.Body, text(res))
	}
}

// A lead who takes over an agent's request owns it; the agent still follows it and sees the new owner.
func TestMCPTakeOverShowsOwner(t *testing.T) {
	h := startMCP(t)
	s := h.session(tokenOps, nil)
	r, _ := call(t, s, "submit-training-job", trainArgs("train-takeover", false))
	if r.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("submit = %+v", r.Body)
	}
	if rec := h.record("train-takeover"); rec.Request.Origin != "mcp" || rec.Request.Initiator.ID != userAgent || rec.Request.Initiator.Name != "ops-agent" {
		t.Errorf("recorded request: origin %q, initiator %+v; want mcp from U0AGENT (ops-agent)", rec.Request.Origin, rec.Request.Initiator)
	}
	snap := h.waitFor("the approval message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chApprove)) == 1 })
	h.click(userLead1, chApprove, topLevel(snap, chApprove)[0].TS, handlers.ActionTakeOver)
	h.waitUntil("the lead owns it", func() bool { return h.record("train-takeover").Owner.ID == userLead1 })
	got, res := call(t, s, hmcp.ToolGetRequest, map[string]any{"requestId": "train-takeover"})
	if res.IsError || got.Owner != userLead1 {
		t.Errorf("get_request after take over = %+v, want owner %s", got.Body, userLead1)
	}
}

// An agent's request nobody approves in time is told to the agent as expired, never as a denial: its DM thread gets
// phase expired with E_EXPIRED and the next step in DM terms, and get_request over MCP answers the same in tool terms.
func TestAgentHearsExpiryOverDMAndMCP(t *testing.T) {
	h := startMCP(t)
	dm := h.agentSays(strings.Replace(seedAgentRequest, `"dryRun": true`, `"dryRun": false`, 1))
	snap := h.waitFor("the DM reply", func(s fakeslack.Snapshot) bool { return len(agentReplies(s, dm.TS)) == 1 })
	if b := replyBody(t, agentReplies(snap, dm.TS)[0]); b.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("the request is %s, want awaiting-approval", b.Phase)
	}
	h.clock.Advance(2 * time.Hour)
	snap = h.waitFor("the expiry in the DM thread", func(s fakeslack.Snapshot) bool {
		rs := agentReplies(s, dm.TS)
		return len(rs) > 1 && replyBody(t, rs[len(rs)-1]).Phase == ops.PhaseExpired
	})
	rs := agentReplies(snap, dm.TS)
	viaDM := replyBody(t, rs[len(rs)-1])
	if len(viaDM.Errors) != 1 || viaDM.Errors[0].Code != ops.CodeExpired ||
		!strings.Contains(viaDM.Errors[0].Next, "send the same request again with a new controls.requestId") {
		t.Errorf("the DM thread was told %+v, want E_EXPIRED with the next step in DM terms", viaDM.Errors)
	}
	got, res := call(t, h.session(tokenOps, nil), hmcp.ToolGetRequest, map[string]any{"requestId": viaDM.RequestID})
	if res.IsError || got.Phase != ops.PhaseExpired || len(got.Errors) != 1 || got.Errors[0].Code != ops.CodeExpired ||
		!strings.Contains(got.Errors[0].Next, "call the same tool again with a new requestId") {
		t.Errorf("get_request = %+v (isError %v), want phase expired with E_EXPIRED in tool terms", got.Body, res.IsError)
	}
	for _, b := range []agentapi.Body{viaDM, got.Body} {
		if raw, _ := json.Marshal(b); strings.Contains(string(raw), "denied") || strings.Contains(string(raw), ops.Command) {
			t.Errorf("the expiry reads as a denial or holds a placeholder: %s", raw)
		}
	}
}
