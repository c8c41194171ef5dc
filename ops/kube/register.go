package kube

import (
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
)

// Register adds the Kubernetes operations to the catalog: status, verify, training, inference and storage.
// applied is where scale and rollout of inference read what HyperOps applied (ops/state's Store); instances, where
// status and training plans read HyperPod's instance statuses (ops/aws's Clients; nil reads the node labels only)
// and, when it is an ops.ReservationReader too, the training plans the instance groups run on.
func Register(cat *ops.Catalog, cl *Clusters, pricer ops.Pricer, applied AppliedRecords, instances fleet.InstanceHealthReader) {
	r := &registry{cs: cl, pricer: pricer, applied: applied, instances: instances}
	r.reservations, _ = instances.(ops.ReservationReader)
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
