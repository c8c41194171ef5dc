package approvals

import (
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// RiskPolicyFor is the risk policy cfg configures: risk.hourlyCost's thresholds, and production where the clusters'
// environment and namespaceEnvironments say, so a test namespace marked development on a production cluster is
// assessed as development.
func RiskPolicyFor(cfg *config.Config) ops.RiskPolicy {
	return ops.RiskPolicy{MediumHourly: cfg.Risk.HourlyCost.Medium, HighHourly: cfg.Risk.HourlyCost.High,
		Production: func(cluster, namespace string) bool {
			cl, ok := cfg.Cluster(cluster)
			return ok && cl.EnvironmentOf(namespace) == config.EnvProduction
		}}
}
