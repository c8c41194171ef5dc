package mcp

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops"
)

// The hints ops writes (ops.Ask) name the MCP tool that does it, never the Slack placeholder.
func TestHintsInMCPTerms(t *testing.T) {
	a := newAsker([]ops.Spec{
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
		{"two: " + ops.Ask("requests") + " and " + ops.Ask("capacity show"), "two: list_requests and get-capacity"},
		{"bare " + ops.Command, "bare the matching tool of tools/list"},
		{"no hint at all", "no hint at all"},
	} {
		got := a.render(tc.in)
		if got != tc.want {
			t.Errorf("render(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, ops.Command) {
			t.Errorf("render(%q) = %q still holds %s", tc.in, got, ops.Command)
		}
	}
}

// Every string of a reply is rendered, however deep: errors, plan, result, history.
func TestReplyInMCPTerms(t *testing.T) {
	a := newAsker([]ops.Spec{{Name: "get-capacity", Topic: "capacity", Verb: "show"}})
	hint := "check with " + ops.Ask("capacity show")
	r := Reply{AgentReplyBody: handlers.AgentReplyBody{RequestID: "r1", Phase: ops.PhaseFailed,
		Errors:  []handlers.AgentError{{Code: ops.CodeAWSError, Message: "the scale failed: " + hint, Next: hint}},
		Result:  &ops.Result{Summary: hint, Data: []byte(`{"n":12345678901234567}`)},
		History: []handlers.AgentChange{{To: ops.PhaseFailed, Note: hint}}}}
	got := inMCPTerms(r, a)
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
	if plain := (Reply{AgentReplyBody: handlers.AgentReplyBody{RequestID: "r2"}}); inMCPTerms(plain, a).RequestID != "r2" {
		t.Error("a reply without hints changed")
	}
}
