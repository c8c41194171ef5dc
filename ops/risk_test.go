package ops

import (
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
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

// TestRiskProductionIsPerNamespace: with RiskPolicyFor, production's step follows the namespace's environment
// (example.yaml: ml-prod-eks is production, its ml-dev development), and the cluster's for a change to the cluster as
// a whole, whatever namespace its target was filled in with; a production namespace on a cluster that is not
// production is named as such.
func TestRiskProductionIsPerNamespace(t *testing.T) {
	example, err := config.Parse(config.Example, "example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	devCluster, err := config.Parse(config.Example, "example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	devCluster.Clusters[0].Environment = config.EnvDevelopment
	devCluster.Clusters[0].NamespaceEnvironments = map[string]config.Environment{"ml-platform": config.EnvProduction}
	job := Spec{Name: "submit-training-job", Mutates: true}
	scale := Spec{Name: "scale-capacity", Mutates: true, ClusterWide: true}
	read := Spec{Name: "list-training-jobs"}
	tests := []struct {
		name      string
		cfg       *config.Config
		spec      Spec
		namespace string
		want      Level
		reason    string
	}{
		{"production namespace", example, job, "ml-platform", RiskMedium, "production cluster ml-prod-eks: one level up from low"},
		{"test namespace marked development", example, job, "ml-dev", RiskLow, ""},
		{"the cluster as a whole is production", example, scale, "ml-dev", RiskMedium, "production cluster ml-prod-eks: one level up from low"},
		{"a read stays low", example, read, "ml-platform", RiskLow, ""},
		{"production namespace of a development cluster", devCluster, job, "ml-platform", RiskMedium,
			"production namespace ml-platform of cluster ml-prod-eks: one level up from low"},
		{"its other namespaces", devCluster, job, "ml-research", RiskLow, ""},
		{"the development cluster as a whole", devCluster, scale, "ml-platform", RiskLow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Plan{}
			req := Request{Target: Target{Cluster: "ml-prod-eks", Namespace: tt.namespace}, Initiator: Initiator{Kind: Human}}
			RiskPolicyFor(tt.cfg).Assess(req, tt.spec, p)
			if p.Risk.Level != tt.want {
				t.Fatalf("level %s, want %s (reasons %+v)", p.Risk.Level, tt.want, p.Risk.Reasons)
			}
			if tt.reason != "" && !hasReason(p.Risk, tt.reason) {
				t.Errorf("reasons %+v, want %q", p.Risk.Reasons, tt.reason)
			}
			if tt.reason == "" && len(p.Risk.Reasons) > 0 {
				t.Errorf("reasons %+v, want none", p.Risk.Reasons)
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
