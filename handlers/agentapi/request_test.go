package agentapi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// specOp is a catalog entry that only has a spec: decoding reads nothing else.
type specOp struct {
	ops.Operation
	spec ops.Spec
}

func (o specOp) Spec() ops.Spec { return o.spec }

// testCatalog has an operation with every kind of parameter the contract decodes, and one that only names a job.
func testCatalog() *ops.Catalog {
	name := ops.ParamSpec{Name: "name", Kind: ops.KindString, Required: true, Help: "job name"}
	c := ops.NewCatalog()
	c.Register(
		specOp{spec: ops.Spec{Name: "submit-training-job", Topic: "train", Verb: "submit", Mutates: true, Params: []ops.ParamSpec{
			name, {Name: "image", Kind: ops.KindString, Required: true}, {Name: "replicas", Kind: ops.KindInt, Default: "1"},
			{Name: "command", Kind: ops.KindList}, {Name: "max-hours", Kind: ops.KindDuration}}}},
		specOp{spec: ops.Spec{Name: "stop-training-job", Topic: "train", Verb: "stop", Mutates: true, Params: []ops.ParamSpec{name}}},
		specOp{spec: ops.Spec{Name: "delete-storage", Topic: "storage", Verb: "delete", Mutates: true, Params: []ops.ParamSpec{name}}},
	)
	return c
}

func TestDecode(t *testing.T) {
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
			ar, err := Decode([]byte(tc.raw), cat)
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
		ar, err := Decode([]byte(raw), testCatalog())
		if err != nil {
			t.Fatal(err)
		}
		req := ar.Request(ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"})
		if req.RequiresApproval != raise || req.Initiator.Kind != ops.Agent || req.Origin != "agent" {
			t.Errorf("request = %+v: requiresApproval is carried as asked (the engine only raises with it), the initiator stays an agent", req)
		}
	}
}
