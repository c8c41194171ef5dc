package ops

import "context"

// NodeGroupNodes is the Kubernetes view of one instance group (HyperPod) or node group (EKS): what the API server
// shows, independent of what AWS reports.
type NodeGroupNodes struct {
	Group        string `json:"group"`
	InstanceType string `json:"instanceType"`
	Nodes        int    `json:"nodes"`
	Ready        int    `json:"ready"`
	// Health counts nodes by the HyperPod health label (sagemaker.amazonaws.com/node-health-status).
	Health         map[string]int `json:"health,omitempty"`
	GPUAllocatable int64          `json:"gpuAllocatable"`
	GPURequested   int64          `json:"gpuRequested"`
}

// NodeCounter gives the Kubernetes view of a cluster's node groups. ops/kube implements it; ops/aws and ops/report
// use it to merge what AWS says with what the cluster sees.
type NodeCounter interface {
	NodeGroups(ctx context.Context, cluster string) ([]NodeGroupNodes, error)
}
