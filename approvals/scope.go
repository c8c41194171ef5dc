package approvals

import (
	"fmt"
	"strings"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// permitScope refuses a request outside the agent's scope (agents[].scope) with E_OUT_OF_SCOPE, naming the scope,
// the rule and the next step: a mutating operation for a read-only agent, a cluster or namespace it is not scoped
// to, or a change of a whole cluster by an agent scoped to namespaces. The target is resolved (defaults filled).
func (p *Policy) permitScope(req ops.Request, spec ops.Spec, agent *config.Agent) error {
	s := agent.Scope
	at := p.scopePath(agent)
	if s.ReadOnly && spec.Mutates {
		return ReadOnlyRefusal(agent.Name, at, spec.Name)
	}
	if cl := req.Target.Cluster; !s.AllowsCluster(cl) {
		return ops.Errorf(ops.CodeOutOfScope, "cluster",
			fmt.Sprintf("send it to cluster %s, or ask a platform admin to add %s to %s.clusters", s.Clusters[0], ops.Echo(cl), at),
			"%s's scope allows clusters %s; %s is outside it", agent.Name, strings.Join(s.Clusters, ", "), ops.Echo(cl))
	}
	if len(s.Namespaces) == 0 || spec.ClusterWide && !spec.Mutates {
		return nil
	}
	allowed := strings.Join(s.Namespaces, ", ")
	if spec.ClusterWide {
		return ops.Errorf(ops.CodeOutOfScope, "operation",
			fmt.Sprintf("ask a person to request it, or ask a platform admin to remove %s.namespaces", at),
			"%s's scope allows namespaces %s; %s changes cluster %s as a whole, which is outside it",
			agent.Name, allowed, spec.Name, req.Target.Cluster)
	}
	if ns := req.Target.Namespace; !s.AllowsNamespace(ns) {
		return ops.Errorf(ops.CodeOutOfScope, "namespace",
			fmt.Sprintf("send it with namespace %s, or ask a platform admin to add %s to %s.namespaces", s.Namespaces[0], ops.Echo(ns), at),
			"%s's scope allows namespaces %s; %s is outside it", agent.Name, allowed, ops.Echo(ns))
	}
	return nil
}

// ReadOnlyRefusal is the E_OUT_OF_SCOPE answer to a read-only agent (its scope configured at at, e.g.
// agents[0].scope) asking for operation, which changes things. The MCP server gives it for a mutating tool it does
// not list to such an agent.
func ReadOnlyRefusal(agent, at, operation string) *ops.Error {
	return ops.Errorf(ops.CodeOutOfScope, "operation",
		fmt.Sprintf("use a read-only operation (get-*, list-*), ask a person to request %s, or ask a platform admin to lift %s.readOnly", operation, at),
		"%s's scope is read-only; %s changes things", agent, operation)
}

// ScopePath is where the scope of the agent at index i of agents[] is configured.
func ScopePath(i int) string { return fmt.Sprintf("agents[%d].scope", i) }

// checkRisk refuses a plan whose risk is above the agent's scope.maxRisk (E_OUT_OF_SCOPE): it is never sent for
// approval, since no approver can widen what the configuration allows the agent. Called after planning, so the
// refusal names the plan's risk and the reason that set it.
func (p *Policy) checkRisk(req ops.Request, plan *ops.Plan) error {
	agent, ok := p.cfg.Agent(req.Initiator.ID)
	if !ok || p.kindOf(req.Initiator) != ops.Agent {
		return nil
	}
	limit, err := ops.ParseLevel(agent.Scope.Risk())
	if err != nil || plan.Risk.Level <= limit {
		return nil
	}
	why := ""
	for _, x := range plan.Risk.Reasons {
		if x.Level == plan.Risk.Level {
			why = " (" + x.Text + ")"
			break
		}
	}
	return ops.Errorf(ops.CodeOutOfScope, "risk",
		fmt.Sprintf("make a smaller change (fewer replicas or GPUs, a shorter run, a test namespace), ask a person to request it, or ask a platform admin to raise %s.maxRisk",
			p.scopePath(agent)),
		"%s's scope allows plans up to %s risk; this plan is %s risk%s, so it was refused, not sent for approval",
		agent.Name, limit, plan.Risk.Level, why)
}

// scopePath is where the agent's scope is configured, e.g. agents[0].scope.
func (p *Policy) scopePath(agent *config.Agent) string {
	for i := range p.cfg.Agents {
		if p.cfg.Agents[i].Name == agent.Name {
			return ScopePath(i)
		}
	}
	return "agents[].scope"
}
