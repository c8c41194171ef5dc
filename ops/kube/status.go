package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
)

// Node labels that name a node's group.
const (
	LabelHyperPodGroup = "sagemaker.amazonaws.com/instance-group-name"
	LabelEKSNodeGroup  = "eks.amazonaws.com/nodegroup"
	LabelNodeHealth    = "sagemaker.amazonaws.com/node-health-status"
)

var _ fleet.NodeCounter = (*Clusters)(nil)

// NodeGroups implements fleet.NodeCounter: nodes by HyperPod instance group (else EKS node group), their instance
// type, readiness, HyperPod health label counts, and GPUs allocatable vs requested by running and pending pods.
func (cs *Clusters) NodeGroups(ctx context.Context, cluster string) ([]fleet.GroupNodes, error) {
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
	return nodeGroups(nodes, pods.Items, nil), nil
}

func nodeGroups(nodes []corev1.Node, pods []corev1.Pod, instances []fleet.InstanceHealth) []fleet.GroupNodes {
	g := NewNodeGrouping(ResourceGPU)
	g.AddInstances(instances)
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
	Cluster       string             `json:"cluster"`
	Groups        []fleet.GroupNodes `json:"groups"`
	PendingForGPU []string           `json:"pendingForGPU,omitempty"`
	// Warnings say what could not be read (HyperPod's instance statuses); the node labels still count.
	Warnings []string `json:"warnings,omitempty"`
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
		instances, warning := r.hyperPodInstances(ctx, t.cfg)
		st := ClusterStatus{Cluster: t.cfg.Name, Groups: nodeGroups(nodes, pods.Items, instances), Workloads: map[string]map[string]int{}}
		if warning != "" {
			st.Warnings = append(st.Warnings, warning)
		}
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

// instancesReadTimeout bounds the read of HyperPod's instance statuses: health is extra to a status or a plan, and
// a SageMaker that hangs (or throttles for long) must not hold them; the node labels still say it.
const instancesReadTimeout = 10 * time.Second

// hyperPodInstances reads HyperPod's instance statuses where the cluster has a HyperPod cluster and a reader is
// wired; what cannot be read is a warning, and the node labels alone say the health.
func (r *registry) hyperPodInstances(ctx context.Context, cfg *config.Cluster) ([]fleet.InstanceHealth, string) {
	if r.instances == nil || cfg.HyperPod.ClusterName == "" {
		return nil, ""
	}
	ctx, cancel := context.WithTimeout(ctx, instancesReadTimeout)
	defer cancel()
	instances, err := r.instances.HyperPodInstances(ctx, cfg.Name)
	if err != nil {
		return nil, "HyperPod's instance statuses unavailable, node health is from the node labels: " + err.Error()
	}
	return instances, ""
}

// healthLine says a group's health in a few words: "3 healthy, 1 faulty".
func healthLine(c fleet.HealthCounts) string {
	parts := append([]string{fmt.Sprintf("%d healthy", c.Healthy)}, c.NotHealthy()...)
	return strings.Join(parts, ", ")
}

// UnhealthyLine says one unhealthy node and why: "hyperpod-i-0ab… faulty: GPU 3 fell off the bus (UnschedulablePendingReplacement, Failure)".
func UnhealthyLine(h fleet.NodeHealth) string {
	var why []string
	for _, s := range []string{h.Label, h.InstanceStatus} {
		if s != "" {
			why = append(why, s)
		}
	}
	line := h.Node + " " + h.State + ": " + h.Reason
	if len(why) > 0 {
		line += " (" + strings.Join(why, ", ") + ")"
	}
	return line
}

func clusterStatusResult(st ClusterStatus) *ops.Result {
	var b strings.Builder
	var nodes, ready, unhealthy int
	var alloc, used int64
	var sick []string
	for _, g := range st.Groups {
		nodes, ready, alloc, used = nodes+g.Nodes, ready+g.Ready, alloc+g.GPUAllocatable, used+g.GPURequested
		unhealthy += g.States.Unhealthy()
		fmt.Fprintf(&b, "%-24s %-18s %d/%d ready  GPUs %d/%d requested  %s\n", g.Group, g.InstanceType, g.Ready, g.Nodes,
			g.GPURequested, g.GPUAllocatable, healthLine(g.States))
		for _, h := range g.Unhealthy {
			fmt.Fprintf(&b, "  %s\n", UnhealthyLine(h))
		}
		if g.States.Unhealthy() > 0 {
			sick = append(sick, g.Group+": "+strings.TrimPrefix(healthLine(g.States), fmt.Sprintf("%d healthy, ", g.States.Healthy)))
		}
	}
	summary := fmt.Sprintf("%s: %d/%d nodes ready, %d of %d GPUs requested, %d pod(s) waiting for GPUs", st.Cluster, ready, nodes, used, alloc, len(st.PendingForGPU))
	if unhealthy > 0 {
		summary += fmt.Sprintf(", %d node(s) not healthy", unhealthy)
	}
	for _, w := range st.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	res := &ops.Result{Summary: summary, Output: b.String()}
	if len(sick) > 0 {
		// The reasons are in Output, a line per node; a field has room for the groups only.
		res.Details = append(res.Details, ops.Detail{Label: "not healthy", Value: strings.Join(sick, "; ")})
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
