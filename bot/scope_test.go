package bot

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers/agentapi"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// startScoped starts the harness with a test namespace next to ml and ops-agent (on Slack and MCP) scoped to it with
// a risk cap: the second step of the seed's progression (namespaces: [ml-dev], maxRisk: medium).
func startScoped(t *testing.T) *harness {
	return startMCPWith(t, harnessOptions{edit: func(c *config.Config) {
		c.Clusters[0].Namespaces = []string{"ml", "ml-dev"}
		c.Agents[0].Scope = config.AgentScope{Namespaces: []string{"ml-dev"}, MaxRisk: config.RiskMedium}
	}})
}

// scopeCases are the acceptance cases: outside the namespace (refused before anything is stored), a high-risk plan
// ($60/h a widget: nine are $540/h, above the high threshold of $500/h; refused after planning, never sent for
// approval), and a change inside the scope (waits for a lead as before).
var scopeCases = []struct {
	name, id, namespace string
	count               int
	code                ops.Code
	field, message      string
	phase               ops.Phase
}{
	{"outside its namespace", "scoped-ns", "ml", 1, ops.CodeOutOfScope, "namespace",
		"ops-agent's scope allows namespaces ml-dev; ml is outside it", ""},
	{"above its maximum risk", "scoped-risk", "ml-dev", 9, ops.CodeOutOfScope, "risk",
		"ops-agent's scope allows plans up to medium risk; this plan is high risk", ops.PhaseRejected},
	{"inside its scope", "scoped-ok", "ml-dev", 1, "", "", "", ops.PhaseAwaitingApproval},
}

func checkScopeReply(t *testing.T, h *harness, b agentapi.Body, id string, code ops.Code, field, message string, phase ops.Phase) {
	t.Helper()
	if code == "" {
		if len(b.Errors) != 0 || b.Phase != phase {
			t.Errorf("%s: phase %s, errors %+v; want %s and no error", id, b.Phase, b.Errors, phase)
		}
		return
	}
	if len(b.Errors) == 0 || b.Errors[0].Code != code || b.Errors[0].Field != field ||
		!strings.Contains(b.Errors[0].Message, message) || !strings.Contains(b.Errors[0].Next, "agents[0].scope") {
		t.Fatalf("%s: errors %+v, want %s on %s saying %q and where the scope is configured", id, b.Errors, code, field, message)
	}
	rec := h.recordOrNil(id)
	switch {
	case phase == "" && rec != nil:
		t.Errorf("%s: a request refused before planning was stored (%s)", id, rec.Phase)
	case phase != "" && (rec == nil || rec.Phase != phase):
		t.Errorf("%s: record %+v, want %s", id, rec, phase)
	case rec != nil && rec.Approval.Required != 0:
		t.Errorf("%s: a refused plan was sent for approval: %+v", id, rec.Approval)
	}
}

// TestAgentScopeOverDM: an agent scoped to ml-dev and maxRisk medium is refused in another namespace and on a
// high-risk plan, with the scope named; nothing refused reaches the approvals channel or runs.
func TestAgentScopeOverDM(t *testing.T) {
	h := startScoped(t)
	for _, tc := range scopeCases {
		t.Run(tc.name, func(t *testing.T) {
			m := h.agentSays(fmt.Sprintf(`{"operation":"scale-widget","target":{"cluster":%q,"namespace":%q},"workload":{"name":"w1","count":%d},"controls":{"requestId":%q}}`,
				clusterTst, tc.namespace, tc.count, tc.id))
			s := h.waitFor("the reply to "+tc.id, func(s fakeslack.Snapshot) bool { return len(agentReplies(s, m.TS)) >= 1 })
			checkScopeReply(t, h, replyBody(t, agentReplies(s, m.TS)[0]), tc.id, tc.code, tc.field, tc.message, tc.phase)
		})
	}
	s := h.waitFor("the one approval message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chApprove)) == 1 })
	if id := requestID(t, topLevel(s, chApprove)[0]); id != "scoped-ok" {
		t.Errorf("the approvals channel shows %s, want only scoped-ok", id)
	}
	if n := h.ops["scale-widget"].runs.Load(); n != 0 {
		t.Errorf("executed %d times, want 0", n)
	}
}

// TestAgentScopeOverMCP: the same agent over MCP gets the same refusals.
func TestAgentScopeOverMCP(t *testing.T) {
	h := startScoped(t)
	s := h.session(tokenOps, nil)
	for _, tc := range scopeCases {
		t.Run(tc.name, func(t *testing.T) {
			r, res := call(t, s, "scale-widget", map[string]any{"name": "w1", "count": tc.count, "requestId": tc.id,
				"target": map[string]any{"cluster": clusterTst, "namespace": tc.namespace}})
			if res.IsError != (tc.code != "") {
				t.Errorf("isError %v, want %v", res.IsError, tc.code != "")
			}
			checkScopeReply(t, h, r.Body, tc.id, tc.code, tc.field, tc.message, tc.phase)
		})
	}
	if n := h.ops["scale-widget"].runs.Load(); n != 0 {
		t.Errorf("executed %d times, want 0", n)
	}
}

// TestReadOnlyAgent: the first step of the progression. A read-only agent's MCP tools are its reads (and the
// follow tools); a call of a mutating tool, or the same request as a DM, is E_OUT_OF_SCOPE naming the scope, and
// nothing is stored.
func TestReadOnlyAgent(t *testing.T) {
	h := startMCPWith(t, harnessOptions{edit: func(c *config.Config) { c.Agents[0].Scope = config.AgentScope{ReadOnly: true} }})
	s := h.session(tokenOps, nil)
	var got []string
	for n := range toolNames(t, s) {
		got = append(got, n)
	}
	want := []string{"get-widget", hmcp.ToolGetRequest, hmcp.ToolListRequests, hmcp.ToolWaitRequest, hmcp.ToolGetBudget}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("tools/list = %v, want %v", got, want)
	}
	const msg = "ops-agent's scope is read-only; scale-widget changes things"
	r, res := call(t, s, "scale-widget", map[string]any{"name": "w1", "count": 1, "requestId": "ro-mcp"})
	if !res.IsError || len(r.Errors) != 1 || r.Errors[0].Code != ops.CodeOutOfScope || r.Errors[0].Message != msg ||
		!strings.Contains(r.Errors[0].Next, "agents[0].scope.readOnly") {
		t.Errorf("MCP call = %+v, want E_OUT_OF_SCOPE %q", r.Errors, msg)
	}
	m := h.agentSays(`{"operation":"scale-widget","target":{"cluster":"test-eks"},"workload":{"name":"w1","count":1},"controls":{"requestId":"ro-dm"}}`)
	snap := h.waitFor("the DM reply", func(s fakeslack.Snapshot) bool { return len(agentReplies(s, m.TS)) >= 1 })
	b := replyBody(t, agentReplies(snap, m.TS)[0])
	if len(b.Errors) != 1 || b.Errors[0].Code != ops.CodeOutOfScope || b.Errors[0].Message != msg {
		t.Errorf("DM reply = %+v, want E_OUT_OF_SCOPE %q", b.Errors, msg)
	}
	for _, id := range []string{"ro-mcp", "ro-dm"} {
		if rec := h.recordOrNil(id); rec != nil {
			t.Errorf("%s was stored (%s)", id, rec.Phase)
		}
	}
	if r, _ := call(t, s, "get-widget", map[string]any{"name": "w1"}); len(r.Errors) != 0 {
		t.Errorf("a read was refused: %+v", r.Errors)
	}
}
