package collect

import (
	"context"
	"time"

	"github.com/hyperops/hyperops/ops/fleet"
	"k8s.io/client-go/kubernetes"
)

// KubeClients returns the Kubernetes client of a registered cluster. ops/kube's clusters adapt to it with
// func(name string) (kubernetes.Interface, error) { c, err := clusters.Get(name); … return c.Kube, nil }.
type KubeClients func(cluster string) (kubernetes.Interface, error)

// GroupStatus is the AWS view of one HyperPod instance group or EKS managed node group.
type GroupStatus struct {
	Name         string
	InstanceType string
	// Current is how many instances run now; Target how many were asked for.
	Current int
	Target  int
	// Status is AWS's word for the group (InService, Updating, ACTIVE, DEGRADED, …).
	Status string
	// Instances are the group's HyperPod instances that are not Running (ListClusterNodes), with HyperPod's
	// message: they say why a node is faulty, rebooting or being replaced.
	Instances []fleet.InstanceHealth
}

// GroupSource gives the AWS view of a cluster's instance groups. ops/aws implements it.
type GroupSource interface {
	InstanceGroups(ctx context.Context, cluster string) ([]GroupStatus, error)
}

// Sample is one stored value of a series, with when it was taken.
type Sample struct {
	At    time.Time
	Value []byte
}

// SampleStore keeps bounded series of samples (in Redis; ops/state implements it). AddSample appends and keeps the
// newest max; Samples returns them oldest first.
type SampleStore interface {
	AddSample(ctx context.Context, series string, at time.Time, value []byte, max int) error
	Samples(ctx context.Context, series string) ([]Sample, error)
}

// SeriesName is the series a report's samples are kept under: one per report and cluster, so the change is always
// against the previous run of the same report.
func SeriesName(report, cluster string) string {
	return "report/" + report + "/" + cluster
}
