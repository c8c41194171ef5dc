package approvals

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// jobOp stands in for submit-training-job: it mutates one namespace, and its plan adds the $/h its "hourly"
// parameter says, so the engine's risk rules (cost thresholds, agent mutation, production) decide its risk.
type jobOp struct{ spec ops.Spec }

func newJobOp(name string, mutates bool) *jobOp {
	return &jobOp{spec: ops.Spec{Name: name, Domain: "training", Mutates: mutates,
		Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true}, {Name: "hourly", Kind: ops.KindInt}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Namespace: r.Target.Namespace, Kind: "job", Name: r.Params.String("name")}
		}}}
}

func (o *jobOp) Spec() ops.Spec                               { return o.spec }
func (o *jobOp) Validate(context.Context, *ops.Request) error { return nil }

func (o *jobOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	hourly := float64(req.Params.IntOr("hourly", 0))
	return &ops.Plan{Summary: "run " + req.Params.String("name"),
		Changes: []ops.Change{{Action: ops.ActionCreate, Kind: "Job", Name: req.Params.String("name")}},
		Cost:    ops.Cost{HourlyDelta: hourly, MonthlyDelta: hourly * 720}}, nil
}

func (o *jobOp) Execute(_ context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	return &ops.Result{Summary: "done " + req.Params.String("name")}, nil
}

// exampleWithScope returns example.yaml with ops-agent's scope block (agents[0].scope and its comments) replaced by line,
// written as the docs write it, e.g. "    scope: {readOnly: true}".
func exampleWithScope(t *testing.T, line string) []byte {
	t.Helper()
	text := string(config.Example)
	start := strings.Index(text, "\n    scope:")
	if start < 0 {
		t.Fatal("config/example.yaml has no agents[0].scope block")
	}
	end := start + 1
	for {
		next := strings.IndexByte(text[end:], '\n')
		if next < 0 {
			t.Fatal("config/example.yaml ends inside agents[0].scope")
		}
		end += next + 1
		if !strings.HasPrefix(text[end:], "     ") { // the block's keys and comments are indented deeper than scope:
			break
		}
	}
	return []byte(text[:start+1] + line + "\n" + text[end:])
}

// exampleEngine is the engine of config/example.yaml with ops-agent's scope set to scopeLine: the real policy,
// target resolution and risk rules (approvals.RiskPolicyFor), a store in memory, and stand-ins for the agent's operations.
func exampleEngine(t *testing.T, scopeLine string) (*engine.Engine, *opstest.Store, *config.Config) {
	t.Helper()
	t.Setenv("OPS_AGENT_MCP_TOKEN_SHA256", strings.Repeat("0f", 32))
	cfg, err := config.Parse(exampleWithScope(t, scopeLine), "example.yaml with "+strings.TrimSpace(scopeLine))
	if err != nil {
		t.Fatalf("%s does not validate:\n%v", strings.TrimSpace(scopeLine), err)
	}
	catalog := ops.NewCatalog()
	catalog.Register(newJobOp("submit-training-job", true), newJobOp("list-training-jobs", false))
	clock := newFakeClock()
	store := opstest.NewStore()
	eng := engine.New(catalog, store, opstest.NewLocker(clock), New(cfg, newDirectory(), clock),
		engine.Options{Replica: "r1", Clock: clock, Targets: engine.ConfigTargets(cfg), Risk: RiskPolicyFor(cfg)})
	return eng, store, cfg
}

// agentSubmits sends what ops-agent (example.yaml's agent, on Slack as U0AGENT) asks for.
func agentSubmits(e *engine.Engine, id, operation, namespace string, hourly int) (*ops.Record, error) {
	return e.Submit(context.Background(), ops.Request{ID: id, Operation: operation,
		Initiator: ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"},
		Target:    ops.Target{Cluster: "ml-prod-eks", Namespace: namespace},
		Params:    ops.Params{"name": "fraud-model", "hourly": strconv.Itoa(hourly)}})
}

// TestTestNamespaceOnAProductionCluster (issue 32 point 8): docs/scopes.md's second step, an agent scoped to the test
// namespace ml-dev with maxRisk medium, on ml-prod-eks, which example.yaml marks production. ml-dev is marked
// development, so the agent's change there is medium risk (agent mutation, no production step) and waits for a lead;
// the same change in a production namespace is high risk and refused E_OUT_OF_SCOPE, as is, before planning, a
// change outside the agent's namespaces.
func TestTestNamespaceOnAProductionCluster(t *testing.T) {
	eng, _, _ := exampleEngine(t, "    scope: {namespaces: [ml-dev], maxRisk: medium}")
	rec, err := agentSubmits(eng, "in-ml-dev", "submit-training-job", "ml-dev", 20)
	if err != nil {
		t.Fatalf("a medium change in the agent's test namespace was refused: %v", err)
	}
	if rec.Phase != ops.PhaseAwaitingApproval || rec.Plan.Risk.Level != ops.RiskMedium || rec.Approval.Approvers != "leads" {
		t.Errorf("in ml-dev: phase %s, risk %s %+v, approval %+v; want awaiting-approval at medium risk from leads",
			rec.Phase, rec.Plan.Risk.Level, rec.Plan.Risk.Reasons, rec.Approval)
	}
	_, err = agentSubmits(eng, "in-ml-platform", "submit-training-job", "ml-platform", 20)
	wantCode(t, err, ops.CodeOutOfScope, "ml-platform is outside it")

	// Without the namespace list, the same change in the production namespace reaches planning and is high risk.
	eng, _, _ = exampleEngine(t, "    scope: {maxRisk: medium}")
	rec, err = agentSubmits(eng, "in-ml-platform", "submit-training-job", "ml-platform", 20)
	wantCode(t, err, ops.CodeOutOfScope, "this plan is high risk", "production cluster ml-prod-eks: one level up from medium")
	if rec == nil || rec.Phase != ops.PhaseRejected {
		t.Errorf("the refused plan: %+v, want it stored as rejected", rec)
	}
	if _, err := agentSubmits(eng, "in-ml-dev", "submit-training-job", "ml-dev", 20); err != nil {
		t.Errorf("the same change in ml-dev: %v", err)
	}
}
