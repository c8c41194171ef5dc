package approvals

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

func TestPermit(t *testing.T) {
	tests := []struct {
		name      string
		who       ops.Initiator
		operation string
		want      ops.Code
		fragments []string
	}{
		{"a person in a command channel may ask for anything", human("U0ALICE"), "delete-storage", "", nil},
		{"a person outside every channel and group may not ask", human("U0BOB"), "get-cluster-status",
			ops.CodeNotAuthorized, []string{"U0BOB may not use HyperOps", "C0OPS"}},
		{"hyperops itself may ask", ops.Initiator{Kind: ops.System, ID: "hyperops"}, "capacity-report", "", nil},
		{"agent, operation by glob", ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, "get-cluster-status", "", nil},
		{"agent, operation by name", ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, "submit-training-job", "", nil},
		{"agent, operation not allowed", ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}, "delete-storage",
			ops.CodeNotAuthorized, []string{"ops-agent", "delete-storage", "get-*, list-*, submit-training-job, scale-inference", "agents[].operations"}},
		{"unregistered agent", ops.Initiator{Kind: ops.Agent, ID: "U0ROGUE"}, "get-cluster-status",
			ops.CodeNotAuthorized, []string{"U0ROGUE", "not a registered agent", "agents[]"}},
		{"a registered agent reported as a person is still an agent", human("U0AGENT"), "delete-storage",
			ops.CodeNotAuthorized, []string{"delete-storage"}},
		{"unknown initiator kind", ops.Initiator{ID: "U0ALICE"}, "get-cluster-status", ops.CodeNotAuthorized, []string{"unknown kind"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, dir, _ := newPolicy(t, nil)
			dir.set(func(d *directory) { d.failing = map[string]bool{} })
			err := p.Permit(context.Background(), ops.Request{Operation: tc.operation, Initiator: tc.who,
				Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"}}, ops.Spec{Name: tc.operation})
			wantCode(t, err, tc.want, tc.fragments...)
		})
	}
}
