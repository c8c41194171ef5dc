package handlers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// fakeOp is a catalog entry with a spec only: decoding and parsing never plan or execute.
type fakeOp struct{ spec ops.Spec }

func (o fakeOp) Spec() ops.Spec                                      { return o.spec }
func (fakeOp) Validate(context.Context, *ops.Request) error          { return nil }
func (fakeOp) Plan(context.Context, *ops.Request) (*ops.Plan, error) { return &ops.Plan{}, nil }
func (fakeOp) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return &ops.Result{}, nil
}

func testCatalog() *ops.Catalog {
	c := ops.NewCatalog()
	for _, s := range testSpecs() {
		c.Register(fakeOp{s})
	}
	return c
}

func TestExtractJSON(t *testing.T) {
	tests := []struct {
		text string
		want string
		ok   bool
	}{
		{`{"operation":"x"}`, `{"operation":"x"}`, true},
		{"please run:\n```json\n{\"operation\":\"x\"}\n```\nthanks", `{"operation":"x"}`, true},
		{"status", "", false},
		{`{"a":"&lt;b&gt;"}`, `{"a":"<b>"}`, true},
	}
	for _, tc := range tests {
		got, ok := ExtractJSON(tc.text)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("ExtractJSON(%q) = %q %v, want %q %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDecodeAgentRequest(t *testing.T) {
	cat := testCatalog()
	tests := []struct {
		name, raw string
		code      ops.Code
		field     string
	}{
		{"seed", `{"operation":"submit-training-job","target":{"cluster":"c","namespace":"n"},"workload":{"name":"j","image":"i","replicas":4,"maxHours":2},"controls":{"requestId":"r","dryRun":true,"requiresApproval":true}}`, "", ""},
		{"iamRole", `{"operation":"submit-training-job","workload":{"name":"j","iamRole":"arn"}}`, ops.CodeForbiddenField, "workload.iamRole"},
		{"nested privileged any case", `{"operation":"submit-training-job","workload":{"name":"j","extra":[{"PRIVILEGED":true}]}}`, ops.CodeForbiddenField, "workload.extra[0].PRIVILEGED"},
		{"top-level service_account", `{"operation":"submit-training-job","service_account":"x"}`, ops.CodeForbiddenField, "service_account"},
		{"unknown top field", `{"operation":"submit-training-job","targte":{}}`, ops.CodeInvalidArgument, "targte"},
		{"unknown control", `{"operation":"submit-training-job","controls":{"dryrun":true}}`, ops.CodeInvalidArgument, "controls.dryrun"},
		{"unknown workload field", `{"operation":"submit-training-job","workload":{"name":"j","replica":2}}`, ops.CodeInvalidArgument, "workload.replica"},
		{"unknown operation", `{"operation":"submit-trainig-job"}`, ops.CodeUnknownOperation, "operation"},
		{"missing operation", `{"target":{"cluster":"c"}}`, ops.CodeInvalidArgument, "operation"},
		{"wrong type", `{"operation":"submit-training-job","controls":{"dryRun":"yes"}}`, ops.CodeInvalidArgument, "controls.dryRun"},
		{"get-request", `{"operation":"get-request","controls":{"requestId":"r"}}`, "", ""},
		{"get-request without id", `{"operation":"get-request"}`, ops.CodeInvalidArgument, "controls.requestId"},
		{"two objects", `{"operation":"get-request"} {}`, ops.CodeInvalidArgument, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ar, err := DecodeAgentRequest([]byte(tc.raw), cat)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if ar.Operation == "submit-training-job" && (ar.Workload["replicas"] != int64(4) || ar.Workload["max-hours"] != int64(2) || !ar.DryRun) {
					t.Errorf("decoded %+v", ar)
				}
				return
			}
			var e *ops.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Field != tc.field {
				t.Errorf("err = %v, want %s on %q", err, tc.code, tc.field)
			}
		})
	}
}

func TestRequiresApprovalOnlyRaises(t *testing.T) {
	for _, raise := range []bool{false, true} {
		raw := fmt.Sprintf(`{"operation":"stop-training-job","workload":{"name":"j"},"controls":{"requiresApproval":%v}}`, raise)
		ar, err := DecodeAgentRequest([]byte(raw), testCatalog())
		if err != nil {
			t.Fatal(err)
		}
		req := ar.Request(ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"})
		if req.RequiresApproval != raise || req.Initiator.Kind != ops.Agent || req.Origin != "agent" {
			t.Errorf("request = %+v: requiresApproval is carried as asked (the engine only raises with it), the initiator stays an agent", req)
		}
	}
}
