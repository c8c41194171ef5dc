package aws

import "github.com/hyperops/hyperops/ops"

// Register adds get-capacity, scale-capacity and bootstrap-cluster to the catalog. pricer prices plans (the
// table, or NewPricingAPI); nodes gives the Kubernetes view of node groups and may be nil.
func Register(cat *ops.Catalog, c *Clients, pricer ops.Pricer, nodes ops.NodeCounter) {
	cat.Register(
		&getCapacityOp{c: c, pricer: pricer, nodes: nodes},
		&scaleOp{c: c, pricer: pricer, nodes: nodes},
		&bootstrapOp{c: c, pricer: pricer},
	)
}
