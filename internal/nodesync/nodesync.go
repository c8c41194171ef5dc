package nodesync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/fakeaws"
)

// GPUsPerInstance is the nvidia.com/gpu capacity of the instance types the scenarios use; types not listed have
// no GPUs.
var GPUsPerInstance = map[string]int{
	"ml.p5.48xlarge":  8,
	"ml.p4d.24xlarge": 8,
	"ml.g5.12xlarge":  4,
	"ml.g5.48xlarge":  8,
}

// NodeSync mirrors the fake AWS's instances into the control plane: every instance that joins a HyperPod instance
// group or an EKS node group becomes a kwok node with the labels AWS gives it, every instance that leaves is
// deleted, and a HyperPod instance whose health changes gets the health agent's label (and a cordon) on its node.
// Its Hook is fakeaws.Options.OnNodesChanged.
type NodeSync struct {
	plane *controlplane.ControlPlane

	mu      sync.Mutex
	errs    []error
	applied int
}

// New returns a NodeSync that writes to plane.
func New(plane *controlplane.ControlPlane) *NodeSync { return &NodeSync{plane: plane} }

// Hook applies one change; the fake AWS calls it before the transition that caused it reports completion, so
// DescribeCluster never says a group is done before its nodes exist in the API server.
func (s *NodeSync) Hook(ctx context.Context, ch fakeaws.NodeChange) {
	var errs []error
	for _, name := range ch.Added {
		spec := controlplane.NodeSpec{
			Name:          string(name),
			InstanceGroup: ch.InstanceGroup,
			InstanceType:  ch.InstanceType,
			GPUs:          GPUsPerInstance[ch.InstanceType],
			Labels:        extraLabels(ch.Labels),
		}
		if _, err := s.plane.AddNode(ctx, spec); err != nil {
			errs = append(errs, fmt.Errorf("add node %s of %s/%s: %w", name, ch.Cluster, ch.InstanceGroup, err))
		}
	}
	for _, name := range ch.Removed {
		if err := s.plane.RemoveNode(ctx, string(name)); err != nil {
			errs = append(errs, fmt.Errorf("remove node %s of %s/%s: %w", name, ch.Cluster, ch.InstanceGroup, err))
		}
	}
	for _, name := range sortedNames(ch.Health) {
		if err := s.plane.SetNodeHealth(ctx, string(name), ch.Health[name]); err != nil {
			errs = append(errs, fmt.Errorf("relabel node %s of %s/%s: %w", name, ch.Cluster, ch.InstanceGroup, err))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, errs...)
	s.applied++
}

// extraLabels drops the labels NodeSpec sets itself (HyperPod's, from the instance group and type), keeping the
// others AWS adds (the cluster name, an EKS node group's labels).
func extraLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		switch k {
		case controlplane.LabelInstanceGroup, controlplane.LabelInstanceType, controlplane.LabelComputeType,
			controlplane.LabelNodeHealth:
			continue
		}
		if strings.HasPrefix(k, "kubernetes.io/") {
			continue
		}
		out[k] = v
	}
	return out
}

func sortedNames(m map[fakeaws.NodeName]string) []fakeaws.NodeName {
	out := make([]fakeaws.NodeName, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Err returns every failure to mirror a change so far; a test checks it before trusting the node list.
func (s *NodeSync) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// Applied counts the changes applied.
func (s *NodeSync) Applied() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}
