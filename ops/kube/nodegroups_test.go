package kube

import (
	"reflect"
	"testing"

	"github.com/hyperops/hyperops/ops/fleet"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}
}

func TestPodRequest(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	c := func(req, lim int64) corev1.Container {
		r := corev1.ResourceRequirements{}
		if req > 0 {
			r.Requests = gpus(req)
		}
		if lim > 0 {
			r.Limits = gpus(lim)
		}
		return corev1.Container{Resources: r}
	}
	sidecar := c(1, 1)
	sidecar.RestartPolicy = &always
	tests := []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{c(2, 2), c(1, 1)}}, 3},
		{"limit stands for a missing request", corev1.PodSpec{Containers: []corev1.Container{c(0, 4)}}, 4},
		{"a bigger init container wins", corev1.PodSpec{InitContainers: []corev1.Container{c(8, 8)}, Containers: []corev1.Container{c(2, 2)}}, 8},
		{"a sidecar adds", corev1.PodSpec{InitContainers: []corev1.Container{sidecar}, Containers: []corev1.Container{c(2, 2)}}, 3},
		{"overhead adds", corev1.PodSpec{Overhead: gpus(1), Containers: []corev1.Container{c(2, 2)}}, 3},
		{"no GPUs", corev1.PodSpec{Containers: []corev1.Container{c(0, 0)}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodRequest(&corev1.Pod{Spec: tt.spec}, ResourceGPU); got != tt.want {
				t.Errorf("PodRequest = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestNodeGrouping: the grouping /hp status and the capacity report both read. Nodes go by HyperPod instance group,
// then EKS node group, else Ungrouped; GPUs count as the scheduler counts them (an init container's larger request
// wins), only for live pods placed on a counted node.
func TestNodeGrouping(t *testing.T) {
	node := func(name string, labels map[string]string, ready bool, gpu int64) *corev1.Node {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{Allocatable: gpus(gpu), Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	}
	pod := func(nodeName string, phase corev1.PodPhase, init, main int64) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: nodeName,
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: gpus(init)}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: gpus(main)}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	g := NewNodeGrouping("")
	g.AddNode(node("hp-1", map[string]string{LabelHyperPodGroup: "gpu", LabelEKSNodeGroup: "ignored", LabelInstanceType: "ml.p5.48xlarge",
		LabelNodeHealth: "Schedulable"}, true, 8))
	g.AddNode(node("hp-2", map[string]string{LabelHyperPodGroup: "gpu", LabelInstanceType: "ml.p5.48xlarge",
		LabelNodeHealth: "Unschedulable"}, false, 8))
	g.AddNode(node("ng-1", map[string]string{LabelEKSNodeGroup: "cpu-ng"}, true, 0))
	g.AddNode(node("bare", nil, true, 0))
	placed := []bool{
		g.AddPod(pod("hp-1", corev1.PodRunning, 4, 2)),
		g.AddPod(pod("hp-2", corev1.PodPending, 0, 1)),
		g.AddPod(pod("hp-1", corev1.PodSucceeded, 0, 8)),
		g.AddPod(pod("", corev1.PodPending, 0, 8)),
		g.AddPod(pod("gone", corev1.PodRunning, 0, 8)),
	}
	if want := []bool{true, true, false, false, false}; !reflect.DeepEqual(placed, want) {
		t.Errorf("placed = %v, want %v", placed, want)
	}
	want := []fleet.GroupNodes{
		{Group: Ungrouped, Nodes: 1, Ready: 1, States: fleet.HealthCounts{Healthy: 1}},
		{Group: "cpu-ng", Nodes: 1, Ready: 1, States: fleet.HealthCounts{Healthy: 1}},
		{Group: "gpu", InstanceType: "ml.p5.48xlarge", Nodes: 2, Ready: 1, Health: map[string]int{"Schedulable": 1, "Unschedulable": 1},
			GPUAllocatable: 16, GPURequested: 5, States: fleet.HealthCounts{Healthy: 1, Checking: 1},
			Unhealthy: []fleet.NodeHealth{{Node: "hp-2", State: fleet.HealthChecking, Label: "Unschedulable", Reason: "deep health check in progress"}}},
	}
	if got := g.Groups(); !reflect.DeepEqual(got, want) {
		t.Errorf("groups:\n got %+v\nwant %+v", got, want)
	}
}

// TestNodeHealth: what a person reads of a node's health, from the health agent's label and, where HyperPod was
// read, the instance's status and message.
func TestNodeHealth(t *testing.T) {
	tests := []struct {
		name, label, status, message string
		want                         fleet.NodeHealth
	}{
		{"schedulable and running", HealthSchedulable, InstanceRunning, "", fleet.NodeHealth{State: fleet.HealthHealthy}},
		{"an EKS node has neither", "", "", "", fleet.NodeHealth{State: fleet.HealthHealthy}},
		{"failed, HyperPod says why", HealthPendingReplacement, InstanceFailure, "GPU 3 Xid 79",
			fleet.NodeHealth{State: fleet.HealthFaulty, Label: HealthPendingReplacement, InstanceStatus: InstanceFailure, Reason: "GPU 3 Xid 79"}},
		{"label only, no AWS view", HealthPendingReboot, "", "",
			fleet.NodeHealth{State: fleet.HealthFaulty, Label: HealthPendingReboot, Reason: "failed a health check; HyperPod marked it for a reboot"}},
		{"Failure while the label still says Schedulable", HealthSchedulable, InstanceFailure, "",
			fleet.NodeHealth{State: fleet.HealthFaulty, InstanceStatus: InstanceFailure, Reason: "HyperPod reports the instance as Failure"}},
		{"replacement under way", HealthPendingReplacement, InstanceShuttingDown, "",
			fleet.NodeHealth{State: fleet.HealthReplacing, Label: HealthPendingReplacement, InstanceStatus: InstanceShuttingDown,
				Reason: "failed a health check; HyperPod marked it for replacement"}},
		{"reboot under way", HealthPendingReboot, InstancePending, "rebooting",
			fleet.NodeHealth{State: fleet.HealthRebooting, Label: HealthPendingReboot, InstanceStatus: InstancePending, Reason: "rebooting"}},
		{"deep health check", HealthUnschedulable, InstanceDeepHealthCheck, "",
			fleet.NodeHealth{State: fleet.HealthChecking, Label: HealthUnschedulable, InstanceStatus: InstanceDeepHealthCheck, Reason: "deep health check in progress"}},
		{"system update", HealthSchedulable, InstanceSystemUpdating, "",
			fleet.NodeHealth{State: fleet.HealthChecking, InstanceStatus: InstanceSystemUpdating, Reason: "system update in progress"}},
		{"a label value from the future is not healthy", "UnschedulablePendingSomething", "", "",
			fleet.NodeHealth{State: fleet.HealthFaulty, Label: "UnschedulablePendingSomething", Reason: "health label UnschedulablePendingSomething"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyNode(tt.label, tt.status, tt.message); got != tt.want {
				t.Errorf("ClassifyNode = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestNodeGroupingWithInstances: HyperPod's instance statuses join the nodes by instance ID; the health agent's
// taint stands in for a missing label; instances without a node are not counted.
func TestNodeGroupingWithInstances(t *testing.T) {
	node := func(name, health string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelHyperPodGroup: "gpu", LabelNodeHealth: health}}}
	}
	tainted := node("hyperpod-i-0c", "")
	delete(tainted.Labels, LabelNodeHealth)
	tainted.Spec.Taints = []corev1.Taint{{Key: LabelNodeHealth, Value: HealthPendingReboot, Effect: corev1.TaintEffectNoSchedule}}
	g := NewNodeGrouping("")
	g.AddNode(node("hyperpod-i-0a", HealthSchedulable))
	g.AddNode(node("hyperpod-i-0b", HealthPendingReplacement))
	g.AddNode(tainted)
	g.AddInstances([]fleet.InstanceHealth{
		{Group: "gpu", InstanceID: "i-0a", Status: InstanceRunning},
		{Group: "gpu", InstanceID: "i-0b", Status: InstanceFailure, Message: "NVLink error"},
		{Group: "gpu", InstanceID: "i-0z", Status: InstancePending},
	})
	got := g.Groups()
	want := fleet.GroupNodes{Group: "gpu", Nodes: 3, Health: map[string]int{HealthSchedulable: 1, HealthPendingReplacement: 1, HealthPendingReboot: 1},
		States: fleet.HealthCounts{Healthy: 1, Faulty: 2},
		Unhealthy: []fleet.NodeHealth{
			{Node: "hyperpod-i-0b", InstanceID: "i-0b", State: fleet.HealthFaulty, Label: HealthPendingReplacement, InstanceStatus: InstanceFailure, Reason: "NVLink error"},
			{Node: "hyperpod-i-0c", State: fleet.HealthFaulty, Label: HealthPendingReboot, Reason: "failed a health check; HyperPod marked it for a reboot"},
		}}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("groups:\n got %+v\nwant %+v", got, want)
	}
}
