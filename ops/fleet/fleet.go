package fleet

import (
	"context"
	"fmt"
)

// GroupNodes is the Kubernetes view of one instance group (HyperPod) or node group (EKS): what the API server
// shows, independent of what AWS reports.
type GroupNodes struct {
	Group        string `json:"group"`
	InstanceType string `json:"instanceType"`
	Nodes        int    `json:"nodes"`
	Ready        int    `json:"ready"`
	// Health counts nodes by the HyperPod health label (sagemaker.amazonaws.com/node-health-status).
	Health         map[string]int `json:"health,omitempty"`
	GPUAllocatable int64          `json:"gpuAllocatable"`
	GPURequested   int64          `json:"gpuRequested"`
	// States counts the nodes by health state; Unhealthy lists every node not healthy, with why.
	States    HealthCounts `json:"states"`
	Unhealthy []NodeHealth `json:"unhealthy,omitempty"`
}

// The health states of a node, as HyperOps sums up HyperPod's health label and instance status.
const (
	HealthHealthy = "healthy"
	// HealthFaulty is a node that failed the health agent's or a deep health check and waits for recovery, or
	// whose instance HyperPod reports as Failure.
	HealthFaulty = "faulty"
	// HealthRebooting and HealthReplacing are faulty nodes whose recovery is under way.
	HealthRebooting = "rebooting"
	HealthReplacing = "replacing"
	// HealthChecking is a node out of scheduling while a deep health check or a system update runs.
	HealthChecking = "checking"
)

// HealthCounts counts a group's nodes by health state.
type HealthCounts struct {
	Healthy   int `json:"healthy"`
	Faulty    int `json:"faulty"`
	Rebooting int `json:"rebooting"`
	Replacing int `json:"replacing"`
	Checking  int `json:"checking"`
}

// NotHealthy says what is not healthy, in the order faulty, rebooting, replacing, checking: ["1 faulty", "2
// rebooting"]; nothing when every node is healthy.
func (c HealthCounts) NotHealthy() []string {
	var out []string
	for _, p := range []struct {
		name string
		n    int
	}{{HealthFaulty, c.Faulty}, {HealthRebooting, c.Rebooting}, {HealthReplacing, c.Replacing}, {HealthChecking, c.Checking}} {
		if p.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", p.n, p.name))
		}
	}
	return out
}

// Add counts one node in state.
func (c *HealthCounts) Add(state string) {
	switch state {
	case HealthFaulty:
		c.Faulty++
	case HealthRebooting:
		c.Rebooting++
	case HealthReplacing:
		c.Replacing++
	case HealthChecking:
		c.Checking++
	default:
		c.Healthy++
	}
}

// Unhealthy counts the nodes that are not healthy.
func (c HealthCounts) Unhealthy() int { return c.Faulty + c.Rebooting + c.Replacing + c.Checking }

// NodeHealth is one node that is not healthy, and why.
type NodeHealth struct {
	Node       string `json:"node"`
	InstanceID string `json:"instanceId,omitempty"`
	State      string `json:"state"`
	// Label is the node's sagemaker.amazonaws.com/node-health-status; InstanceStatus what ListClusterNodes says.
	Label          string `json:"label,omitempty"`
	InstanceStatus string `json:"instanceStatus,omitempty"`
	// Reason is HyperPod's message for the instance, else what its label or status means.
	Reason string `json:"reason"`
}

// InstanceHealth is what HyperPod's ListClusterNodes says of one instance.
type InstanceHealth struct {
	Group      string `json:"group"`
	InstanceID string `json:"instanceId"`
	Status     string `json:"status"`
	Message    string `json:"message,omitempty"`
}

// InstanceHealthReader reads the status of a cluster's HyperPod instances. ops/aws implements it; a cluster without
// a HyperPod cluster has none (nil, nil).
type InstanceHealthReader interface {
	HyperPodInstances(ctx context.Context, cluster string) ([]InstanceHealth, error)
}

// NodeCounter gives the Kubernetes view of a cluster's node groups. ops/kube implements it; ops/aws and ops/report
// use it to merge what AWS says with what the cluster sees.
type NodeCounter interface {
	NodeGroups(ctx context.Context, cluster string) ([]GroupNodes, error)
}

// NodePod is a pod on a node that a recovery takes down: what would be interrupted.
type NodePod struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Owner is the pod's controller as "Kind name" (a PyTorchJob, a Deployment's ReplicaSet); "" for a bare pod.
	Owner string `json:"owner,omitempty"`
	GPUs  int64  `json:"gpus,omitempty"`
}

// NodePodReader lists the pods that run, or are about to, on the named Kubernetes nodes of a cluster, without the
// DaemonSet pods every node has. ops/kube implements it; a recovery plan uses it, when the Kubernetes view it is
// given has it, to say what it interrupts.
type NodePodReader interface {
	PodsOnNodes(ctx context.Context, cluster string, nodes []string) ([]NodePod, error)
}
