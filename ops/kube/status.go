package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/hyperops/hyperops/ops"
)

// Node labels that name a node's group.
const (
	LabelHyperPodGroup = "sagemaker.amazonaws.com/instance-group-name"
	LabelEKSNodeGroup  = "eks.amazonaws.com/nodegroup"
	LabelNodeHealth    = "sagemaker.amazonaws.com/node-health-status"
)

var _ ops.NodeCounter = (*Clusters)(nil)

// NodeGroups implements ops.NodeCounter: nodes by HyperPod instance group (else EKS node group), their instance
// type, readiness, HyperPod health label counts, and GPUs allocatable vs requested by running and pending pods.
func (cs *Clusters) NodeGroups(ctx context.Context, cluster string) ([]ops.NodeGroupNodes, error) {
	c, err := cs.Get(cluster)
	if err != nil {
		return nil, err
	}
	nodes, err := listNodes(ctx, c)
	if err != nil {
		return nil, err
	}
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, listOptions(""))
	if err != nil {
		return nil, clusterError(err, "list pods")
	}
	return nodeGroups(nodes, pods.Items), nil
}

func nodeGroups(nodes []corev1.Node, pods []corev1.Pod) []ops.NodeGroupNodes {
	g := NewNodeGrouping(ResourceGPU)
	for i := range nodes {
		g.AddNode(&nodes[i])
	}
	for i := range pods {
		g.AddPod(&pods[i])
	}
	return g.Groups()
}

// ClusterStatus is get-cluster-status's machine-readable answer.
type ClusterStatus struct {
	Cluster       string               `json:"cluster"`
	Groups        []ops.NodeGroupNodes `json:"groups"`
	PendingForGPU []string             `json:"pendingForGPU,omitempty"`
	// Workloads counts managed Jobs and Deployments per namespace.
	Workloads map[string]map[string]int `json:"workloads"`
}

func (r *registry) getClusterStatus() ops.Operation {
	spec := ops.Spec{
		Name: "get-cluster-status", Domain: "status", Topic: "status", Baseline: ops.RiskLow, ClusterWide: true,
		Summary: "Show a cluster: nodes by instance group and health, GPUs allocatable vs requested, pods waiting for GPUs, managed workloads",
	}
	return r.readOperation(spec, func(target, *ops.Request) error { return nil }, func(ctx context.Context, t target, req *ops.Request) (*ops.Result, error) {
		nodes, err := listNodes(ctx, t.c)
		if err != nil {
			return nil, err
		}
		pods, err := t.c.Kube.CoreV1().Pods("").List(ctx, listOptions(""))
		if err != nil {
			return nil, clusterError(err, "list pods")
		}
		st := ClusterStatus{Cluster: t.cfg.Name, Groups: nodeGroups(nodes, pods.Items), Workloads: map[string]map[string]int{}}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && PodRequest(p, ResourceGPU) > 0 {
				st.PendingForGPU = append(st.PendingForGPU, fmt.Sprintf("%s/%s (%d GPU)", p.Namespace, p.Name, PodRequest(p, ResourceGPU)))
			}
		}
		for _, ns := range t.cfg.Namespaces {
			counts := map[string]int{}
			for _, res := range []Resource{ResJob, ResDeployment} {
				items, err := t.c.listObjects(ctx, res, ns, ManagedSelector)
				if err != nil {
					return nil, err
				}
				counts[res.Kind] = len(items)
			}
			st.Workloads[ns] = counts
		}
		return clusterStatusResult(st), nil
	})
}

func clusterStatusResult(st ClusterStatus) *ops.Result {
	var b strings.Builder
	var nodes, ready int
	var alloc, used int64
	for _, g := range st.Groups {
		nodes, ready, alloc, used = nodes+g.Nodes, ready+g.Ready, alloc+g.GPUAllocatable, used+g.GPURequested
		health := make([]string, 0, len(g.Health))
		for h, n := range g.Health {
			health = append(health, fmt.Sprintf("%s=%d", h, n))
		}
		sort.Strings(health)
		fmt.Fprintf(&b, "%-24s %-18s %d/%d ready  GPUs %d/%d requested  %s\n", g.Group, g.InstanceType, g.Ready, g.Nodes,
			g.GPURequested, g.GPUAllocatable, strings.Join(health, " "))
	}
	res := &ops.Result{
		Summary: fmt.Sprintf("%s: %d/%d nodes ready, %d of %d GPUs requested, %d pod(s) waiting for GPUs", st.Cluster, ready, nodes, used, alloc, len(st.PendingForGPU)),
		Output:  b.String(),
	}
	nsNames := make([]string, 0, len(st.Workloads))
	for ns := range st.Workloads {
		nsNames = append(nsNames, ns)
	}
	sort.Strings(nsNames)
	for _, ns := range nsNames {
		c := st.Workloads[ns]
		res.Details = append(res.Details, ops.Detail{Label: ns, Value: fmt.Sprintf("%d job(s), %d deployment(s)", c["Job"], c["Deployment"])})
	}
	if len(st.PendingForGPU) > 0 {
		res.Details = append(res.Details, ops.Detail{Label: "waiting for GPUs", Value: strings.Join(st.PendingForGPU, ", ")})
	}
	res.Data, _ = json.Marshal(st)
	return res
}
