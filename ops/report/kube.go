package report

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Node labels the report reads: HyperPod's, then EKS managed node groups'.
const (
	LabelInstanceGroup = "sagemaker.amazonaws.com/instance-group-name"
	LabelNodeHealth    = "sagemaker.amazonaws.com/node-health-status"
	LabelEKSNodegroup  = "eks.amazonaws.com/nodegroup"
	LabelInstanceType  = corev1.LabelInstanceTypeStable
	// LabelManagedBy marks the workloads HyperOps created.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "hyperops"
	// Ungrouped names nodes that carry no instance group or node group label.
	Ungrouped = "(ungrouped)"
	// DefaultGPUResource is the extended resource counted as GPUs.
	DefaultGPUResource = corev1.ResourceName("nvidia.com/gpu")
)

// listPageSize bounds each List call, so a 20,000-pod cluster is read in pages rather than one huge response.
const listPageSize = 500

// livePods is the field selector of the pod list: finished pods hold no GPUs and wait for nothing, and on a training
// cluster completed Job pods can outnumber the live ones many times, so the API server leaves them out of the
// response rather than the bot decoding and dropping them.
const livePods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// kubeView is what one pass over the cluster's nodes, pods and managed workloads found.
type kubeView struct {
	groups    map[string]*Group
	pending   pendingPods
	workloads map[workloadKey]*Workload
}

type workloadKey struct {
	namespace, kind, name string
}

// training reports whether a workload kind is a training job (the rest are inference services).
func training(kind string) bool { return kind != "Deployment" }

// readKube lists nodes, pods, and HyperOps Jobs and Deployments, and folds them into groups, pending pods and
// workloads.
func readKube(ctx context.Context, k kubernetes.Interface, gpu corev1.ResourceName) (*kubeView, error) {
	v := &kubeView{groups: map[string]*Group{}, workloads: map[workloadKey]*Workload{}}
	var nodeGroup map[string]*Group
	err := listPages(ctx, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := k.CoreV1().Nodes().List(ctx, o)
		if err != nil {
			return "", fmt.Errorf("list nodes: %w", err)
		}
		if nodeGroup == nil {
			nodeGroup = make(map[string]*Group, len(l.Items)+remaining(l.RemainingItemCount))
		}
		for i := range l.Items {
			nodeGroup[l.Items[i].Name] = v.addNode(&l.Items[i], gpu)
		}
		return l.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	if err := v.readWorkloads(ctx, k); err != nil {
		return nil, err
	}
	err = listPages(ctx, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.FieldSelector = livePods
		l, err := k.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		if err != nil {
			return "", fmt.Errorf("list pods: %w", err)
		}
		for i := range l.Items {
			v.addPod(&l.Items[i], gpu, nodeGroup)
		}
		return l.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// remaining is the server's estimate of the items after this page (zero when it gives none), capped: it only sizes a
// map up front.
func remaining(n *int64) int {
	if n == nil || *n < 0 {
		return 0
	}
	return int(min(*n, 1<<20))
}

// listPages calls list with a page limit until the server says there is no more.
func listPages(ctx context.Context, list func(context.Context, metav1.ListOptions) (string, error)) error {
	o := metav1.ListOptions{Limit: listPageSize}
	for {
		next, err := list(ctx, o)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		o.Continue = next
	}
}

func (v *kubeView) addNode(n *corev1.Node, gpu corev1.ResourceName) *Group {
	name := n.Labels[LabelInstanceGroup]
	if name == "" {
		name = n.Labels[LabelEKSNodegroup]
	}
	if name == "" {
		name = Ungrouped
	}
	g := v.groups[name]
	if g == nil {
		g = &Group{Name: name, InstanceType: n.Labels[LabelInstanceType]}
		v.groups[name] = g
	}
	g.Nodes++
	if nodeReady(n) {
		g.Ready++
	}
	if h := n.Labels[LabelNodeHealth]; h != "" {
		if g.Health == nil {
			g.Health = map[string]int{}
		}
		g.Health[h]++
	}
	if q, ok := n.Status.Allocatable[gpu]; ok {
		g.GPUs.Total += q.Value()
	}
	return g
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (v *kubeView) addPod(p *corev1.Pod, gpu corev1.ResourceName, nodeGroup map[string]*Group) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return // the server already leaves finished pods out (livePods); a fake or proxy that ignores selectors may not
	}
	req := podRequest(p, gpu)
	if w := v.workloadOf(p); w != nil {
		w.Pods++
		if p.Status.Phase == corev1.PodRunning {
			w.Running++
		}
		w.GPUs += req
	}
	if p.Spec.NodeName != "" {
		if g := nodeGroup[p.Spec.NodeName]; g != nil {
			g.GPUs.Allocated += req
		}
		return
	}
	if req > 0 && p.Status.Phase == corev1.PodPending {
		since, reason := waitingSince(p)
		v.pending.add(PendingPod{Namespace: p.Namespace, Name: p.Name, GPUs: req, Since: since, Reason: reason})
	}
}

// podRequest is the pod's effective request of the resource, as the scheduler counts it: the larger of the sum of
// its containers and its largest init container, plus overhead. A limit without a request counts as the request
// (the API server defaults it so for extended resources).
func podRequest(p *corev1.Pod, res corev1.ResourceName) int64 {
	var sum, initMax int64
	for i := range p.Spec.Containers {
		sum += containerRequest(&p.Spec.Containers[i], res)
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += containerRequest(c, res) // sidecars run alongside the containers
			continue
		}
		initMax = max(initMax, containerRequest(c, res))
	}
	if q, ok := p.Spec.Overhead[res]; ok {
		sum += q.Value()
	}
	return max(sum, initMax)
}

func containerRequest(c *corev1.Container, res corev1.ResourceName) int64 {
	if q, ok := c.Resources.Requests[res]; ok {
		return q.Value()
	}
	if q, ok := c.Resources.Limits[res]; ok {
		return q.Value()
	}
	return 0
}

// waitingSince is when the scheduler last said the pod cannot be placed, and why; else when the pod was created.
func waitingSince(p *corev1.Pod) (time.Time, string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, c.Message
		}
	}
	return p.CreationTimestamp.Time, ""
}

// workloadOf finds the managed workload a pod belongs to: its Job, its Deployment (through the ReplicaSet's name),
// or a PyTorchJob / HyperPodPyTorchJob, which the report only knows through its labelled pods.
func (v *kubeView) workloadOf(p *corev1.Pod) *Workload {
	for _, o := range p.OwnerReferences {
		switch o.Kind {
		case "Job":
			return v.workloads[workloadKey{p.Namespace, "Job", o.Name}]
		case "ReplicaSet":
			name := strings.TrimSuffix(o.Name, "-"+p.Labels[appsv1.DefaultDeploymentUniqueLabelKey])
			return v.workloads[workloadKey{p.Namespace, "Deployment", name}]
		case "PyTorchJob", "HyperPodPyTorchJob":
			if p.Labels[LabelManagedBy] != ManagedBy {
				return nil
			}
			key := workloadKey{p.Namespace, o.Kind, o.Name}
			w := v.workloads[key]
			if w == nil {
				w = &Workload{Kind: o.Kind, Name: o.Name, Since: p.CreationTimestamp.Time}
				v.workloads[key] = w
			}
			w.Since = minTime(w.Since, p.CreationTimestamp.Time)
			return w
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// readWorkloads lists the managed Jobs that have not finished and the managed Deployments that want replicas.
func (v *kubeView) readWorkloads(ctx context.Context, k kubernetes.Interface) error {
	sel := LabelManagedBy + "=" + ManagedBy
	err := listPages(ctx, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = sel
		l, err := k.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, o)
		if err != nil {
			return "", fmt.Errorf("list jobs: %w", err)
		}
		for i := range l.Items {
			j := &l.Items[i]
			if !jobFinished(j) {
				v.workloads[workloadKey{j.Namespace, "Job", j.Name}] = &Workload{Kind: "Job", Name: j.Name, Since: j.CreationTimestamp.Time}
			}
		}
		return l.Continue, nil
	})
	if err != nil {
		return err
	}
	return listPages(ctx, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = sel
		l, err := k.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, o)
		if err != nil {
			return "", fmt.Errorf("list deployments: %w", err)
		}
		for i := range l.Items {
			d := &l.Items[i]
			if d.Spec.Replicas == nil || *d.Spec.Replicas > 0 || d.Status.Replicas > 0 {
				v.workloads[workloadKey{d.Namespace, "Deployment", d.Name}] = &Workload{Kind: "Deployment", Name: d.Name, Since: d.CreationTimestamp.Time}
			}
		}
		return l.Continue, nil
	})
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// namespaces groups the workloads by namespace, sorted by namespace, kind and name.
func (v *kubeView) namespaces() []NamespaceWorkloads {
	byNS := map[string]*NamespaceWorkloads{}
	for key, w := range v.workloads {
		ns := byNS[key.namespace]
		if ns == nil {
			ns = &NamespaceWorkloads{Namespace: key.namespace}
			byNS[key.namespace] = ns
		}
		if training(key.kind) {
			ns.Training = append(ns.Training, *w)
		} else {
			ns.Inference = append(ns.Inference, *w)
		}
	}
	out := make([]NamespaceWorkloads, 0, len(byNS))
	for _, ns := range byNS {
		sortWorkloads(ns.Training)
		sortWorkloads(ns.Inference)
		out = append(out, *ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

func sortWorkloads(ws []Workload) {
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Kind != ws[j].Kind {
			return ws[i].Kind < ws[j].Kind
		}
		return ws[i].Name < ws[j].Name
	})
}
