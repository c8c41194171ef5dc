package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/kube"
)

// oneRecord is an engine that holds one request.
type oneRecord struct{ rec *ops.Record }

func (e oneRecord) Submit(context.Context, ops.Request) (*ops.Record, error) {
	return e.rec.Clone(), nil
}

func (e oneRecord) Get(_ context.Context, id string) (*ops.Record, error) {
	if id != e.rec.ID() {
		return nil, ops.Errorf(ops.CodeNotFound, "requestId", "check the id with "+ops.Ask("requests"), "no such request")
	}
	return e.rec.Clone(), nil
}

func (e oneRecord) List(context.Context, engine.ListQuery) ([]*ops.Record, error) {
	return []*ops.Record{e.rec.Clone()}, nil
}

func (e oneRecord) Revert(context.Context, string, ops.Request) (*ops.Record, error) {
	return nil, ops.Errorf(ops.CodeNotRevertible, "requestId", "ask for a new request", "nothing to revert here")
}

// agentSession serves engine over MCP (the kube catalog, one agent allowed every operation, token "tok") on a local
// HTTP server and connects the MCP SDK's client to it as agent.
func agentSession(ctx context.Context, t *testing.T, agent ops.Initiator, eng Engine) *mcp.ClientSession {
	t.Helper()
	cat := ops.NewCatalog()
	kube.Register(cat, nil, nil, nil, nil)
	srv := New(Options{Agents: []Agent{NewAgent(agent, []string{"*"}, sha256.Sum256([]byte("tok")))}, Catalog: cat,
		Engine: eng, Changes: engine.NewFeed(nil, nil)}) // nothing changes: the record is the one it is
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v0"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + Path, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: withToken("tok")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// withToken adds the agent's token to every request.
type withToken string

func (b withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// An expired request is told to the agent that asked for it, through the MCP SDK's client, as phase expired with
// E_EXPIRED and a next step in tool terms (call the same tool again with a new requestId, or ask a lead) — by
// get_request, wait_request and list_requests alike, and never as a refusal of the call nor as a denial.
func TestExpiryToldOverMCPAsExpired(t *testing.T) {
	agent := ops.Initiator{Kind: ops.Agent, ID: "agent:ci-agent", Name: "ci-agent"}
	t0 := time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC)
	rec := &ops.Record{Request: ops.Request{ID: "scale-1", Operation: "scale-capacity", Initiator: agent, Origin: "mcp",
		Target: ops.Target{Cluster: "ml-prod-eks"}}, Phase: ops.PhaseExpired, Version: 5, Owner: agent,
		Plan:     &ops.Plan{Summary: "scale gpu-workers from 2 to 4", Hash: "h1"},
		Approval: ops.Approval{Required: 1, Approvers: "leads", ExpiresAt: t0.Add(time.Hour), PlanHash: "h1"},
		History: []ops.Transition{{From: ops.PhaseAwaitingApproval, To: ops.PhaseExpired, At: t0.Add(time.Hour),
			By: ops.Initiator{Kind: ops.System}, Note: "approval window closed", Kind: ops.KindPhase}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := agentSession(ctx, t, agent, oneRecord{rec})

	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{ToolGetRequest, map[string]any{"requestId": "scale-1"}},
		{ToolWaitRequest, map[string]any{"requestId": "scale-1", "timeoutSeconds": 1}},
		{ToolListRequests, map[string]any{"phases": []string{"expired"}}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(res.StructuredContent)
			var r Reply
			if tc.tool == ToolListRequests {
				var l ListReply
				if err := json.Unmarshal(raw, &l); err != nil || len(l.Requests) != 1 {
					t.Fatalf("list_requests answered %s (%v)", raw, err)
				}
				r.Body = l.Requests[0]
			} else if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatalf("%s answered %s: %v", tc.tool, raw, err)
			}
			if res.IsError {
				t.Errorf("%s set isError: reading an expired request is no failed call", tc.tool)
			}
			if r.Phase != ops.PhaseExpired || len(r.Errors) != 1 || r.Errors[0].Code != ops.CodeExpired {
				t.Fatalf("%s told %s, want phase expired with E_EXPIRED", tc.tool, raw)
			}
			next := r.Errors[0].Next
			for _, want := range []string{"call the same tool again with a new requestId", "ask a lead of leads"} {
				if !strings.Contains(next, want) {
					t.Errorf("next step %q lacks %q", next, want)
				}
			}
			if strings.Contains(next, ops.Command) || strings.Contains(next, "controls.") || strings.Contains(string(raw), "denied") {
				t.Errorf("%s told the expiry in another surface's terms or as a denial: %s", tc.tool, raw)
			}
			if tc.tool == ToolGetRequest {
				text := res.Content[0].(*mcp.TextContent).Text
				if !strings.Contains(text, "is expired") || !strings.Contains(text, "E_EXPIRED") || !strings.Contains(text, "Next: call the same tool again") {
					t.Errorf("summary %q, want the phase, the code and the next step", text)
				}
			}
		})
	}
}
