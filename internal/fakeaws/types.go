package fakeaws

import (
	"strings"
	"time"
)

// Services named in NodeChange.Service.
const (
	ServiceSageMaker = "sagemaker"
	ServiceEKS       = "eks"
)

// NodeName is the Kubernetes node name of an instance: "hyperpod-i-…" for HyperPod, "ip-….compute.internal"
// for EKS managed node groups.
type NodeName string

// InstanceID is the EC2 instance ID behind a HyperPod node name ("hyperpod-i-0abc…" → "i-0abc…"); empty for
// other names.
func (n NodeName) InstanceID() string {
	id, ok := strings.CutPrefix(string(n), "hyperpod-")
	if !ok {
		return ""
	}
	return id
}

// NodeChange tells the OnNodesChanged hook which nodes joined and left one instance group or node group.
type NodeChange struct {
	Service        string // ServiceSageMaker or ServiceEKS
	Region         string
	Cluster        string // HyperPod cluster name, or EKS cluster name for node groups
	EKSClusterName string // the Kubernetes cluster the nodes belong to
	InstanceGroup  string // HyperPod instance group or EKS node group
	InstanceType   string
	Labels         map[string]string // labels AWS puts on these nodes
	Added          []NodeName
	Removed        []NodeName
	// Health holds the new node-health-status label of nodes whose health changed (SetNodeHealth, MarkNodeFaulty).
	Health map[NodeName]string
}

// HyperPodCluster describes a SageMaker HyperPod cluster, to seed the server (AddHyperPodCluster) and to read
// its state back (HyperPodCluster). Fields marked "read only" are ignored when seeding.
type HyperPodCluster struct {
	Name           string
	Region         string // default Options.Region
	Status         string // default "InService"
	EKSClusterARN  string // Orchestrator.Eks.ClusterArn; empty for a Slurm cluster
	VPC            *VPC   // VpcConfig; nil for none (CreateCluster requires one with EKS, seeding does not)
	InstanceGroups []InstanceGroup
	// NodeProvisioningMode is ProvisioningContinuous for a cluster that records events (ListClusterEvents); empty
	// for one that does not, whose ListClusterEvents is refused.
	NodeProvisioningMode string
	ARN                  string    // read only
	FailureMessage       string    // read only
	CreationTime         time.Time // read only
}

// InstanceGroup is one HyperPod instance group.
type InstanceGroup struct {
	Name           string
	Type           string // e.g. "ml.p5.48xlarge"
	Count          int    // seeding: the nodes created Running; reading: TargetCount
	LifecycleS3URI string // LifeCycleConfig.SourceS3Uri, s3://…
	OnCreate       string // LifeCycleConfig.OnCreate; default "on_create.sh"
	ExecutionRole  string // IAM role ARN
	// TrainingPlanARN is the training plan the group runs on (TrainingPlanArn; AddTrainingPlan returns it).
	TrainingPlanARN string
	CurrentCount    int    // read only: nodes Running or shutting down
	Status          string // read only
	Nodes           []Node // read only
}

// Node is one HyperPod instance or EKS node.
type Node struct {
	Name       NodeName
	InstanceID string
	Status     string // HyperPod: Pending, Running, ShuttingDown, Failure, …; EKS: Pending, Ready, Terminating
	LaunchTime time.Time
	// HyperPod only: the InstanceStatus message and the node-health-status label.
	Message string
	Health  string
}

// EKSCluster describes an EKS cluster.
type EKSCluster struct {
	Name    string
	Region  string // default Options.Region
	Version string // default "1.31"
	Status  string // default "ACTIVE"
	ARN     string // read only
}

// Nodegroup describes an EKS managed node group.
type Nodegroup struct {
	Cluster       string
	Region        string // default Options.Region
	Name          string
	InstanceTypes []string
	MinSize       int
	MaxSize       int
	DesiredSize   int    // seeding: the nodes created Ready
	Status        string // default "ACTIVE"
	Labels        map[string]string
	CapacityType  string // default "ON_DEMAND"
	ARN           string // read only
	Nodes         []Node // read only
}

// Price is one on-demand price list entry served by GetProducts.
type Price struct {
	ServiceCode     string // "AmazonSageMaker" or "AmazonEC2"
	InstanceType    string
	RegionCode      string // e.g. "us-west-2"; its "location" attribute is derived
	OperatingSystem string // EC2 only; default "Linux" for AmazonEC2
	USDPerHour      float64
	Attributes      map[string]string // extra product attributes, override the derived ones
}
