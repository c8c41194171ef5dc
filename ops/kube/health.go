package kube

import (
	"context"
	"fmt"
	"strings"

	"github.com/hyperops/hyperops/ops/fleet"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The values of HyperPod's node-health-status label, as "Resilience-related Kubernetes labels by SageMaker
// HyperPod" lists them (docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).
const (
	HealthSchedulable        = "Schedulable"                     // passed the basic health checks
	HealthUnschedulable      = "Unschedulable"                   // running deep health checks
	HealthPendingReplacement = "UnschedulablePendingReplacement" // failed a check, to be replaced
	HealthPendingReboot      = "UnschedulablePendingReboot"      // failed a check, to be rebooted
)

// HyperPod's instance statuses (smtypes.ClusterInstanceStatus), as ListClusterNodes reports them.
const (
	InstanceRunning         = "Running"
	InstanceFailure         = "Failure"
	InstancePending         = "Pending"
	InstanceShuttingDown    = "ShuttingDown"
	InstanceSystemUpdating  = "SystemUpdating"
	InstanceDeepHealthCheck = "DeepHealthCheckInProgress"
)

// hyperPodNodePrefix starts the Kubernetes name of a HyperPod node, followed by its instance ID.
const hyperPodNodePrefix = "hyperpod-"

func instanceIDOf(node string) string {
	id, ok := strings.CutPrefix(node, hyperPodNodePrefix)
	if !ok {
		return ""
	}
	return id
}

// healthLabel is the node's health label; a node without it but tainted with the same key (the health agent keeps
// unhealthy nodes off the scheduler) takes the taint's value.
func healthLabel(n *corev1.Node) string {
	if h := n.Labels[LabelNodeHealth]; h != "" {
		return h
	}
	for _, t := range n.Spec.Taints {
		if t.Key == LabelNodeHealth && t.Value != "" {
			return t.Value
		}
	}
	return ""
}

// ClassifyNode sums up a node's health from its label and, where HyperPod was read, its instance status and message
// (both empty when not). A node with neither (an EKS node) is healthy: readiness is counted on its own.
func ClassifyNode(label, status, message string) fleet.NodeHealth {
	h := fleet.NodeHealth{State: fleet.HealthHealthy, Label: label, InstanceStatus: status, Reason: message}
	if label == HealthSchedulable {
		h.Label = "" // the normal case says nothing
	}
	if status == InstanceRunning {
		h.InstanceStatus = ""
	}
	recovering := status == InstancePending || status == InstanceShuttingDown || status == InstanceSystemUpdating
	switch {
	case label == HealthPendingReplacement && recovering:
		h.State = fleet.HealthReplacing
	case label == HealthPendingReboot && recovering:
		h.State = fleet.HealthRebooting
	case label == HealthPendingReplacement || label == HealthPendingReboot || status == InstanceFailure:
		h.State = fleet.HealthFaulty
	case label == HealthUnschedulable || status == InstanceDeepHealthCheck || status == InstanceSystemUpdating:
		h.State = fleet.HealthChecking
	case label != "" && label != HealthSchedulable:
		h.State = fleet.HealthFaulty // a value HyperPod added after this was written: not Schedulable, so not healthy
	}
	if h.Reason == "" && h.State != fleet.HealthHealthy {
		h.Reason = meaning(label, status)
	}
	return h
}

// meaning says what a label or status means when HyperPod gave no message.
func meaning(label, status string) string {
	switch {
	case label == HealthPendingReplacement:
		return "failed a health check; HyperPod marked it for replacement"
	case label == HealthPendingReboot:
		return "failed a health check; HyperPod marked it for a reboot"
	case status == InstanceFailure:
		return "HyperPod reports the instance as Failure"
	case label == HealthUnschedulable || status == InstanceDeepHealthCheck:
		return "deep health check in progress"
	case status == InstanceSystemUpdating:
		return "system update in progress"
	default:
		return "health label " + label
	}
}

// scheduleHealth tells the plan of work that schedules pods onto nodes (a training job, an inference service) which
// instance groups its pods may land on (the nodes matching gpuNodes.nodeSelector, with GPUs when it asks for
// some) have nodes faulty, rebooting or being replaced, and why; each such group raises the risk one level.
// HyperPod that cannot be read leaves the node labels to say it, with a warning. It records those groups in
// d.landsOn, for the reservations they run on.
func (r *registry) scheduleHealth(ctx context.Context, t target, needGPUs bool, d *desired) error {
	nodes, err := t.baseNodes(ctx)
	if err != nil {
		return err
	}
	sel := labels.SelectorFromSet(t.cfg.GPUNodes.NodeSelector)
	g := NewNodeGrouping(ResourceGPU)
	candidates := 0
	for i := range nodes {
		n := &nodes[i]
		if q, ok := n.Status.Allocatable[ResourceGPU]; !sel.Matches(labels.Set(n.Labels)) || needGPUs && (!ok || q.IsZero()) {
			continue
		}
		g.AddNode(n)
		candidates++
	}
	if candidates == 0 {
		return nil
	}
	instances, warning := r.hyperPodInstances(ctx, t.cfg)
	if warning != "" {
		d.warnings = append(d.warnings, warning)
	}
	g.AddInstances(instances)
	for _, grp := range g.Groups() {
		d.landsOn = append(d.landsOn, grp.Group)
		down := grp.States.Faulty + grp.States.Rebooting + grp.States.Replacing
		if down == 0 {
			continue
		}
		var named []string
		for _, h := range grp.Unhealthy {
			if h.State == fleet.HealthChecking {
				continue
			}
			if len(named) == maxNamedNodes {
				named = append(named, fmt.Sprintf("and %d more", down-maxNamedNodes))
				break
			}
			named = append(named, UnhealthyLine(h))
		}
		d.warnings = append(d.warnings, fmt.Sprintf("instance group %s has %d of %d nodes faulty, rebooting or being replaced (%s): "+
			"the pods may wait for healthy nodes, and a node that fails under them ends their run", grp.Group, down, grp.Nodes,
			strings.Join(named, "; ")))
		d.risk.RaiseOneLevel("instance group %s has %d node(s) faulty, rebooting or being replaced", grp.Group, down)
	}
	return nil
}

// maxNamedNodes bounds the unhealthy nodes a plan names per group.
const maxNamedNodes = 3
