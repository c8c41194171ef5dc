package report

import (
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
)

// Report is the platform-neutral capacity report of one cluster at one moment. handlers renders it as Block Kit;
// Chart draws it.
type Report struct {
	// Name is the report's name in config ("on-demand" for /hp report capacity).
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	// At is when the figures were read, in the report's time zone.
	At time.Time `json:"at"`
	// Sections are the sections to show (config.ReportSections); empty means all.
	Sections []string `json:"sections,omitempty"`
	Groups   []Group  `json:"groups"`
	GPUs     GPUs     `json:"gpus"`
	Pending  Pending  `json:"pending"`
	// Kueue is the cluster's Kueue queues; nil when its config names no LocalQueue or the queues section is off.
	Kueue     *Kueue               `json:"kueue,omitempty"`
	Workloads []NamespaceWorkloads `json:"workloads,omitempty"`
	Spend     Spend                `json:"spend"`
	// Change is the difference from the previous report of the same series; nil when there is none.
	Change *Change `json:"change,omitempty"`
	// History is the utilisation of earlier reports of the same series, oldest first, ending with this one.
	History []Point `json:"history,omitempty"`
	// Reservations are the training plans instance groups run on that end within ReservationWindow or have
	// ended, soonest first (shown with the instance groups).
	Reservations []ops.CapacityReservation `json:"reservations,omitempty"`
	// Warnings say what could not be read (the AWS view, the samples); the figures that remain are still right.
	Warnings []string `json:"warnings,omitempty"`
}

// OnDemand is the report name of /hp report capacity, so on-demand reports keep their own series.
const OnDemand = "on-demand"

// ReservationWindow is how far ahead a report lists the reservations that end: a day, so the report before the
// end always names it.
const ReservationWindow = 24 * time.Hour

// Shows reports whether the report includes section (an empty Sections means all).
func (r Report) Shows(section string) bool {
	if len(r.Sections) == 0 {
		return true
	}
	for _, s := range r.Sections {
		if s == section {
			return true
		}
	}
	return false
}

// The sections of a report, as config.ReportSections names them.
const (
	SectionGroups    = "instance-groups"
	SectionGPUs      = "gpus"
	SectionPending   = "pending"
	SectionQueues    = "queues"
	SectionWorkloads = "workloads"
	SectionSpend     = "spend"
	SectionChart     = "chart"
)

// Group is one HyperPod instance group or EKS node group: what AWS says (current/target, status) merged with what the
// cluster shows (nodes, readiness, health labels, GPUs).
type Group struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	// Current and Target are the instance counts AWS reports; without the AWS view both are the node count.
	Current int `json:"current"`
	Target  int `json:"target"`
	// Status is the AWS status of the group (InService, Updating, ACTIVE, …); empty without the AWS view.
	Status string `json:"status,omitempty"`
	Nodes  int    `json:"nodes"`
	Ready  int    `json:"ready"`
	// Health counts nodes by the HyperPod health label (sagemaker.amazonaws.com/node-health-status).
	Health map[string]int `json:"health,omitempty"`
	// States counts the nodes healthy, faulty, rebooting, replacing and checking; Unhealthy lists the nodes that are
	// not healthy, with the reason (kube.ClassifyNode).
	States    fleet.HealthCounts `json:"states"`
	Unhealthy []fleet.NodeHealth `json:"unhealthy,omitempty"`
	GPUs      GPUs               `json:"gpus"`
	// Hourly is the estimated on-demand $/h of the group's Current instances; PriceKnown is false when the
	// instance type has no price.
	Hourly     float64 `json:"hourly"`
	PriceKnown bool    `json:"priceKnown"`
}

// GPUs are allocatable GPUs and what running or bound pods request of them. Utilisation is Allocated / Total:
// allocation by requests, not device activity.
type GPUs struct {
	Total       int64   `json:"total"`
	Allocated   int64   `json:"allocated"`
	Free        int64   `json:"free"`
	Utilisation float64 `json:"utilisation"`
}

// GPUsOf returns the GPUs of total allocatable of which allocated are requested.
func GPUsOf(total, allocated int64) GPUs {
	g := GPUs{Total: total, Allocated: allocated, Free: total - allocated}
	if g.Free < 0 {
		g.Free = 0 // requests can exceed allocatable while a node shrinks; nothing is free then
	}
	if total > 0 {
		g.Utilisation = float64(allocated) / float64(total)
	}
	return g
}

// Pending summarises pods that wait to be scheduled and request GPUs.
type Pending struct {
	Pods int   `json:"pods"`
	GPUs int64 `json:"gpus"`
	// Longest is how long the longest-waiting pod has waited.
	Longest time.Duration `json:"longest"`
	// Oldest are the longest-waiting pods, longest first (at most MaxPendingListed).
	Oldest []PendingPod `json:"oldest,omitempty"`
}

// MaxPendingListed caps Pending.Oldest, so the report stays readable and within Slack's limits.
const MaxPendingListed = 10

// PendingPod is one pod waiting for GPUs.
type PendingPod struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	GPUs      int64         `json:"gpus"`
	Since     time.Time     `json:"since"`
	Waiting   time.Duration `json:"waiting"`
	// Reason is the scheduler's message when it said why (e.g. "0/8 nodes are available: 8 Insufficient nvidia.com/gpu").
	Reason string `json:"reason,omitempty"`
}

// NamespaceWorkloads are the HyperOps-managed workloads of one namespace.
type NamespaceWorkloads struct {
	Namespace string     `json:"namespace"`
	Training  []Workload `json:"training,omitempty"`
	Inference []Workload `json:"inference,omitempty"`
}

// Workload is one running training job or inference service labelled app.kubernetes.io/managed-by=hyperops.
type Workload struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Pods counts the workload's live pods; Running those running.
	Pods    int   `json:"pods"`
	Running int   `json:"running"`
	GPUs    int64 `json:"gpus"`
	// Since is when the workload was created.
	Since time.Time `json:"since"`
}

// Spend is the estimated on-demand spend of the cluster's instance groups.
type Spend struct {
	Hourly float64 `json:"hourly"`
	Daily  float64 `json:"daily"`
	// Unknown lists instance types without a price; Hourly then leaves them out.
	Unknown []string `json:"unknown,omitempty"`
	// Source says where the prices came from.
	Source string `json:"source,omitempty"`
	// Teams is what each team's spend budget on the cluster (budgets[] with a userGroup) has used of its current
	// window, from HyperOps' own records: what its members' approved and running requests hold at worst, and what
	// finished ones cost as they ran. Nil when no team budget covers the cluster.
	Teams []ops.BudgetUse `json:"teams,omitempty"`
}

// Change is the difference from the previous report of the same series; its Utilisation is in fraction points
// (0.05 = 5 points).
type Change struct {
	Since time.Time `json:"since"`
	Figures
}

// Figures are a report's headline numbers, as a sample keeps them for the next report, or their differences in a
// Change.
type Figures struct {
	Nodes         int     `json:"nodes"`
	GPUsTotal     int64   `json:"gpusTotal"`
	GPUsAllocated int64   `json:"gpusAllocated"`
	Utilisation   float64 `json:"utilisation"`
	PendingPods   int     `json:"pendingPods"`
	Hourly        float64 `json:"hourly"`
	Training      int     `json:"training"`
	Inference     int     `json:"inference"`
}

// Minus is each of the figures less the one of prev.
func (f Figures) Minus(prev Figures) Figures {
	return Figures{
		Nodes:         f.Nodes - prev.Nodes,
		GPUsTotal:     f.GPUsTotal - prev.GPUsTotal,
		GPUsAllocated: f.GPUsAllocated - prev.GPUsAllocated,
		Utilisation:   f.Utilisation - prev.Utilisation,
		PendingPods:   f.PendingPods - prev.PendingPods,
		Hourly:        f.Hourly - prev.Hourly,
		Training:      f.Training - prev.Training,
		Inference:     f.Inference - prev.Inference,
	}
}

// Point is one report's figures in the series, for the chart's line.
type Point struct {
	At          time.Time `json:"at"`
	Total       int64     `json:"total"`
	Allocated   int64     `json:"allocated"`
	Utilisation float64   `json:"utilisation"`
}

// Nodes counts the nodes of all groups.
func (r Report) Nodes() int {
	n := 0
	for _, g := range r.Groups {
		n += g.Nodes
	}
	return n
}

// TrainingCount and InferenceCount count the workloads of all namespaces.
func (r Report) TrainingCount() int {
	n := 0
	for _, ns := range r.Workloads {
		n += len(ns.Training)
	}
	return n
}

// InferenceCount counts the inference services of all namespaces.
func (r Report) InferenceCount() int {
	n := 0
	for _, ns := range r.Workloads {
		n += len(ns.Inference)
	}
	return n
}

// Kueue is the Kueue view of a cluster whose config names a LocalQueue (clusters[].kueue.queue): the LocalQueues of
// that name in the cluster's namespaces and the ClusterQueues they submit to.
type Kueue struct {
	// Installed is false when the cluster serves none of KueueVersions; the rest is then empty.
	Installed bool `json:"installed"`
	// Version is the API version read (v1beta2 or v1beta1).
	Version string `json:"version,omitempty"`
	// Queue is the configured LocalQueue name.
	Queue string `json:"queue"`
	// Resource is the resource the quota figures are of (the report's GPU resource).
	Resource string `json:"resource"`
	// LocalQueues are the LocalQueues named Queue, by namespace.
	LocalQueues []LocalQueue `json:"localQueues,omitempty"`
	// ClusterQueues are the ClusterQueues those LocalQueues submit to, by name.
	ClusterQueues []ClusterQueue `json:"clusterQueues,omitempty"`
}

// LocalQueue is one namespace's LocalQueue: the ClusterQueue it submits to and its workloads.
type LocalQueue struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	ClusterQueue string `json:"clusterQueue"`
	// Pending counts its workloads not yet admitted; Admitted those admitted and not finished.
	Pending  int64 `json:"pending"`
	Admitted int64 `json:"admitted"`
}

// ClusterQueue is one ClusterQueue's quota and use of the report's resource, summed over its flavors, and its
// workloads.
type ClusterQueue struct {
	Name string `json:"name"`
	// Missing is true when a LocalQueue names a ClusterQueue that does not exist: its workloads cannot be admitted.
	Missing bool   `json:"missing,omitempty"`
	Cohort  string `json:"cohort,omitempty"`
	// Covered is false when no flavor of the queue has quota for the resource.
	Covered bool `json:"covered"`
	// Flavors are the flavors that have quota for the resource.
	Flavors []string `json:"flavors,omitempty"`
	Nominal int64    `json:"nominal"`
	// BorrowingLimit is how much the queue may borrow from its cohort; nil means no limit (with a cohort).
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`
	// Used is the quota the admitted workloads use, including Borrowed, what they use beyond Nominal.
	Used     int64 `json:"used"`
	Borrowed int64 `json:"borrowed"`
	// Pending, Reserving and Admitted count the queue's workloads waiting, holding quota, and admitted.
	Pending   int64 `json:"pending"`
	Reserving int64 `json:"reserving"`
	Admitted  int64 `json:"admitted"`
}
