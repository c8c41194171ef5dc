package kube

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/hyperops/hyperops/ops"
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
func ClassifyNode(label, status, message string) ops.NodeHealth {
	h := ops.NodeHealth{State: ops.HealthHealthy, Label: label, InstanceStatus: status, Reason: message}
	if label == HealthSchedulable {
		h.Label = "" // the normal case says nothing
	}
	if status == InstanceRunning {
		h.InstanceStatus = ""
	}
	recovering := status == InstancePending || status == InstanceShuttingDown || status == InstanceSystemUpdating
	switch {
	case label == HealthPendingReplacement && recovering:
		h.State = ops.HealthReplacing
	case label == HealthPendingReboot && recovering:
		h.State = ops.HealthRebooting
	case label == HealthPendingReplacement || label == HealthPendingReboot || status == InstanceFailure:
		h.State = ops.HealthFaulty
	case label == HealthUnschedulable || status == InstanceDeepHealthCheck || status == InstanceSystemUpdating:
		h.State = ops.HealthChecking
	case label != "" && label != HealthSchedulable:
		h.State = ops.HealthFaulty // a value HyperPod added after this was written: not Schedulable, so not healthy
	}
	if h.Reason == "" && h.State != ops.HealthHealthy {
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
