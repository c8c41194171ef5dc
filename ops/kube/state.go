package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperops/hyperops/ops"
)

// The states a watched object moves through, as told to people.
const (
	StatePending     = "pending"
	StateSuspended   = "suspended"
	StateRunning     = "running"
	StateCompleted   = "completed"
	StateFailed      = "failed"
	StateAvailable   = "available"
	StateProgressing = "progressing"
	StateScaledDown  = "scaled-to-zero"
	StateBound       = "bound"
	StateDeleted     = ops.WatchDeleted
)

// JobState reads a Job's state from its conditions and counts.
func JobState(j *batchv1.Job) (state, reason string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return StateCompleted, c.Reason
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return StateFailed, strings.Trim(c.Reason+": "+c.Message, ": ")
		case batchv1.JobSuspended:
			return StateSuspended, c.Reason
		}
	}
	// Between its last pod finishing and the Complete condition, a Job has no active pods but is not pending.
	if j.Status.Active > 0 || j.Status.Succeeded > 0 || j.Status.Failed > 0 {
		return StateRunning, ""
	}
	return StatePending, ""
}

// CustomJobState reads a PyTorchJob's or HyperPodPyTorchJob's state from the newest true condition.
func CustomJobState(u *unstructured.Unstructured) (state, reason string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var bestTime, bestType, bestReason string
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || fmt.Sprint(m["status"]) != "True" {
			continue
		}
		ts := fmt.Sprint(m["lastTransitionTime"])
		if bestType == "" || ts >= bestTime {
			bestTime, bestType = ts, fmt.Sprint(m["type"])
			bestReason = strings.Trim(fmt.Sprint(m["reason"])+": "+fmt.Sprint(m["message"]), ": ")
		}
	}
	switch strings.ToLower(bestType) {
	case "succeeded", "completed", "complete":
		return StateCompleted, bestReason
	case "failed":
		return StateFailed, bestReason
	case "running":
		return StateRunning, ""
	case "suspended":
		return StateSuspended, bestReason
	}
	return StatePending, ""
}

// DeploymentState reads a Deployment's rollout state.
func DeploymentState(d *appsv1.Deployment) (state, reason string) {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return StateFailed, c.Reason + ": " + c.Message
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if want == 0 {
		return StateScaledDown, ""
	}
	s := d.Status
	if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want {
		return StateAvailable, ""
	}
	return StateProgressing, fmt.Sprintf("%d/%d updated, %d available", s.UpdatedReplicas, want, s.AvailableReplicas)
}

// PodState reads a pod's phase, with the reason a pending pod waits.
func PodState(p *corev1.Pod) (state, reason string) {
	switch p.Status.Phase {
	case corev1.PodRunning:
		return StateRunning, ""
	case corev1.PodSucceeded:
		return StateCompleted, ""
	case corev1.PodFailed:
		return StateFailed, strings.Trim(p.Status.Reason+": "+p.Status.Message, ": ")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return StatePending, c.Reason + ": " + c.Message
		}
	}
	return StatePending, ""
}

// recentEvents returns the last n events about the named objects in ns, oldest first, as "Reason: message".
func recentEvents(ctx context.Context, c *Cluster, ns string, names map[string]bool, n int) ([]string, error) {
	l, err := c.Kube.CoreV1().Events(ns).List(ctx, listOptions(""))
	if err != nil {
		return nil, clusterError(err, "list events in %s", ns)
	}
	var evs []corev1.Event
	for _, e := range l.Items {
		if names[e.InvolvedObject.Name] {
			evs = append(evs, e)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, c.redact.Text(fmt.Sprintf("%s %s %s: %s", e.Type, e.InvolvedObject.Kind, e.Reason, e.Message)))
	}
	return out, nil
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// workloadPods lists the pods of a HyperOps workload, newest first.
func workloadPods(ctx context.Context, c *Cluster, ns, workload string) ([]corev1.Pod, error) {
	l, err := c.Kube.CoreV1().Pods(ns).List(ctx, listOptions(LabelWorkload+"="+workload))
	if err != nil {
		return nil, clusterError(err, "list pods of %s/%s", ns, workload)
	}
	pods := l.Items
	sort.SliceStable(pods, func(i, j int) bool { return pods[j].CreationTimestamp.Before(&pods[i].CreationTimestamp) })
	return pods, nil
}

// workloadActivity reads what the status of a workload shows of its pods: the pods, newest first; each one's name
// and state (with the reason, when there is one); and the last ten events of the workload and its pods. Inference
// and training status read it alike, so that both answer the same way.
func workloadActivity(ctx context.Context, c *Cluster, ns, name string) (pods []corev1.Pod, podStates, events []string, err error) {
	if pods, err = workloadPods(ctx, c, ns, name); err != nil {
		return nil, nil, nil, err
	}
	names := map[string]bool{name: true}
	for _, p := range pods {
		s, why := PodState(&p)
		podStates = append(podStates, strings.TrimSpace(p.Name+" "+s+" "+why))
		names[p.Name] = true
	}
	if events, err = recentEvents(ctx, c, ns, names, 10); err != nil {
		return nil, nil, nil, err
	}
	return pods, podStates, events, nil
}

// activityDetails are the details a status result shows of workloadActivity: the pods always, the events when
// there are any.
func activityDetails(podStates, events []string) []ops.Detail {
	details := []ops.Detail{{Label: "pods", Value: strings.Join(podStates, ", ")}}
	if len(events) > 0 {
		details = append(details, ops.Detail{Label: "events", Value: strings.Join(events, "\n")})
	}
	return details
}

// logTail reads the last lines of the newest pod of a workload that has started, redacted and capped; "" when none
// has. Every log tail HyperOps shows (a watched workload's thread, train status) is read here.
func logTail(ctx context.Context, c *Cluster, ns string, pods []corev1.Pod, lines int64) string {
	for _, p := range pods {
		if p.Status.Phase == corev1.PodPending || len(p.Spec.Containers) == 0 {
			continue
		}
		s, err := c.tailLogs(ctx, ns, p.Name, p.Spec.Containers[0].Name, lines)
		if err != nil {
			return c.redact.Text("(log unavailable: " + err.Error() + ")")
		}
		return c.redact.Tail(s)
	}
	return ""
}
