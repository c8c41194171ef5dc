package mcp

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

// The hints ops writes (ops.Ask) name the MCP tool that does it, never the Slack placeholder.
func TestHintsInMCPTerms(t *testing.T) {
	a := agentapi.NewSteps([]ops.Spec{
		{Name: "get-capacity", Topic: "capacity", Verb: "show"},
		{Name: "get-inference", Topic: "infer", Verb: "status"},
		{Name: "deploy-inference", Topic: "infer", Verb: "deploy"},
		{Name: "bootstrap-hyperpod-cluster", Topic: "bootstrap", Verb: "hyperpod"},
	})
	for _, tc := range []struct{ in, want string }{
		{"check the id with " + ops.Ask("requests"), "check the id with list_requests"},
		{"see " + ops.Ask("request show id=train-1"), `see get_request {"requestId":"train-1"}`},
		{"wait for request x to finish (" + ops.Ask("request show id=x") + "), then retry",
			`wait for request x to finish (get_request {"requestId":"x"}), then retry`},
		{"see who holds it with " + ops.Ask("request show") + ", then retry", "see who holds it with get_request with its requestId, then retry"},
		{"check with " + ops.Ask("capacity show") + " before retrying", "check with get-capacity before retrying"},
		{"follow it with " + ops.Ask("infer status name=web"), `follow it with get-inference {"name":"web"}`},
		{"deploy it with " + ops.Ask("infer deploy"), "deploy it with deploy-inference"},
		{"HyperPod cluster c does not exist yet (" + ops.Ask("bootstrap hyperpod template=…") + ")",
			`HyperPod cluster c does not exist yet (bootstrap-hyperpod-cluster {"template":"…"})`},
		{"list them: " + ops.Ask("requests pending") + ".", `list them: list_requests {"phases":["awaiting-approval"]}.`},
		{"withdraw it: " + ops.Ask("request cancel id=x"), `withdraw it: a lead in Slack ("request cancel"; no MCP tool does it)`},
		{"try " + ops.Ask("train list"), `try the tool of "train list" in tools/list`},
		{ops.Again + " (this one stays expired)", "call the same tool again with a new requestId (this one stays expired)"},
		{"two: " + ops.Ask("requests") + " and " + ops.Ask("capacity show"), "two: list_requests and get-capacity"},
		{"bare " + ops.Command, "bare the matching tool of tools/list"},
		{"no hint at all", "no hint at all"},
	} {
		got := a.Say(tc.in, agentapi.Tools)
		if got != tc.want {
			t.Errorf("Say(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, ops.Command) {
			t.Errorf("Say(%q) = %q still holds %s", tc.in, got, ops.Command)
		}
	}
}

// Every string of a reply is rendered, however deep: errors, plan, result, history.
func TestReplyInMCPTerms(t *testing.T) {
	a := agentapi.NewSteps([]ops.Spec{{Name: "get-capacity", Topic: "capacity", Verb: "show"}})
	hint := "check with " + ops.Ask("capacity show")
	r := Reply{Body: agentapi.Body{RequestID: "r1", Phase: ops.PhaseFailed,
		Errors:  []agentapi.Error{{Code: ops.CodeAWSError, Message: "the scale failed: " + hint, Next: hint}},
		Result:  &ops.Result{Summary: hint, Data: []byte(`{"n":12345678901234567}`)},
		History: []agentapi.Change{{To: ops.PhaseFailed, Note: hint}}}}
	got := agentapi.InTerms(r, a, agentapi.Tools)
	if s := Summary(got); strings.Contains(s, ops.Command) || !strings.Contains(s, "check with get-capacity") {
		t.Errorf("summary %q, want the hint as get-capacity", s)
	}
	if got.Errors[0].Next != "check with get-capacity" || got.History[0].Note != "check with get-capacity" ||
		got.Result.Summary != "check with get-capacity" {
		t.Errorf("reply = %+v, want every hint rendered", got)
	}
	if string(got.Result.Data) != `{"n":12345678901234567}` {
		t.Errorf("result data = %s, want its numbers exact", got.Result.Data)
	}
	if plain := (Reply{Body: agentapi.Body{RequestID: "r2"}}); agentapi.InTerms(plain, a, agentapi.Tools).RequestID != "r2" {
		t.Error("a reply without hints changed")
	}
}

// An error reply to a call says its next step as the tool to call, never with the Slack placeholder: the reply a
// refused call gets (a request another holds, a change whose answer was lost) names get_request or the catalog's
// tool, in its structuredContent and its summary alike.
func TestErrorReplyNamesATool(t *testing.T) {
	srv := &Server{steps: agentapi.NewSteps([]ops.Spec{{Name: "get-capacity", Topic: "capacity", Verb: "show"}})}
	a := &agentServer{s: srv}
	for _, tc := range []struct {
		err  error
		tool string
	}{
		{ops.Errorf(ops.CodeLocked, "target", "wait for request r0 to finish ("+ops.Ask("request show id=r0")+"), then retry", "request r0 holds the scope"), ToolGetRequest},
		{ops.Errorf(ops.CodeAWSError, "group", "the change may still complete on AWS: check with "+ops.Ask("capacity show"), "UpdateCluster failed"), "get-capacity"},
		{ops.Errorf(ops.CodeNotFound, "requestId", "check the id with "+ops.Ask("requests"), "no such request"), ToolListRequests},
	} {
		r := a.reply(context.Background(), nil, "r1", tc.err)
		res := result(r, r)
		if !res.IsError || len(r.Errors) != 1 || !strings.Contains(r.Errors[0].Next, tc.tool) || strings.Contains(r.Errors[0].Next, ops.Command) {
			t.Errorf("reply to %v = %+v, want an error whose next step names %s", tc.err, r.Body, tc.tool)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !strings.Contains(text, "Next: ") || !strings.Contains(text, tc.tool) || strings.Contains(text, ops.Command) {
			t.Errorf("summary %q, want its next step naming %s and no %s", text, tc.tool, ops.Command)
		}
	}
}
