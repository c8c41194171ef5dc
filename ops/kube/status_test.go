package kube

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/ops"
)

func gpuPod(name, node string, gpus int64, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{ResourceGPU: *resourceQty(gpus)}}}}},
		Status: corev1.PodStatus{Phase: phase}}
}

func statusObjects() []runtime.Object {
	eks := gpuNodeObj("cpu-1", "", "m5.xlarge", 0, "")
	delete(eks.Labels, LabelHyperPodGroup)
	delete(eks.Labels, LabelNodeHealth)
	eks.Labels[LabelEKSNodeGroup] = "system"
	notReady := gpuNodeObj("gpu-3", "gpu-workers", "ml.g5.12xlarge", 4, "UnschedulablePendingReboot")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	return []runtime.Object{
		gpuNodeObj("gpu-1", "gpu-workers", "ml.g5.12xlarge", 4, "Schedulable"),
		gpuNodeObj("gpu-2", "gpu-workers", "ml.g5.12xlarge", 4, "Schedulable"),
		notReady, eks,
		gpuPod("a", "gpu-1", 4, corev1.PodRunning),
		gpuPod("b", "gpu-2", 2, corev1.PodRunning),
		gpuPod("done", "gpu-2", 2, corev1.PodSucceeded),
		gpuPod("waiting", "", 8, corev1.PodPending),
		managedJob("train-a", nil),
	}
}

func TestNodeGroups(t *testing.T) {
	e := newEnv(t, statusObjects())
	got, err := e.cs.NodeGroups(context.Background(), testCluster)
	if err != nil {
		t.Fatal(err)
	}
	want := []ops.NodeGroupNodes{
		{Group: "gpu-workers", InstanceType: "ml.g5.12xlarge", Nodes: 3, Ready: 2,
			Health: map[string]int{"Schedulable": 2, "UnschedulablePendingReboot": 1}, GPUAllocatable: 12, GPURequested: 6},
		{Group: "system", InstanceType: "m5.xlarge", Nodes: 1, Ready: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if _, err := e.cs.NodeGroups(context.Background(), "nope"); err == nil {
		t.Fatal("unknown cluster accepted")
	}
}

func TestGetClusterStatus(t *testing.T) {
	e := newEnv(t, statusObjects())
	op, err := e.prepare(t, request("get-cluster-status", nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Execute(context.Background(), request("get-cluster-status", nil), nil, ops.Execution{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != "ml-dev: 3/4 nodes ready, 6 of 12 GPUs requested, 1 pod(s) waiting for GPUs" {
		t.Fatalf("summary = %q", res.Summary)
	}
	if !strings.Contains(string(res.Data), `"ml-platform":{"Deployment":0,"Job":1}`) || !strings.Contains(string(res.Data), "ml-platform/waiting (8 GPU)") {
		t.Fatalf("data = %s", res.Data)
	}
}
