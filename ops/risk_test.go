package ops

import (
	"context"
	"math"
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
		want   Level
	}{
		{"cheap human change", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 10}, RiskLow, RiskLow},
		{"just under medium", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 49.99}, RiskLow, RiskLow},
		{"at medium threshold", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 50}, RiskLow, RiskMedium},
		{"at high threshold", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{HourlyDelta: 500}, RiskLow, RiskHigh},
		{"unknown price is expensive", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{Unknown: []string{"ml.x"}}, RiskLow, RiskHigh},
		{"agent mutation at least medium", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Agent}}, mut, Cost{}, RiskLow, RiskMedium},
		{"agent read stays low", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Agent}}, Spec{Name: "get-x"}, Cost{}, RiskLow, RiskLow},
		{"production one up", Request{Target: Target{Cluster: "prod"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskLow, RiskMedium},
		{"production caps at critical", Request{Target: Target{Cluster: "prod"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskCritical, RiskCritical},
		{"op reason kept", Request{Target: Target{Cluster: "dev"}, Initiator: Initiator{Kind: Human}}, mut, Cost{}, RiskHigh, RiskHigh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Plan{Cost: tt.cost}
			if tt.before > RiskLow {
				p.Risk.Add(tt.before, "operation reason")
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
		})
	}
}

func TestCostFromTable(t *testing.T) {
	table := NewPriceTable(map[string]float64{"ml.p5.48xlarge": 63.296})
	p, ok, _ := table.Price(context.Background(), "us-west-2", "ml.p5.48xlarge")
	if !ok || p.Hourly != 63.296 {
		t.Fatalf("override not applied: %+v", p)
	}
	if _, ok, _ := table.Price(context.Background(), "", "ml.nope.1xlarge"); ok {
		t.Fatal("unknown type must not have a price")
	}
	var c Cost
	c.AddHourly("ml.p5.48xlarge", 4, p.Hourly, "instance")
	if math.Abs(c.HourlyDelta-253.184) > 1e-9 || math.Abs(c.MonthlyDelta-253.184*720) > 1e-6 {
		t.Fatalf("cost %+v", c)
	}
	if s, ok := Shape("ml.p5.48xlarge"); !ok || s.GPUs != 8 {
		t.Fatalf("shape %+v", s)
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
