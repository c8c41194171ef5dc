package approvals_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

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
	job := ops.Spec{Name: "submit-training-job", Mutates: true}
	scale := ops.Spec{Name: "scale-capacity", Mutates: true, ClusterWide: true}
	read := ops.Spec{Name: "list-training-jobs"}
	tests := []struct {
		name      string
		cfg       *config.Config
		spec      ops.Spec
		namespace string
		want      ops.Level
		reason    string
	}{
		{"production namespace", example, job, "ml-platform", ops.RiskMedium, "production cluster ml-prod-eks: one level up from low"},
		{"test namespace marked development", example, job, "ml-dev", ops.RiskLow, ""},
		{"the cluster as a whole is production", example, scale, "ml-dev", ops.RiskMedium, "production cluster ml-prod-eks: one level up from low"},
		{"a read stays low", example, read, "ml-platform", ops.RiskLow, ""},
		{"production namespace of a development cluster", devCluster, job, "ml-platform", ops.RiskMedium,
			"production namespace ml-platform of cluster ml-prod-eks: one level up from low"},
		{"its other namespaces", devCluster, job, "ml-research", ops.RiskLow, ""},
		{"the development cluster as a whole", devCluster, scale, "ml-platform", ops.RiskLow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &ops.Plan{}
			req := ops.Request{Target: ops.Target{Cluster: "ml-prod-eks", Namespace: tt.namespace}, Initiator: ops.Initiator{Kind: ops.Human}}
			approvals.RiskPolicyFor(tt.cfg).Assess(req, tt.spec, p)
			if p.Risk.Level != tt.want {
				t.Fatalf("level %s, want %s (reasons %+v)", p.Risk.Level, tt.want, p.Risk.Reasons)
			}
			if tt.reason != "" && !hasRiskReason(p.Risk, tt.reason) {
				t.Errorf("reasons %+v, want %q", p.Risk.Reasons, tt.reason)
			}
			if tt.reason == "" && len(p.Risk.Reasons) > 0 {
				t.Errorf("reasons %+v, want none", p.Risk.Reasons)
			}
		})
	}
}

func hasRiskReason(r ops.Risk, prefix string) bool {
	return slices.ContainsFunc(r.Reasons, func(x ops.Reason) bool { return strings.HasPrefix(x.Text, prefix) })
}
