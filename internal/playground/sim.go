package playground

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/fakeaws"
)

// World is the simulated world the side panel shows.
type World struct {
	Mode           string                    `json:"mode"`
	HyperPod       string                    `json:"hyperpod"`
	HyperPodStatus string                    `json:"hyperpodStatus"`
	Groups         []GroupView               `json:"groups"`
	Nodes          []NodeView                `json:"nodes"`
	Workloads      []WorkloadView            `json:"workloads"`
	Throttled      bool                      `json:"throttled"`
	Problems       []string                  `json:"problems,omitempty"`
	GPUs           struct{ Total, Used int } `json:"gpus"`
}

// GroupView is a HyperPod instance group as the fake AWS has it.
type GroupView struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Target  int    `json:"target"`
	Current int    `json:"current"`
	Status  string `json:"status"`
}

// NodeView is a Kubernetes node.
type NodeView struct {
	Name     string `json:"name"`
	Group    string `json:"group"`
	Type     string `json:"type"`
	GPUs     int    `json:"gpus"`
	GPUsUsed int    `json:"gpusUsed"`
	Ready    bool   `json:"ready"`
	Health   string `json:"health"`
	Cordoned bool   `json:"cordoned"`
}

// WorkloadView is a Job HyperOps created, with the state the watcher reports.
type WorkloadView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	State     string `json:"state"`
	Pods      string `json:"pods"`
}

const managedBy = "app.kubernetes.io/managed-by=hyperops"

// world reads the fake AWS and the Kubernetes API.
func (p *Playground) world(ctx context.Context) World {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w := World{Mode: p.mode, HyperPod: HyperPod, Throttled: p.throttled()}
	if hp, ok := p.AWS.HyperPodCluster(HyperPod); ok {
		w.HyperPodStatus = hp.Status
		for _, g := range hp.InstanceGroups {
			w.Groups = append(w.Groups, GroupView{Name: g.Name, Type: g.Type, Target: g.Count, Current: g.CurrentCount, Status: g.Status})
		}
	}
	used := map[string]int{}
	pods, err := p.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		w.Problems = append(w.Problems, "pods: "+err.Error())
	}
	podsOf := map[string][]corev1.Pod{}
	if pods != nil {
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				podsOf[pod.Namespace+"/"+pod.Labels["job-name"]] = append(podsOf[pod.Namespace+"/"+pod.Labels["job-name"]], pod)
				continue
			}
			podsOf[pod.Namespace+"/"+pod.Labels["job-name"]] = append(podsOf[pod.Namespace+"/"+pod.Labels["job-name"]], pod)
			for _, c := range pod.Spec.Containers {
				if q, ok := c.Resources.Requests[controlplane.ResourceGPU]; ok && pod.Spec.NodeName != "" {
					used[pod.Spec.NodeName] += int(q.Value())
				}
			}
		}
	}
	nodes, err := p.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		w.Problems = append(w.Problems, "nodes: "+err.Error())
	} else {
		for _, n := range nodes.Items {
			gpus := n.Status.Capacity[controlplane.ResourceGPU]
			nv := NodeView{Name: n.Name, Group: n.Labels[controlplane.LabelInstanceGroup], Type: n.Labels[controlplane.LabelInstanceType],
				GPUs: int(gpus.Value()), GPUsUsed: used[n.Name], Health: n.Labels[controlplane.LabelNodeHealth], Cordoned: n.Spec.Unschedulable}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					nv.Ready = c.Status == corev1.ConditionTrue
				}
			}
			w.GPUs.Total += nv.GPUs
			w.GPUs.Used += nv.GPUsUsed
			w.Nodes = append(w.Nodes, nv)
		}
	}
	for _, ns := range p.Config.Clusters[0].Namespaces {
		jobs, err := p.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: managedBy})
		if err != nil {
			w.Problems = append(w.Problems, "jobs: "+err.Error())
			continue
		}
		for _, j := range jobs.Items {
			w.Workloads = append(w.Workloads, workloadOf(j, podsOf[j.Namespace+"/"+j.Name]))
		}
	}
	sort.Slice(w.Workloads, func(i, j int) bool { return w.Workloads[i].Name < w.Workloads[j].Name })
	return w
}

func workloadOf(j batchv1.Job, pods []corev1.Pod) WorkloadView {
	wv := WorkloadView{Namespace: j.Namespace, Name: j.Name, Kind: "Job", State: "pending"}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			wv.State = "completed"
		case batchv1.JobFailed:
			wv.State = "failed"
		}
	}
	running := 0
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	if wv.State == "pending" && running > 0 {
		wv.State = "running"
	}
	wv.Pods = fmt.Sprintf("%d running, %d succeeded, %d failed", running, j.Status.Succeeded, j.Status.Failed)
	return wv
}

// failWorkload fails every live pod of a Job, as a crashing trainer would: exit code 1. The Job (backoffLimit 0)
// then fails and the watcher tells the request's thread.
func (p *Playground) failWorkload(ctx context.Context, ns, name string) error {
	if !p.Config.Clusters[0].AllowsNamespace(ns) {
		return fmt.Errorf("namespace %q is not one of the playground's", ns)
	}
	pods, err := p.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
	if err != nil {
		return fmt.Errorf("list the pods of %s/%s: %w", ns, name, err)
	}
	failed := 0
	for _, pod := range pods.Items {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Reason = "Error"
		pod.Status.Message = "made to fail from the playground's side panel"
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}
		var statuses []corev1.ContainerStatus
		for _, c := range pod.Spec.Containers {
			statuses = append(statuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "CUDA error: an illegal memory access was encountered",
					StartedAt: now, FinishedAt: now}}})
		}
		pod.Status.ContainerStatuses = statuses
		if _, err := p.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, &pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("fail pod %s: %w", pod.Name, err)
		}
		failed++
	}
	if failed == 0 {
		return fmt.Errorf("%s/%s has no live pod to fail (it may have finished already)", ns, name)
	}
	return nil
}

// unhealthyReason is what the playground's "make unhealthy" has HyperPod say of the node.
const unhealthyReason = "GPU health check failed: Xid 79, GPU has fallen off the bus (marked from the playground)"

// setNodeHealth marks a node as HyperPod's health agent would: faulty (UnschedulablePendingReplacement, cordoned;
// for a node of the fake HyperPod cluster also its instance status Failure with a reason, through the fake AWS,
// which relabels the node), or back to Schedulable.
func (p *Playground) setNodeHealth(ctx context.Context, name string, healthy bool) error {
	if id := fakeaws.NodeName(name).InstanceID(); id != "" && p.hyperPodHas(id) {
		if healthy {
			return p.AWS.SetNodeHealth(HyperPod, id, fakeaws.NodeHealth{})
		}
		return p.AWS.MarkNodeFaulty(HyperPod, id, unhealthyReason)
	}
	health, cordon := "UnschedulablePendingReplacement", true
	if healthy {
		health, cordon = controlplane.HealthSchedulable, false
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}},"spec":{"unschedulable":%v}}`, controlplane.LabelNodeHealth, health, cordon)
	if _, err := p.Kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("mark node %s %s: %w", name, health, err)
	}
	return nil
}

// hyperPodHas reports whether the fake HyperPod cluster has the instance.
func (p *Playground) hyperPodHas(id string) bool {
	hp, ok := p.AWS.HyperPodCluster(HyperPod)
	if !ok {
		return false
	}
	for _, g := range hp.InstanceGroups {
		for _, n := range g.Nodes {
			if n.InstanceID == id {
				return true
			}
		}
	}
	return false
}

// throttleOps are the AWS operations the bot calls, which the throttle button fails.
var throttleOps = []string{fakeaws.OpSageMakerDescribeCluster, fakeaws.OpSageMakerListClusterNodes, fakeaws.OpSageMakerUpdateCluster,
	fakeaws.OpSageMakerDescribeTrainingPlan,
	fakeaws.OpEKSDescribeCluster, fakeaws.OpEKSDescribeNodegroup, fakeaws.OpEKSUpdateNodegroupConfig}

// throttle makes the fake AWS answer ThrottlingException to every call of throttleOps until it is turned off; the
// SDK's retryer gives up after its attempts and HyperOps answers E_AWS_ERROR.
func (p *Playground) throttle(on bool) {
	p.throttleMu.Lock()
	defer p.throttleMu.Unlock()
	p.AWS.ClearFaults()
	p.throttleOn = on
	if on {
		for _, op := range throttleOps {
			p.AWS.Fail(op, -1, "ThrottlingException", 400, "Rate exceeded")
		}
	}
}

// throttled reports whether throttling is on.
func (p *Playground) throttled() bool {
	p.throttleMu.Lock()
	defer p.throttleMu.Unlock()
	return p.throttleOn
}
