package approvals

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// The seed's progression is three scopes of one agent: diagnose (read-only), a test namespace with a risk cap, then
// production (no scope).
var (
	diagnose = config.AgentScope{ReadOnly: true}
	testNS   = config.AgentScope{Clusters: []string{"ml-prod-eks"}, Namespaces: []string{"ml-research"}, MaxRisk: config.RiskMedium}
	scopedTo = func(s config.AgentScope) func(*config.Config) {
		return func(c *config.Config) { c.Agents[0].Scope = s }
	}
	opsAgent  = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}
	submit    = ops.Spec{Name: "submit-training-job", Mutates: true}
	status    = ops.Spec{Name: "get-cluster-status", ClusterWide: true}
	scale     = ops.Spec{Name: "scale-capacity", Mutates: true, ClusterWide: true}
	listJobs  = ops.Spec{Name: "list-training-jobs"}
	inProd    = ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"}
	inTestNS  = ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-research"}
	onDev     = ops.Target{Cluster: "ml-dev", Namespace: "ml-platform"}
	allowAll  = func(c *config.Config) { c.Agents[0].Operations = []string{"*"} }
	withScope = func(s config.AgentScope) func(*config.Config) {
		return func(c *config.Config) { allowAll(c); scopedTo(s)(c) }
	}
)

// TestPermitScope: a request outside the agent's scope is refused with E_OUT_OF_SCOPE, naming the scope, what is
// outside it and where the scope is configured; inside it, the agent's operations decide as before.
func TestPermitScope(t *testing.T) {
	tests := []struct {
		name      string
		scope     config.AgentScope
		spec      ops.Spec
		target    ops.Target
		want      ops.Code
		field     string
		fragments []string
	}{
		{"read-only agent reads", diagnose, listJobs, inProd, "", "", nil},
		{"read-only agent may not change anything", diagnose, submit, inTestNS, ops.CodeOutOfScope, "operation",
			[]string{"ops-agent's scope is read-only; submit-training-job changes things", "agents[0].scope.readOnly"}},
		{"scoped agent in its namespace", testNS, submit, inTestNS, "", "", nil},
		{"scoped agent outside its namespace", testNS, submit, inProd, ops.CodeOutOfScope, "namespace",
			[]string{"ops-agent's scope allows namespaces ml-research; ml-platform is outside it", "send it with namespace ml-research", "agents[0].scope.namespaces"}},
		{"scoped agent reads outside its namespace too: no", testNS, listJobs, inProd, ops.CodeOutOfScope, "namespace",
			[]string{"ml-platform is outside it"}},
		{"scoped agent outside its clusters", testNS, submit, onDev, ops.CodeOutOfScope, "cluster",
			[]string{"ops-agent's scope allows clusters ml-prod-eks; ml-dev is outside it", "agents[0].scope.clusters"}},
		{"scoped agent reads a whole cluster", testNS, status, inProd, "", "", nil},
		{"scoped agent may not change a whole cluster", testNS, scale, inTestNS, ops.CodeOutOfScope, "operation",
			[]string{"ops-agent's scope allows namespaces ml-research; scale-capacity changes cluster ml-prod-eks as a whole, which is outside it"}},
		{"production: no scope", config.AgentScope{}, scale, inProd, "", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newPolicy(t, withScope(tc.scope))
			err := p.Permit(context.Background(), ops.Request{Operation: tc.spec.Name, Initiator: opsAgent, Target: tc.target}, tc.spec)
			wantCode(t, err, tc.want, tc.fragments...)
			if tc.want != "" && ops.AsError(err).Field != tc.field {
				t.Errorf("field %q, want %q", ops.AsError(err).Field, tc.field)
			}
		})
	}
}

// TestPermitScopeIsForAgentsOnly: people are never held to an agent's scope, even a person whose Slack ID is not
// the agent's; operations still come first for an agent.
func TestPermitScopeIsForAgentsOnly(t *testing.T) {
	p, dir, _ := newPolicy(t, scopedTo(testNS))
	dir.set(func(d *directory) { d.failing = map[string]bool{} })
	if err := p.Permit(context.Background(), ops.Request{Operation: "scale-capacity", Initiator: human("U0ALICE"), Target: onDev}, scale); err != nil {
		t.Errorf("a person was held to an agent's scope: %v", err)
	}
	err := p.Permit(context.Background(), ops.Request{Operation: "delete-storage", Initiator: opsAgent, Target: onDev}, ops.Spec{Name: "delete-storage", Mutates: true})
	wantCode(t, err, ops.CodeNotAuthorized, "may not request delete-storage")
}

// TestRequirementRefusesAboveMaxRisk: after planning, a plan above the agent's maxRisk is refused, naming the cap,
// the plan's risk and the reason that set it, and is never given an approval; at or below it, the rules decide.
func TestRequirementRefusesAboveMaxRisk(t *testing.T) {
	high := ops.Risk{}
	high.Add(ops.RiskMedium, "mutation requested by agent ops-agent")
	high.Add(ops.RiskHigh, "adds $612.00/h (high threshold $500/h)")
	medium := ops.Risk{}
	medium.Add(ops.RiskMedium, "mutation requested by agent ops-agent")
	tests := []struct {
		name      string
		scope     config.AgentScope
		who       ops.Initiator
		risk      ops.Risk
		want      ops.Code
		fragments []string
	}{
		{"agent at its cap", testNS, opsAgent, medium, "", nil},
		{"agent above its cap", testNS, opsAgent, high, ops.CodeOutOfScope, []string{
			"ops-agent's scope allows plans up to medium risk; this plan is high risk (adds $612.00/h (high threshold $500/h)), so it was refused, not sent for approval",
			"agents[0].scope.maxRisk"}},
		{"no cap: critical", config.AgentScope{}, opsAgent, high, "", nil},
		{"people have no cap", testNS, human("U0ALICE"), high, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newPolicy(t, scopedTo(tc.scope))
			req := ops.Request{Operation: "submit-training-job", Initiator: tc.who, Target: inTestNS}
			a, err := p.Requirement(context.Background(), req, &ops.Plan{Risk: tc.risk})
			wantCode(t, err, tc.want, tc.fragments...)
			if tc.want != "" && a.Required != 0 {
				t.Errorf("a refused plan was given an approval: %+v", a)
			}
		})
	}
}
