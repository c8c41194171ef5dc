package aws

import (
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
)

// Register adds get-capacity, scale-capacity, reboot-nodes, replace-nodes and bootstrap-cluster to the catalog.
// pricer prices plans (the table, or NewPricingAPI); nodes gives the Kubernetes view of node groups (and, when it is
// an fleet.NodePodReader, the pods a recovery stops) and may be nil.
func Register(cat *ops.Catalog, c *Clients, pricer ops.Pricer, nodes fleet.NodeCounter) {
	cat.Register(
		&getCapacityOp{c: c, pricer: pricer, nodes: nodes},
		&scaleOp{c: c, pricer: pricer, nodes: nodes},
		&recoveryOp{c: c, nodes: nodes},
		&recoveryOp{c: c, nodes: nodes, replace: true},
		&bootstrapOp{c: c, pricer: pricer},
	)
}
