package collect

import (
	"github.com/hyperops/hyperops/ops/report"

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

	"github.com/hyperops/hyperops/ops/kube"
)

const (
	// LabelManagedBy marks the workloads HyperOps created.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "hyperops"
	// DefaultGPUResource is the extended resource counted as GPUs.
	DefaultGPUResource = kube.ResourceGPU
)

// listPageSize bounds each List call, so a 20,000-pod cluster is read in pages rather than one huge response.
const listPageSize = 500

// livePods is the field selector of the pod list: finished pods hold no GPUs and wait for nothing, and on a training
// cluster completed Job pods can outnumber the live ones many times, so the API server leaves them out of the
// response rather than the bot decoding and dropping them.
const livePods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// kubeView is what one pass over the cluster's nodes, pods and managed workloads found.
type kubeView struct {
	nodes     *kube.NodeGrouping
	groups    map[string]*report.Group
	pending   pendingPods
	workloads map[workloadKey]*report.Workload
}

type workloadKey struct {
	namespace, kind, name string
}

// training reports whether a workload kind is a training job (the rest are inference services).
func training(kind string) bool { return kind != "Deployment" }

// readKube lists nodes, pods, and HyperOps Jobs and Deployments, and folds them into groups, pending pods and
// workloads.
func readKube(ctx context.Context, k kubernetes.Interface, gpu corev1.ResourceName) (*kubeView, error) {
	v := &kubeView{workloads: map[workloadKey]*report.Workload{}}
	nodes := kube.NewNodeGrouping(gpu)
	err := listPages(ctx, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := k.CoreV1().Nodes().List(ctx, o)
		if err != nil {
			return "", fmt.Errorf("list nodes: %w", err)
		}
		for i := range l.Items {
			nodes.AddNode(&l.Items[i])
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
			v.addPod(&l.Items[i], nodes)
		}
		return l.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	v.nodes = nodes
	return v, nil
}

// groupsOf is the report's view of the cluster's node groups.
func groupsOf(nodes *kube.NodeGrouping) map[string]*report.Group {
	out := map[string]*report.Group{}
	for _, n := range nodes.Groups() {
		out[n.Group] = &report.Group{Name: n.Group, InstanceType: n.InstanceType, Nodes: n.Nodes, Ready: n.Ready, Health: n.Health,
			States: n.States, Unhealthy: n.Unhealthy, GPUs: report.GPUs{Total: n.GPUAllocatable, Allocated: n.GPURequested}}
	}
	return out
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

func (v *kubeView) addPod(p *corev1.Pod, nodes *kube.NodeGrouping) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return // the server already leaves finished pods out (livePods); a fake or proxy that ignores selectors may not
	}
	req := kube.PodRequest(p, nodes.GPU())
	if w := v.workloadOf(p); w != nil {
		w.Pods++
		if p.Status.Phase == corev1.PodRunning {
			w.Running++
		}
		w.GPUs += req
	}
	if nodes.AddPod(p) || p.Spec.NodeName != "" {
		return
	}
	if req > 0 && p.Status.Phase == corev1.PodPending {
		since, reason := waitingSince(p)
		v.pending.add(report.PendingPod{Namespace: p.Namespace, Name: p.Name, GPUs: req, Since: since, Reason: reason})
	}
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
func (v *kubeView) workloadOf(p *corev1.Pod) *report.Workload {
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
				w = &report.Workload{Kind: o.Kind, Name: o.Name, Since: p.CreationTimestamp.Time}
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
				v.workloads[workloadKey{j.Namespace, "Job", j.Name}] = &report.Workload{Kind: "Job", Name: j.Name, Since: j.CreationTimestamp.Time}
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
				v.workloads[workloadKey{d.Namespace, "Deployment", d.Name}] = &report.Workload{Kind: "Deployment", Name: d.Name, Since: d.CreationTimestamp.Time}
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
func (v *kubeView) namespaces() []report.NamespaceWorkloads {
	byNS := map[string]*report.NamespaceWorkloads{}
	for key, w := range v.workloads {
		ns := byNS[key.namespace]
		if ns == nil {
			ns = &report.NamespaceWorkloads{Namespace: key.namespace}
			byNS[key.namespace] = ns
		}
		if training(key.kind) {
			ns.Training = append(ns.Training, *w)
		} else {
			ns.Inference = append(ns.Inference, *w)
		}
	}
	out := make([]report.NamespaceWorkloads, 0, len(byNS))
	for _, ns := range byNS {
		sortWorkloads(ns.Training)
		sortWorkloads(ns.Inference)
		out = append(out, *ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

func sortWorkloads(ws []report.Workload) {
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Kind != ws[j].Kind {
			return ws[i].Kind < ws[j].Kind
		}
		return ws[i].Name < ws[j].Name
	})
}
