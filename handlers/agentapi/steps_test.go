package agentapi

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// In a DM an agent reads ops' hints as the JSON request that takes the step, never as the placeholder or a slash
// command it cannot run.
func TestStepsInDMTerms(t *testing.T) {
	s := NewSteps([]ops.Spec{
		{Name: "get-capacity", Topic: "capacity", Verb: "show"},
		{Name: "get-inference", Topic: "infer", Verb: "status"},
	})
	for _, tc := range []struct{ in, want string }{
		{"see " + ops.Ask("request show id=train-1"), `see {"operation":"get-request","controls":{"requestId":"train-1"}}`},
		{"see who holds it with " + ops.Ask("request show") + ", then retry", `see who holds it with {"operation":"get-request"} with controls.requestId, then retry`},
		{"check with " + ops.Ask("capacity show") + " before retrying", `check with {"operation":"get-capacity"} before retrying`},
		{"follow it with " + ops.Ask("infer status name=web cluster=c"), `follow it with {"operation":"get-inference","target":{"cluster":"c"},"workload":{"name":"web"}}`},
		{"check the id with " + ops.Ask("requests"), `check the id with a person in Slack ("requests"; no DM operation lists requests)`},
		{"withdraw it: " + ops.Ask("request cancel id=x"), `withdraw it: a lead in Slack ("request cancel"; no DM operation does it)`},
		{"try " + ops.Ask("train list"), `try the operation of "train list" in the request contract`},
		{ops.Again + " (this one stays expired)", "send the same request again with a new controls.requestId (this one stays expired)"},
		{"bare " + ops.Command, "bare the matching operation of the request contract"},
		{"no hint at all", "no hint at all"},
	} {
		if got := s.Say(tc.in, DM); got != tc.want {
			t.Errorf("Say(%q, DM)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// A reply body is said in DM terms everywhere: errors, result and history; its numbers stay exact.
func TestBodyInDMTerms(t *testing.T) {
	s := NewSteps([]ops.Spec{{Name: "get-capacity", Topic: "capacity", Verb: "show"}})
	hint := "check with " + ops.Ask("capacity show")
	b := NewBody(nil, "r1", ops.Errorf(ops.CodeAWSError, "group", hint, "the scale failed"))
	b.Result = &ops.Result{Summary: hint, Data: []byte(`{"n":12345678901234567}`)}
	b.History = []Change{{To: ops.PhaseFailed, Note: hint}}
	got := InTerms(b, s, DM)
	want := `check with {"operation":"get-capacity"}`
	if got.Errors[0].Next != want || got.Result.Summary != want || got.History[0].Note != want {
		t.Errorf("body = %+v, want every hint as %s", got, want)
	}
	if string(got.Result.Data) != `{"n":12345678901234567}` {
		t.Errorf("result data = %s, want its numbers exact", got.Result.Data)
	}
	if strings.Contains(got.Errors[0].Next, ops.Command) {
		t.Errorf("next step %q holds %s", got.Errors[0].Next, ops.Command)
	}
}

// An MCP call's arguments decode to the request a DM with the same fields would, and a workload nested as deep as
// the arguments allow is refused as the DM request's depth rule says, named as the DM request's path.
func TestDecodeArgumentsAsADM(t *testing.T) {
	cat := testCatalog()
	got, err := DecodeArguments("submit-training-job", []byte(`{"name":"j","image":"i","replicas":4,"maxHours":2,"target":{"cluster":"c"},"requestId":"r","dryRun":true}`), cat)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode([]byte(`{"operation":"submit-training-job","target":{"cluster":"c"},"workload":{"name":"j","image":"i","replicas":4,"maxHours":2},"controls":{"requestId":"r","dryRun":true}}`), cat)
	if err != nil {
		t.Fatal(err)
	}
	if got.RequestID != want.RequestID || got.DryRun != want.DryRun || got.Target != want.Target || len(got.Workload) != len(want.Workload) ||
		got.Workload["replicas"] != want.Workload["replicas"] || got.Workload["max-hours"] != want.Workload["max-hours"] {
		t.Errorf("arguments decoded as %+v, a DM as %+v", got, want)
	}
	deep := `{"name":"j","x":` + strings.Repeat("[", 15) + strings.Repeat("]", 15) + `}`
	if _, err := ReadArguments([]byte(deep)); err != nil {
		t.Fatalf("the arguments alone nest within the limit: %v", err)
	}
	_, err = DecodeArguments("submit-training-job", []byte(deep), cat)
	if e := ops.AsError(err); e == nil || e.Field != "workload.x"+strings.Repeat("[0]", 14) || !strings.Contains(e.Message, "nests deeper than 16 levels") {
		t.Errorf("err = %v, want the depth refusal at workload.x[0]…", err)
	}
}

// An expired request's body carries E_EXPIRED and its next step, as the record's own errors do, once: an agent reads
// expiry as an outcome of its own, never as a denial.
func TestExpiredBody(t *testing.T) {
	rec := &ops.Record{Request: ops.Request{ID: "r1"}, Phase: ops.PhaseExpired,
		Approval: ops.Approval{Required: 2, Approvers: "leads", ExpiresAt: time.Date(2025, 3, 8, 10, 0, 0, 0, time.UTC)}}
	for _, err := range []error{nil, expiredOutcome(rec)} {
		b := NewBody(rec, "r1", err)
		if b.Phase != ops.PhaseExpired || len(b.Errors) != 1 || b.Errors[0].Code != ops.CodeExpired {
			t.Fatalf("body = %+v, want phase expired and E_EXPIRED once", b)
		}
		if e := b.Errors[0]; !strings.Contains(e.Message, "0 of 2 approvals came before 2025-03-08 10:00 UTC") ||
			!strings.Contains(e.Next, "ask a lead of leads") {
			t.Errorf("E_EXPIRED says %q, next %q", e.Message, e.Next)
		}
	}
	if b := NewBody(&ops.Record{Request: ops.Request{ID: "r2"}, Phase: ops.PhaseDenied}, "r2", nil); len(b.Errors) != 0 {
		t.Errorf("a denied body carries %+v, want no E_EXPIRED", b.Errors)
	}
}
