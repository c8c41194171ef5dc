package kube

import (
	"testing"

	"github.com/hyperops/hyperops/ops/fleet"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func podOn(node, name, ownerKind, ownerName string, phase corev1.PodPhase, gpus int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: phase}}
	if ownerKind != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: ownerKind, Name: ownerName, Controller: &yes}}
	}
	return p
}

// The pods a recovery of gpu-1 would stop: the training worker and the inference replica on it, not the DaemonSet
// pod (it comes back with the node), not a finished pod, not a pod of another node.
func TestPodsOnNodes(t *testing.T) {
	e := newEnv(t, []runtime.Object{
		gpuNodeObj("gpu-1", "gpu-workers", "ml.g5.12xlarge", 4, "UnschedulablePendingReplacement"),
		gpuNodeObj("gpu-2", "gpu-workers", "ml.g5.12xlarge", 4, "Schedulable"),
		podOn("gpu-1", "llama-worker-0", "PyTorchJob", "llama", corev1.PodRunning, 4),
		podOn("gpu-1", "chat-7d9-abcde", "ReplicaSet", "chat-7d9", corev1.PodRunning, 0),
		podOn("gpu-1", "nvidia-device-plugin-x", "DaemonSet", "nvidia-device-plugin", corev1.PodRunning, 0),
		podOn("gpu-1", "old-job-xyz", "Job", "old-job", corev1.PodSucceeded, 0),
		podOn("gpu-2", "llama-worker-1", "PyTorchJob", "llama", corev1.PodRunning, 4),
	})
	got, err := e.cs.PodsOnNodes(t.Context(), testCluster, []string{"gpu-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []fleet.NodePod{
		{Node: "gpu-1", Namespace: testNS, Name: "chat-7d9-abcde", Owner: "ReplicaSet chat-7d9"},
		{Node: "gpu-1", Namespace: testNS, Name: "llama-worker-0", Owner: "PyTorchJob llama", GPUs: 4},
	}
	if len(got) != len(want) {
		t.Fatalf("pods %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pod %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
