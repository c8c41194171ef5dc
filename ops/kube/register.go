package kube

import "github.com/hyperops/hyperops/ops"

// Register adds the Kubernetes operations to the catalog: status, verify, training, inference and storage.
func Register(cat *ops.Catalog, cl *Clusters, pricer ops.Pricer) {
	r := &registry{cs: cl, pricer: pricer}
	r.register(cat)
}

func (r *registry) register(cat *ops.Catalog) {
	cat.Register(
		r.getClusterStatus(), r.verifyCluster(),
		r.submitTrainingJob(), r.stopTrainingJob(), r.getTrainingJob(), r.listTrainingJobs(),
		r.deployInference(), r.scaleInference(), r.rolloutInference(), r.deleteInference(), r.getInference(),
		r.createStorage(), r.deleteStorage(), r.listStorage(),
	)
}
