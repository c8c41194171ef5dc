package scenarios

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

const busybox = "public.ecr.aws/docker/library/busybox:1.36"

// A slash command submits a training Job needing 8 GPUs; a lead approves; the Job runs on a kwok node and
// completes; the thread says running then completed.
func TestTrainingJobApprovedRunsAndCompletes(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	const id, job = "e2e-train-1", "fraud-model-v17"
	jobs := plane.Client().BatchV1().Jobs(harness.Namespace)

	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel,
		"train submit name="+job+" image="+busybox+" gpus=8 max-hours=2 request-id="+id)
	must(t, w, err)
	plan, err := w.WaitText(ctx, time.Minute, harness.OpsChannel, id, "submit-training-job")
	must(t, w, err)
	rec, err := w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval)
	must(t, w, err)
	if rec.Approval.Required != 1 || rec.Plan == nil || !rec.Plan.ServerValidated || rec.Plan.Cost.HourlyDelta <= 0 {
		t.Errorf("record before approval: required %d, plan %+v; want 1 approval of a server-validated plan with a cost", rec.Approval.Required, rec.Plan)
	}
	plan, err = w.WaitMessage(ctx, 30*time.Second, harness.OpsChannel, func(m fakeslack.Message) bool {
		return m.TS == plan.TS && harness.HasButton(m, handlers.ActionApprove)
	})
	if err != nil {
		t.Errorf("plan message never offered Approve: %v", err)
	}
	if _, err := jobs.Get(ctx, job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Job %s before approval: err = %v, want NotFound", job, err)
	}

	_, err = w.Click(ctx, harness.Lead1, harness.OpsChannel, plan.TS, handlers.ActionApprove)
	must(t, w, err)
	rec, err = w.WaitPhase(ctx, time.Minute, id, ops.PhaseSucceeded)
	must(t, w, err)
	if rec.Approval.Received() != 1 || rec.Approval.Votes[0].Voter.ID != harness.Lead1 {
		t.Errorf("votes = %+v, want Lead1's approval", rec.Approval.Votes)
	}

	got, err := jobs.Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Job %s after approval: %v", job, err)
	}
	gpus := got.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
	if gpus.Value() != 8 || got.Spec.ActiveDeadlineSeconds == nil || *got.Spec.ActiveDeadlineSeconds != 2*3600 {
		t.Errorf("Job spec: gpus %s, activeDeadlineSeconds %v; want 8 and 7200", gpus.String(), got.Spec.ActiveDeadlineSeconds)
	}
	must(t, w, harness.Eventually(ctx, 2*time.Minute, func() (bool, error) {
		j, err := jobs.Get(ctx, job, metav1.GetOptions{})
		return err == nil && jobDone(j) == batchv1.JobComplete, err
	}))
	pods, err := plane.Client().CoreV1().Pods(harness.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of %s: %v (%d)", job, err, len(pods.Items))
	}
	var names []string
	for _, n := range w.GroupNodes() {
		names = append(names, string(n.Name))
	}
	if node := pods.Items[0].Spec.NodeName; !slices.Contains(names, node) {
		t.Errorf("pod ran on %q, want one of the GPU group's nodes %v", node, names)
	}

	// The thread tells each transition once, though two replicas run: "Job NAME: running", then
	// "Job NAME: completed (REASON)"; the reply's
	// headline is matched, not any mention of the word.
	running, err := waitWorkloadReply(t, w, plan.TS, "Job", job, "running")
	must(t, w, err)
	completed, err := waitWorkloadReply(t, w, plan.TS, "Job", job, "completed")
	must(t, w, err)
	if tsLess(completed.TS, running.TS) {
		t.Errorf("thread said completed (%s) before running (%s)", completed.TS, running.TS)
	}
	if !strings.Contains(harness.MessageText(completed), "is *completed*") {
		t.Errorf("completed reply does not say the Job is completed: %s", harness.MessageText(completed))
	}
	// The request's own message gains the workload's state.
	_, err = w.WaitCurrent(ctx, 30*time.Second, harness.OpsChannel, plan.TS, job+": completed")
	must(t, w, err)
	for _, state := range []string{"running", "completed"} {
		if n := countReplies(w, plan.TS, "Job "+job+": "+state); n != 1 {
			t.Errorf("thread told %q %d times, want once", state, n)
		}
	}
}

// waitWorkloadReply waits for the watcher's thread reply that the workload kind/name reached state.
func waitWorkloadReply(t *testing.T, w *harness.World, ts, kind, name, state string) (fakeslack.Message, error) {
	t.Helper()
	want := kind + " " + name + ": " + state
	m, err := w.WaitMessage(t.Context(), 2*time.Minute, harness.OpsChannel, func(m fakeslack.Message) bool {
		return m.ThreadTS == ts && m.TS != ts && isHeadline(m.Text, want)
	})
	if err != nil {
		return m, fmt.Errorf("the thread never said %q: %w", want, err)
	}
	return m, nil
}

// isHeadline reports whether a watch reply's text is headline, alone or followed by its reason in parentheses.
func isHeadline(text, headline string) bool {
	return text == headline || strings.HasPrefix(text, headline+" (")
}

// countReplies counts the replies in the thread of ts whose headline is headline.
func countReplies(w *harness.World, ts, headline string) int {
	n := 0
	for _, m := range w.Slack.Snapshot().Messages[harness.OpsChannel] {
		if m.ThreadTS == ts && m.TS != ts && !m.Deleted && isHeadline(m.Text, headline) {
			n++
		}
	}
	return n
}

func jobDone(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.Type
		}
	}
	return ""
}

// tsLess orders Slack timestamps ("1700000000.000100").
func tsLess(a, b string) bool {
	fa, _ := strconv.ParseFloat(a, 64)
	fb, _ := strconv.ParseFloat(b, 64)
	return fa < fb
}
