package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/fakeslack"
)

// Two running training Jobs of the report scenario and the GPUs each asks for.
var reportJobs = []struct {
	name string
	gpus int64
}{{"e2e-report-a", 8}, {"e2e-report-b", 4}}

// Issue 7, end to end: two replicas run a report scheduled every minute. Over two ticks exactly two reports are
// posted to the report channel, each showing its PNG chart (files upload v2), and their figures match
// the API server: GPUs of the kwok nodes, GPUs allocated to the running Jobs, and the Jobs themselves.
func TestScheduledReportPostsOncePerTickAcrossReplicas(t *testing.T) {
	w := world(t, harness.Options{GPUNodes: 2, ReportSchedule: "* * * * *"})
	installLongRunningJobPods(t)
	ctx := t.Context()
	jobs := plane.Client().BatchV1().Jobs(harness.Namespace)
	for i, j := range reportJobs {
		submit(t, w, fmt.Sprintf("e2e-report-train-%d", i),
			fmt.Sprintf("train submit name=%s image=%s gpus=%d max-hours=2", j.name, busybox, j.gpus))
		t.Cleanup(func() { deleteJob(t, j.name) })
	}
	for _, j := range reportJobs {
		must(t, w, harness.Eventually(ctx, time.Minute, func() (bool, error) {
			pods, err := plane.Client().CoreV1().Pods(harness.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + j.name})
			return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning, nil
		}))
	}
	before, err := gpuFigures(ctx)
	must(t, w, err)
	if want := int64(2 * harness.GPUsPerInstance[harness.GPUType]); before.total < want || before.allocated < 12 {
		t.Fatalf("API server before the ticks: %+v, want at least %d GPUs with 12 allocated", before, want)
	}

	// The two ticks watched are the first two whole minutes far enough ahead that the Jobs already run; the
	// reports of earlier ticks (a starting replica posts the ones at most two minutes late) are not counted.
	first := time.Now().Truncate(time.Minute).Add(time.Minute)
	if time.Until(first) < 10*time.Second {
		first = first.Add(time.Minute)
	}
	second, third := first.Add(time.Minute), first.Add(2*time.Minute)
	t.Logf("watching the ticks of %s and %s", first.Format(time.TimeOnly), second.Format(time.TimeOnly))
	// Until the third tick, each tick's report has been posted and a duplicate from the other replica would
	// have been too: both replicas claim a tick the moment it comes.
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(third)):
	}
	snap := w.Slack.Snapshot()
	t.Logf("the report channel held:\n%s", postedTimes(snap.Messages[harness.ReportChannel]))
	var reports []fakeslack.Message
	for _, m := range snap.Messages[harness.ReportChannel] {
		if m.ThreadTS == "" && !m.Deleted && strings.HasPrefix(m.Text, "Capacity report: "+harness.Cluster) &&
			!m.PostedAt.Before(first) && m.PostedAt.Before(third) {
			reports = append(reports, m)
		}
	}
	if len(reports) != 2 || !reports[0].PostedAt.Before(second) || reports[1].PostedAt.Before(second) {
		t.Fatalf("reports posted between %s and %s: %d, want one per tick:\n%s\n%s", first.Format(time.TimeOnly),
			third.Format(time.TimeOnly), len(reports), postedTimes(snap.Messages[harness.ReportChannel]), w.Logs())
	}
	after, err := gpuFigures(ctx)
	must(t, w, err)
	if after != before {
		t.Fatalf("the cluster changed while the reports were built: %+v, then %+v", before, after)
	}

	for _, r := range reports {
		text := harness.MessageText(r)
		want := []string{
			fmt.Sprintf("*GPUs allocated*\n%d of %d", before.allocated, before.total),
			fmt.Sprintf("*GPUs free*\n%d", before.total-before.allocated),
			fmt.Sprintf("`%s` %s · %d/%d instances (InService) · 2/2 nodes ready", harness.GPUGroup, harness.GPUType, 2, 2),
		}
		for _, j := range reportJobs {
			want = append(want, fmt.Sprintf("`%s` (Job, 1/1 running, %d GPUs)", j.name, j.gpus))
		}
		for _, s := range want {
			if !strings.Contains(text, s) {
				t.Errorf("report %s lacks %q:\n%s", r.TS, s, text)
			}
		}
		checkChart(t, snap, r)
	}
	if _, err := jobs.Get(ctx, reportJobs[0].name, metav1.GetOptions{}); err != nil {
		t.Errorf("Job %s after the reports: %v", reportJobs[0].name, err)
	}
}

// checkChart requires exactly one completed PNG upload (files upload v2) that the report message shows as an image.
func checkChart(t *testing.T, snap fakeslack.Snapshot, report fakeslack.Message) {
	t.Helper()
	var charts []fakeslack.File
	for _, f := range snap.Files {
		if strings.Contains(string(report.Blocks), `"slack_file":{"id":"`+f.ID+`"}`) {
			charts = append(charts, f)
		}
	}
	if len(charts) != 1 {
		t.Errorf("report %s shows %d files, want one chart", report.TS, len(charts))
		return
	}
	f := charts[0]
	if !f.Completed || !strings.HasSuffix(f.Name, ".png") {
		t.Errorf("chart of report %s: name %q, completed %v; want a completed .png upload", report.TS, f.Name, f.Completed)
	}
	img, err := png.Decode(bytes.NewReader(f.Content))
	if err != nil {
		t.Errorf("chart of report %s is not a PNG: %v", report.TS, err)
		return
	}
	if b := img.Bounds(); b.Dx() < 200 || b.Dy() < 100 {
		t.Errorf("chart of report %s is %dx%d, want a drawn chart", report.TS, b.Dx(), b.Dy())
	}
}

func postedTimes(msgs []fakeslack.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "- %s thread=%q: %s\n", m.PostedAt.Format("15:04:05.000"), m.ThreadTS, m.Text)
	}
	return b.String()
}

// figures are the cluster's GPUs as the API server has them: allocatable on the nodes, and requested by the live
// pods bound to them.
type figures struct{ total, allocated int64 }

func gpuFigures(ctx context.Context) (figures, error) {
	var f figures
	gpu := corev1.ResourceName("nvidia.com/gpu")
	nodes, err := plane.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, fmt.Errorf("list nodes: %w", err)
	}
	exists := map[string]bool{}
	for _, n := range nodes.Items {
		exists[n.Name] = true
		if q, ok := n.Status.Allocatable[gpu]; ok {
			f.total += q.Value()
		}
	}
	pods, err := plane.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods.Items {
		if !exists[p.Spec.NodeName] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests[gpu]; ok {
				f.allocated += q.Value()
			} else if q, ok := c.Resources.Limits[gpu]; ok {
				f.allocated += q.Value()
			}
		}
	}
	return f, nil
}

func deleteJob(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := plane.Client().BatchV1().Jobs(harness.Namespace).Delete(ctx, name,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete Job %s: %v", name, err)
	}
}

// The kwok annotations that hold a Job's pod running for an hour instead of completing it within seconds.
const (
	kwokCompleteDelay  = "pod-complete.stage.kwok.x-k8s.io/delay"
	kwokCompleteJitter = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
	longRunningPolicy  = "e2e-long-running-report-jobs"
)

// installLongRunningJobPods installs a MutatingAdmissionPolicy (CEL) that gives the pods of the report scenario's
// Jobs kwok's hour-long completion delay, as a long training run would be, waits until the API server applies
// it, and removes it when the test ends.
func installLongRunningJobPods(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	adm := plane.Client().AdmissionregistrationV1()
	policy := &admissionv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: longRunningPolicy},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      ptr.To(admissionv1.Fail),
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name: "report-scenario-jobs",
				Expression: `has(object.metadata.labels) && "batch.kubernetes.io/job-name" in object.metadata.labels && ` +
					`object.metadata.labels["batch.kubernetes.io/job-name"].startsWith("e2e-report-")`,
			}},
			Mutations: []admissionv1.Mutation{{
				PatchType: admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{annotations: {` +
					`"` + kwokCompleteDelay + `": "1h", "` + kwokCompleteJitter + `": "1h"}}}`},
			}},
		},
	}
	binding := &admissionv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: longRunningPolicy},
		Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: longRunningPolicy,
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: harness.Namespace}}},
		},
	}
	if _, err := adm.MutatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("install the mutating admission policy: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adm.MutatingAdmissionPolicyBindings().Delete(ctx, longRunningPolicy, metav1.DeleteOptions{}); err != nil {
			t.Errorf("remove the mutating admission policy binding: %v", err)
		}
		if err := adm.MutatingAdmissionPolicies().Delete(ctx, longRunningPolicy, metav1.DeleteOptions{}); err != nil {
			t.Errorf("remove the mutating admission policy: %v", err)
		}
	})
	if _, err := adm.MutatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind the mutating admission policy: %v", err)
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-report-probe", Namespace: harness.Namespace,
			Labels: map[string]string{batchv1.JobNameLabel: "e2e-report-probe"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: busybox}}},
	}
	var last string
	err := harness.Eventually(ctx, 30*time.Second, func() (bool, error) {
		got, err := plane.Client().CoreV1().Pods(harness.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, fmt.Errorf("dry-run a probe pod: %w", err)
		}
		last = got.Annotations[kwokCompleteDelay]
		return last == "1h", nil
	})
	if err != nil {
		t.Fatalf("the API server never applied %s: %v (last probe annotation %q)", longRunningPolicy, err, last)
	}
}
