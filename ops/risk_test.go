package ops

import (
	"strings"
	"testing"
)

func TestRiskAssess(t *testing.T) {
	policy := RiskPolicy{MediumHourly: 50, HighHourly: 500, Production: func(c, _ string) bool { return c == "prod" }}
	mut := Spec{Name: "scale-capacity", Mutates: true}
	tests := []struct {
		name   string
		req    Request
		spec   Spec
		cost   Cost
		before Level
		raise  bool
		want   Level
	}{
		{"cheap human change", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 10}, RiskLow, false, RiskLow},
		{"just under medium", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 49.99}, RiskLow, false, RiskLow},
		{"at medium threshold", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 50}, RiskLow, false, RiskMedium},
		{"at high threshold", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 500}, RiskLow, false, RiskHigh},
		{"unknown price is expensive", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{Unknown: []string{"ml.x"}}, RiskLow, false, RiskHigh},
		{"agent mutation at least medium", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Agent}}, mut, Cost{}, RiskLow, false, RiskMedium},
		{"agent read stays low", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Agent}}, Spec{Name: "get-x"}, Cost{}, RiskLow, false, RiskLow},
		{"production one up", Request{Target: Target{Cluster: "prod"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskLow, false, RiskMedium},
		{"production caps at critical", Request{Target: Target{Cluster: "prod"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskCritical, false, RiskCritical},
		{"op reason kept", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskHigh, false, RiskHigh},
		{"a raise steps over the cost", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 50}, RiskLow, true, RiskHigh},
		{"a raise steps over the agent floor", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Agent}}, mut, Cost{}, RiskLow, true, RiskHigh},
		{"a raise from low", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskLow, true, RiskMedium},
		{"production on top of a raise", Request{Target: Target{Cluster: "prod"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskLow, true, RiskHigh},
		{"a raise caps at critical", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskCritical, true, RiskCritical},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Plan{Cost: tt.cost}
			if tt.before > RiskLow {
				p.Risk.Add(tt.before, "operation reason")
			}
			if tt.raise {
				p.Risk.RaiseOneLevel("instance group gpu has 1 faulty node")
			}
			policy.Assess(tt.req, tt.spec, p)
			if p.Risk.Level != tt.want {
				t.Fatalf("level %s, want %s (reasons %+v)", p.Risk.Level, tt.want, p.Risk.Reasons)
			}
			for _, r := range p.Risk.Reasons {
				if r.Level > p.Risk.Level {
					t.Fatalf("reason above the level: %+v", r)
				}
			}
			if tt.raise && !hasReason(p.Risk, "instance group gpu has 1 faulty node: one level up from") {
				t.Errorf("the raise is not among the reasons: %+v", p.Risk.Reasons)
			}
		})
	}
}

func TestFingerprintAndHash(t *testing.T) {
	a := Request{ID: "r1", Operation: "op", Target: Target{Cluster: "c", Namespace: "n"}, Params: Params{"x": int64(1)}, Initiator: Initiator{Kind: Agent, ID: "U1"}}
	b := a
	b.DryRun = true
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("dryRun must not change the fingerprint (a dry run may be committed under the same id)")
	}
	c := a
	c.Params = Params{"x": int64(2)}
	if a.Fingerprint() == c.Fingerprint() {
		t.Fatal("different params, same fingerprint")
	}
	p := &Plan{Observed: "replicas=1"}
	h1 := HashPlan(a, p)
	p.Observed = "replicas=2"
	if HashPlan(a, p) == h1 {
		t.Fatal("observed state must be part of the plan hash")
	}
}

func hasReason(r Risk, prefix string) bool {
	for _, x := range r.Reasons {
		if strings.HasPrefix(x.Text, prefix) {
			return true
		}
	}
	return false
}
