package collect

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hyperops/hyperops/ops/kube"
)

var t0 = time.Date(2025, 3, 10, 16, 0, 0, 0, time.UTC)

func gpuList(n int64) corev1.ResourceList {
	return corev1.ResourceList{DefaultGPUResource: *resource.NewQuantity(n, resource.DecimalSI)}
}

// hpNode is a node labelled like HyperPod labels its nodes.
func hpNode(name, group, instanceType string, gpus int64, ready bool, health string) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			kube.LabelHyperPodGroup: group, kube.LabelInstanceType: instanceType, kube.LabelNodeHealth: health,
		}},
		Status: corev1.NodeStatus{
			Allocatable: gpuList(gpus), Capacity: gpuList(gpus),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

type podOpt func(*corev1.Pod)

func onNode(n string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeName = n; p.Status.Phase = corev1.PodRunning }
}

func ownedBy(kind, name string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: name})
	}
}

func labelled(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func unschedulable(since time.Time, msg string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: msg, LastTransitionTime: metav1.NewTime(since),
		})
	}
}

func gpuPod(ns, name string, gpus int64, created time.Time, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}, CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: gpuList(gpus), Limits: gpuList(gpus)}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if gpus == 0 {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func managedJob(ns, name string, created time.Time, finished bool) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created),
		Labels: map[string]string{LabelManagedBy: ManagedBy}}}
	if finished {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	}
	return j
}

func managedDeployment(ns, name string, replicas int32, created time.Time) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas},
	}
}

// fixture is a small HyperPod cluster: two groups, a training job, an inference service, pending pods.
func fixture() []runtime.Object {
	return []runtime.Object{
		hpNode("p5-1", "train-p5", "ml.p5.48xlarge", 8, true, "Schedulable"),
		hpNode("p5-2", "train-p5", "ml.p5.48xlarge", 8, true, "Schedulable"),
		hpNode("p5-3", "train-p5", "ml.p5.48xlarge", 8, false, "UnschedulablePendingReplacement"),
		hpNode("g5-1", "infer-g5", "ml.g5.12xlarge", 4, true, "Schedulable"),
		managedJob("ml-platform", "fraud-v17", t0.Add(-3*time.Hour), false),
		managedJob("ml-platform", "fraud-v16", t0.Add(-30*time.Hour), true),
		managedDeployment("ml-serving", "ranker", 1, t0.Add(-48*time.Hour)),
		gpuPod("ml-platform", "fraud-v17-0", 8, t0.Add(-3*time.Hour), onNode("p5-1"), ownedBy("Job", "fraud-v17")),
		gpuPod("ml-platform", "fraud-v17-1", 4, t0.Add(-3*time.Hour), onNode("p5-2"), ownedBy("Job", "fraud-v17")),
		gpuPod("ml-platform", "fraud-v16-0", 8, t0.Add(-30*time.Hour), onNode("p5-2"), phase(corev1.PodSucceeded), ownedBy("Job", "fraud-v16")),
		gpuPod("ml-serving", "ranker-7d9f-abcde", 2, t0.Add(-48*time.Hour), onNode("g5-1"), ownedBy("ReplicaSet", "ranker-7d9f"),
			labelled(appsv1.DefaultDeploymentUniqueLabelKey, "7d9f")),
		gpuPod("ml-platform", "llm-ft-master-0", 8, t0.Add(-2*time.Hour), ownedBy("PyTorchJob", "llm-ft"), labelled(LabelManagedBy, ManagedBy),
			unschedulable(t0.Add(-90*time.Minute), "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")),
		gpuPod("research", "notebook", 1, t0.Add(-10*time.Minute)),
		gpuPod("research", "cpu-only", 0, t0.Add(-time.Hour)),
	}
}

func kubeFor(objs ...runtime.Object) KubeClients {
	cs := fake.NewClientset(objs...)
	return func(cluster string) (kubernetes.Interface, error) {
		if cluster != "ml-prod-eks" {
			return nil, fmt.Errorf("no cluster %q", cluster)
		}
		return cs, nil
	}
}

// memSamples is an in-memory SampleStore that behaves as the Redis one: appended in order, the newest max kept,
// returned oldest first, values copied.
type memSamples struct {
	mu     sync.Mutex
	series map[string][]Sample
	err    error
}

func (m *memSamples) AddSample(_ context.Context, series string, at time.Time, value []byte, max int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.series == nil {
		m.series = map[string][]Sample{}
	}
	s := append(m.series[series], Sample{At: at, Value: append([]byte(nil), value...)})
	sort.SliceStable(s, func(i, j int) bool { return s[i].At.Before(s[j].At) })
	if len(s) > max {
		s = s[len(s)-max:]
	}
	m.series[series] = s
	return nil
}

func (m *memSamples) Samples(_ context.Context, series string) ([]Sample, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	return append([]Sample(nil), m.series[series]...), nil
}

type fakeGroups struct {
	groups []GroupStatus
	err    error
}

func (f fakeGroups) InstanceGroups(context.Context, string) ([]GroupStatus, error) {
	return f.groups, f.err
}

var (
	createOpts = metav1.CreateOptions{}
	getOpts    = metav1.GetOptions{}
	updateOpts = metav1.UpdateOptions{}
)
