package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// HyperPod node labels, as SageMaker HyperPod sets them on EKS nodes.
const (
	LabelInstanceGroup  = "sagemaker.amazonaws.com/instance-group-name"
	LabelComputeType    = "sagemaker.amazonaws.com/compute-type"
	LabelNodeHealth     = "sagemaker.amazonaws.com/node-health-status"
	LabelInstanceType   = "node.kubernetes.io/instance-type"
	ComputeTypeHyperPod = "hyperpod"
	HealthSchedulable   = "Schedulable"
	ResourceGPU         = corev1.ResourceName("nvidia.com/gpu")
)

// NodeSpec describes a HyperPod-like node for AddNode. Empty fields take defaults:
// InstanceType ml.g5.12xlarge, CPU "48", Memory "192Gi", Health Schedulable.
type NodeSpec struct {
	Name          string
	InstanceGroup string
	InstanceType  string
	GPUs          int
	CPU           string
	Memory        string
	Health        string
	// Labels are extra labels (for example the ones AWS puts on a node group's nodes); they may
	// not override the HyperPod labels above.
	Labels map[string]string
}

// nodeObject renders the Node: HyperPod labels, the kwok annotation, capacity and
// allocatable (kwok's node-initialize stage keeps whatever status.capacity says).
func (s NodeSpec) nodeObject() (*corev1.Node, error) {
	if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
		return nil, fmt.Errorf("node name %q: %v", s.Name, errs)
	}
	if s.InstanceGroup == "" {
		return nil, fmt.Errorf("node %q: instance group is required", s.Name)
	}
	if s.GPUs < 0 {
		return nil, fmt.Errorf("node %q: negative GPU count %d", s.Name, s.GPUs)
	}
	s.InstanceType = or(s.InstanceType, "ml.g5.12xlarge")
	s.Health = or(s.Health, HealthSchedulable)
	cpu, err := resource.ParseQuantity(or(s.CPU, "48"))
	if err != nil {
		return nil, fmt.Errorf("node %q cpu: %w", s.Name, err)
	}
	mem, err := resource.ParseQuantity(or(s.Memory, "192Gi"))
	if err != nil {
		return nil, fmt.Errorf("node %q memory: %w", s.Name, err)
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: mem,
		corev1.ResourcePods:   resource.MustParse("110"),
		ResourceGPU:           *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI),
	}
	labels := map[string]string{
		LabelInstanceGroup:     s.InstanceGroup,
		LabelComputeType:       ComputeTypeHyperPod,
		LabelInstanceType:      s.InstanceType,
		LabelNodeHealth:        s.Health,
		corev1.LabelHostname:   s.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"type":                 "kwok",
		"nvidia.com/gpu.count": strconv.Itoa(s.GPUs),
	}
	for k, v := range s.Labels {
		if own, set := labels[k]; set && own != v {
			return nil, fmt.Errorf("node %q: label %s=%q conflicts with %q", s.Name, k, v, own)
		}
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Labels:      labels,
			Annotations: map[string]string{NodeAnnotation: NodeAnnotationValue},
		},
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources.DeepCopy()},
	}, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// AddNode creates a kwok-managed node labelled like a HyperPod node. kwok then marks it Ready
// and keeps its lease; use WaitNodeReady before scheduling onto it.
func (cp *ControlPlane) AddNode(ctx context.Context, spec NodeSpec) (*corev1.Node, error) {
	node, err := spec.nodeObject()
	if err != nil {
		return nil, err
	}
	// Nodes are the one kind whose status is accepted on create, so capacity lands at once.
	created, err := cp.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	return created, nil
}

// RemoveNode deletes a node; a node that is already gone is not an error.
func (cp *ControlPlane) RemoveNode(ctx context.Context, name string) error {
	err := cp.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	return nil
}

// ErrNodeNotReady is wrapped by WaitNodeReady when ctx ends first.
var ErrNodeNotReady = errors.New("node not ready")

// WaitNodeReady polls until the node reports Ready and the controller manager has lifted the
// not-ready/unreachable taints, so the scheduler will place pods on it; ctx bounds the wait.
func (cp *ControlPlane) WaitNodeReady(ctx context.Context, name string) (*corev1.Node, error) {
	ticker := time.NewTicker(readyPollPeriod * 2)
	defer ticker.Stop()
	var why string
	for {
		node, err := cp.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			why = err.Error()
		default:
			if why = nodeNotReadyReason(node); why == "" {
				return node, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s: %s (%w)", ErrNodeNotReady, name, why, ctx.Err())
		case <-ticker.C:
		}
	}
}

// nodeNotReadyReason explains why a node cannot take pods yet, or returns "".
func nodeNotReadyReason(node *corev1.Node) string {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "Ready condition is not True"
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return "taint " + t.Key + " still set"
		}
	}
	return ""
}

// SetNodeHealth sets a node's HyperPod health label as the health-monitoring agent does, and cordons the node while
// the value is anything but Schedulable (HyperPod's docs: such a node "is not available for running workloads").
func (cp *ControlPlane) SetNodeHealth(ctx context.Context, name, health string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}},"spec":{"unschedulable":%v}}`, LabelNodeHealth, health, health != HealthSchedulable)
	if _, err := cp.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set the health of node %s to %s: %w", name, health, err)
	}
	return nil
}
