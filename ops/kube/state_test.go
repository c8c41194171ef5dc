package kube

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestJobState(t *testing.T) {
	cond := func(ty batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: ty, Status: corev1.ConditionTrue, Reason: reason}
	}
	tests := []struct {
		name   string
		status batchv1.JobStatus
		want   string
	}{
		{"new", batchv1.JobStatus{}, StatePending},
		{"active", batchv1.JobStatus{Active: 2}, StateRunning},
		{"last pod done, no condition yet", batchv1.JobStatus{Succeeded: 1}, StateRunning},
		{"success criteria met", batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "")}}, StateCompleted},
		{"complete", batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, "")}}, StateCompleted},
		{"failed", batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, "DeadlineExceeded")}}, StateFailed},
		{"suspended by Kueue", batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, "JobSuspended")}}, StateSuspended},
		{"false conditions do not count", batchv1.JobStatus{Active: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionFalse}}}, StateRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := JobState(&batchv1.Job{Status: tt.status}); got != tt.want {
				t.Fatalf("state = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDeploymentState(t *testing.T) {
	three := int32(3)
	zero := int32(0)
	tests := []struct {
		name     string
		replicas *int32
		gen      int64
		status   appsv1.DeploymentStatus
		want     string
	}{
		{"rolled out", &three, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}, StateAvailable},
		{"controller has not seen the new generation", &three, 3, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}, StateProgressing},
		{"old pods still around", &three, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3, AvailableReplicas: 3}, StateProgressing},
		{"scaled to zero", &zero, 1, appsv1.DeploymentStatus{ObservedGeneration: 1}, StateScaledDown},
		{"past its progress deadline", &three, 2, appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded"}}}, StateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: tt.gen}, Spec: appsv1.DeploymentSpec{Replicas: tt.replicas}, Status: tt.status}
			if got, _ := DeploymentState(d); got != tt.want {
				t.Fatalf("state = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCustomJobState(t *testing.T) {
	c := func(ty, status, at string) any {
		return map[string]any{"type": ty, "status": status, "lastTransitionTime": at, "reason": ty + "Reason"}
	}
	tests := []struct {
		name  string
		conds []any
		want  string
	}{
		{"no status", nil, StatePending},
		{"created", []any{c("Created", "True", "2026-01-01T00:00:00Z")}, StatePending},
		{"running", []any{c("Created", "True", "2026-01-01T00:00:00Z"), c("Running", "True", "2026-01-01T00:01:00Z")}, StateRunning},
		{"succeeded after running", []any{c("Running", "False", "2026-01-01T00:02:00Z"), c("Succeeded", "True", "2026-01-01T00:02:00Z")}, StateCompleted},
		{"failed is newest", []any{c("Running", "True", "2026-01-01T00:01:00Z"), c("Failed", "True", "2026-01-01T00:03:00Z")}, StateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": tt.conds}}}
			if tt.conds == nil {
				u.Object = map[string]any{}
			}
			if got, _ := CustomJobState(u); got != tt.want {
				t.Fatalf("state = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPodState(t *testing.T) {
	unsched := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}}}
	state, reason := PodState(&corev1.Pod{Status: unsched})
	if state != StatePending || reason != "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu." {
		t.Fatalf("state %s reason %q", state, reason)
	}
	state, reason = PodState(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OOMKilled"}})
	if state != StateFailed || reason != "OOMKilled" {
		t.Fatalf("state %s reason %q", state, reason)
	}
}
