package kube

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
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
	want := []fleet.GroupNodes{
		{Group: "gpu-workers", InstanceType: "ml.g5.12xlarge", Nodes: 3, Ready: 2,
			Health: map[string]int{"Schedulable": 2, "UnschedulablePendingReboot": 1}, GPUAllocatable: 12, GPURequested: 6,
			States: fleet.HealthCounts{Healthy: 2, Faulty: 1}, Unhealthy: []fleet.NodeHealth{{Node: "gpu-3", State: fleet.HealthFaulty,
				Label: HealthPendingReboot, Reason: "failed a health check; HyperPod marked it for a reboot"}}},
		{Group: "system", InstanceType: "m5.xlarge", Nodes: 1, Ready: 1, States: fleet.HealthCounts{Healthy: 1}},
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
	if res.Summary != "ml-dev: 3/4 nodes ready, 6 of 12 GPUs requested, 1 pod(s) waiting for GPUs, 1 node(s) not healthy" {
		t.Fatalf("summary = %q", res.Summary)
	}
	if !strings.Contains(string(res.Data), `"ml-platform":{"Deployment":0,"Job":1}`) || !strings.Contains(string(res.Data), "ml-platform/waiting (8 GPU)") {
		t.Fatalf("data = %s", res.Data)
	}
}

// instanceReader plays ops/aws's HyperPod instance listing.
type instanceReader struct {
	instances []fleet.InstanceHealth
	err       error
	calls     int
}

func (r *instanceReader) HyperPodInstances(_ context.Context, cluster string) ([]fleet.InstanceHealth, error) {
	r.calls++
	return r.instances, r.err
}

// TestClusterStatusNodeHealth: /hp status says which nodes are not healthy and why, from the health label and, on a
// HyperPod cluster, HyperPod's instance status and message; HyperPod that cannot be read leaves the labels, saying so.
func TestClusterStatusNodeHealth(t *testing.T) {
	objs := []runtime.Object{
		gpuNodeObj("hyperpod-i-0aaa", "gpu-workers", "ml.g5.12xlarge", 4, HealthSchedulable),
		gpuNodeObj("hyperpod-i-0bbb", "gpu-workers", "ml.g5.12xlarge", 4, HealthPendingReplacement),
		gpuNodeObj("hyperpod-i-0ccc", "gpu-workers", "ml.g5.12xlarge", 4, HealthSchedulable),
	}
	xid := []fleet.InstanceHealth{
		{Group: "gpu-workers", InstanceID: "i-0aaa", Status: InstanceRunning},
		{Group: "gpu-workers", InstanceID: "i-0bbb", Status: InstanceFailure, Message: "GPU 3 reported Xid 79"},
		{Group: "gpu-workers", InstanceID: "i-0ccc", Status: InstanceDeepHealthCheck},
	}
	tests := []struct {
		name     string
		hyperpod string
		reader   *instanceReader
		want     []string
		wantNot  []string
		calls    int
	}{
		{"HyperPod says why", "ml-hp", &instanceReader{instances: xid},
			[]string{"1 healthy, 1 faulty, 1 checking", "hyperpod-i-0bbb faulty: GPU 3 reported Xid 79 (UnschedulablePendingReplacement, Failure)",
				"hyperpod-i-0ccc checking: deep health check in progress (DeepHealthCheckInProgress)"}, []string{"warning"}, 1},
		{"HyperPod throttled: the labels still tell", "ml-hp", &instanceReader{err: errors.New("ThrottlingException: Rate exceeded")},
			[]string{"2 healthy, 1 faulty", "hyperpod-i-0bbb faulty: failed a health check; HyperPod marked it for replacement (UnschedulablePendingReplacement)",
				"warning: HyperPod's instance statuses unavailable, node health is from the node labels: ThrottlingException: Rate exceeded"}, nil, 1},
		{"no HyperPod cluster: not asked", "", &instanceReader{instances: xid},
			[]string{"2 healthy, 1 faulty"}, []string{"Xid", "warning"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, objs, withConfig(func(c *config.Cluster) { c.HyperPod.ClusterName = tt.hyperpod }))
			e.reg.instances = tt.reader
			op, err := e.cat.Lookup("get-cluster-status")
			if err != nil {
				t.Fatal(err)
			}
			res, err := op.Execute(context.Background(), request("get-cluster-status", nil), nil, ops.Execution{})
			if err != nil {
				t.Fatal(err)
			}
			text := res.Summary + "\n" + res.Output
			for _, d := range res.Details {
				text += "\n" + d.Label + ": " + d.Value
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("status lacks %q:\n%s", w, text)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(text, w) {
					t.Errorf("status has %q:\n%s", w, text)
				}
			}
			if tt.reader.calls != tt.calls {
				t.Errorf("HyperPod read %d times, want %d", tt.reader.calls, tt.calls)
			}
			var st ClusterStatus
			if err := json.Unmarshal(res.Data, &st); err != nil || st.Groups[0].States.Faulty != 1 {
				t.Errorf("data: %s (%v)", res.Data, err)
			}
		})
	}
}
