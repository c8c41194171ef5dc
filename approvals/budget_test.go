package approvals

import (
	"context"
	"slices"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

const budgetConfig = testConfig + `
budgets:
  - {name: agent-daily, agent: ops-agent, limits: {cost: 2000}}
  - {name: research-weekly, userGroup: S0LEADS, window: week, limits: {cost: 20000}}
  - {name: platform-dev, userGroup: S0PLATFORM, cluster: ml-dev, limits: {gpus: 8}}
  - {name: prod-monthly, cluster: ml-prod-eks, window: month, limits: {cost: 100000}}
  - {name: alice-daily, user: U0ALICE, limits: {cost: 500}}
`

func budgetPolicy(t *testing.T, dir *directory) *Policy {
	t.Helper()
	cfg, err := config.Parse([]byte(budgetConfig), "test.yaml")
	if err != nil {
		t.Fatalf("budget config does not parse:\n%v", err)
	}
	return New(cfg, dir, clockwork.NewFakeClockAt(epoch))
}

func names(limits []ops.BudgetLimit) []string {
	var out []string
	for _, l := range limits {
		out = append(out, l.Name)
	}
	return out
}

// Which budgets count a request: its initiator's (agent by name, person by id, team by user group membership),
// narrowed to a cluster when the budget names one, and the cluster's own.
func TestBudgetsCoverARequest(t *testing.T) {
	p := budgetPolicy(t, newDirectory())
	cases := []struct {
		who     ops.Initiator
		cluster string
		want    []string
	}{
		{ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, "ml-prod-eks", []string{"agent-daily", "prod-monthly"}},
		{human("U0LEAD1"), "ml-prod-eks", []string{"research-weekly", "prod-monthly"}},
		{human("U0PLAT"), "ml-dev", []string{"platform-dev"}},
		{human("U0PLAT"), "ml-prod-eks", []string{"prod-monthly"}},
		{human("U0ALICE"), "ml-dev", []string{"alice-daily"}},
	}
	for _, c := range cases {
		got, err := p.Budgets(context.Background(), ops.Request{Initiator: c.who, Target: ops.Target{Cluster: c.cluster}})
		if err != nil || !slices.Equal(names(got), c.want) {
			t.Errorf("Budgets(%s on %s) = %q, %v; want %q", c.who.ID, c.cluster, names(got), err, c.want)
		}
	}
}

// A team's membership that cannot be read refuses the request (its budget could not be counted), naming the team.
func TestBudgetsFailClosedWithoutTheTeam(t *testing.T) {
	dir := newDirectory()
	dir.set(func(d *directory) { d.failing["S0LEADS"] = true })
	_, err := budgetPolicy(t, dir).Budgets(context.Background(), ops.Request{Initiator: human("U0LEAD1"), Target: ops.Target{Cluster: "ml-prod-eks"}})
	wantCode(t, err, ops.CodeStateUnavailable, "S0LEADS", "research-weekly")
}

// The capacity report's spend per team lists the team budgets that count requests on the cluster, and nothing else.
func TestTeamBudgetsOfACluster(t *testing.T) {
	p := budgetPolicy(t, newDirectory())
	for cluster, want := range map[string][]string{
		"ml-prod-eks": {"research-weekly"},
		"ml-dev":      {"research-weekly", "platform-dev"},
	} {
		got, err := p.TeamBudgets(context.Background(), cluster)
		if err != nil || !slices.Equal(names(got), want) {
			t.Errorf("TeamBudgets(%s) = %q, %v; want %q", cluster, names(got), err, want)
		}
	}
	got, _ := p.TeamBudgets(context.Background(), "ml-dev")
	if got[0].Holder != "team S0LEADS" || got[1].Holder != "team S0PLATFORM on ml-dev" || got[0].Path != "budgets[1]" {
		t.Errorf("holders %q, %q (path %s); want the team and its cluster", got[0].Holder, got[1].Holder, got[0].Path)
	}
}

// An agent's /hp budget, get_budget and Home list only the budgets of clusters its scope lets it target: a cluster's
// budget, or its own narrowed to a cluster, outside its scope names a cluster it may not touch and what is spent
// there (issue 32 point 3). Budgets on every cluster and those of its clusters stay; an unscoped agent and people
// see every budget that covers them, as before.
func TestBudgetsOfAnAgentStayInItsScope(t *testing.T) {
	cfg, err := config.Parse([]byte(budgetConfig+`  - {name: agent-prod, agent: ops-agent, cluster: ml-prod-eks, limits: {cost: 900}}
  - {name: dev-daily, cluster: ml-dev, limits: {cost: 300}}
`), "test.yaml")
	if err != nil {
		t.Fatalf("budget config does not parse:\n%v", err)
	}
	agent, ctx := ops.Initiator{Kind: ops.Agent, ID: "U0AGENT"}, context.Background()
	p := New(cfg, newDirectory(), clockwork.NewFakeClockAt(epoch))
	for _, c := range []struct {
		scope config.AgentScope
		want  []string
	}{
		{config.AgentScope{}, []string{"agent-daily", "prod-monthly", "agent-prod", "dev-daily"}},
		{config.AgentScope{Clusters: []string{"ml-dev"}}, []string{"agent-daily", "dev-daily"}},
		{config.AgentScope{Clusters: []string{"ml-dev"}, Namespaces: []string{"ml-platform"}, ReadOnly: true}, []string{"agent-daily", "dev-daily"}},
		{config.AgentScope{Clusters: []string{"ml-prod-eks"}}, []string{"agent-daily", "prod-monthly", "agent-prod"}},
	} {
		cfg.Agents[0].Scope = c.scope
		got, err := p.BudgetsOf(ctx, agent)
		if err != nil || !slices.Equal(names(got), c.want) {
			t.Errorf("BudgetsOf(ops-agent scoped to %+v) = %q, %v; want %q", c.scope, names(got), err, c.want)
		}
	}
	got, err := p.BudgetsOf(ctx, human("U0LEAD1"))
	if want := []string{"research-weekly", "prod-monthly", "dev-daily"}; err != nil || !slices.Equal(names(got), want) {
		t.Errorf("BudgetsOf(U0LEAD1) = %q, %v; want %q", names(got), err, want)
	}
}
