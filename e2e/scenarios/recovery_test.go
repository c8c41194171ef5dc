package scenarios

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// Issue 21: a HyperPod training job's worker runs on a node HyperPod then marks faulty; `/hp nodes replace
// faulty=true` is planned with the job it would interrupt, approved by two leads (critical: it interrupts a pod),
// sends one BatchReplaceClusterNodes, and ends when the replacement node is Ready in the API server, told once, with
// the node's progress in the thread.
//
// The e2e cluster runs no training operator, so the test plays its part: once HyperOps has created the
// HyperPodPyTorchJob, it starts the job's worker pod, owned by the job, on a node of the group. (kwok finishes the
// pods of a batch/v1 Job within seconds, so a Job's pod would be gone before the node turns faulty.)
func TestReplaceFaultyNodeRunningAJob(t *testing.T) {
	w := world(t, harness.Options{GPUNodes: 2, TransitionDelay: 5 * time.Second})
	ctx := t.Context()
	const trainID, job = "e2e-recover-train", "llama-recover"
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel,
		"train submit kind=hyperpod name="+job+" image="+busybox+" gpus=8 max-hours=2 request-id="+trainID)
	must(t, w, err)
	trainPlan, err := w.WaitText(ctx, time.Minute, harness.OpsChannel, trainID)
	must(t, w, err)
	approveAll(t, w, trainID, trainPlan.TS)
	rec, err := w.WaitPhase(ctx, time.Minute, trainID, ops.PhaseSucceeded, ops.PhaseFailed)
	must(t, w, err)
	if rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("%s ended %s: %v", trainID, rec.Phase, rec.Errors)
	}
	faulty := w.GroupNodes()[0]
	node := string(faulty.Name)
	worker := startWorker(t, w, job, node)
	must(t, w, w.AWS.MarkNodeFaulty(harness.HyperPod, faulty.InstanceID, "GPU 3 reported Xid 79, fallen off the bus"))
	must(t, w, w.Nodes.Err())

	const id = "e2e-replace-1"
	_, err = w.Slash(ctx, harness.Alice, harness.OpsChannel, "nodes replace group="+harness.GPUGroup+" faulty=true request-id="+id)
	must(t, w, err)
	plan, err := w.WaitText(ctx, time.Minute, harness.OpsChannel, id, "replace-nodes")
	must(t, w, err)
	rec, err = w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval)
	must(t, w, err)
	pod := harness.Namespace + "/" + worker + " (HyperPodPyTorchJob " + job + ") on " + node
	if !slices.ContainsFunc(rec.Plan.Warnings, func(s string) bool { return strings.Contains(s, pod) }) {
		t.Errorf("plan warnings %q do not name the job's worker %q", rec.Plan.Warnings, pod)
	}
	if rec.Plan.Risk.Level != ops.RiskCritical || len(rec.Plan.Changes) != 1 || rec.Plan.Changes[0].Name != faulty.InstanceID {
		t.Errorf("plan: risk %s, changes %+v; want critical, replacing %s alone", rec.Plan.Risk.Level, rec.Plan.Changes, faulty.InstanceID)
	}
	if _, err := w.WaitCurrent(ctx, 30*time.Second, harness.OpsChannel, plan.TS, job); err != nil {
		t.Errorf("the plan message does not name the job it interrupts: %v", err)
	}
	if n := w.AWS.Calls(fakeaws.OpSageMakerBatchReplaceClusterNodes); n != 0 {
		t.Fatalf("BatchReplaceClusterNodes called %d times before approval", n)
	}

	approveAll(t, w, id, plan.TS)
	rec, err = w.WaitPhase(ctx, 3*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted)
	must(t, w, err)
	if rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("%s ended %s: %v\n%s", id, rec.Phase, rec.Errors, w.Logs())
	}
	if n := w.AWS.Calls(fakeaws.OpSageMakerBatchReplaceClusterNodes); n != 1 {
		t.Errorf("BatchReplaceClusterNodes called %d times, want 1", n)
	}
	must(t, w, w.Nodes.Err())
	nodes, err := w.ClusterNodes(ctx)
	must(t, w, err)
	if len(nodes) != 2 || slices.Contains(nodes, node) {
		t.Errorf("API server nodes of %s = %v; want two, without the replaced %s", harness.GPUGroup, nodes, node)
	}
	for _, n := range nodes {
		if _, err := plane.WaitNodeReady(ctx, n); err != nil {
			t.Errorf("node %s: %v", n, err)
		}
	}
	_, err = w.WaitInThread(ctx, 30*time.Second, harness.OpsChannel, plan.TS, "BatchReplaceClusterNodes accepted")
	must(t, w, err)
	told := "succeeded (request " + id + ")"
	_, err = w.WaitInThread(ctx, 30*time.Second, harness.OpsChannel, plan.TS, told)
	must(t, w, err)
	n := 0
	for _, m := range w.Slack.Snapshot().Thread(harness.OpsChannel, plan.TS) {
		if strings.Contains(m.Text, told) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the thread told %q %d times, want once", told, n)
	}
}

// startWorker does what HyperPod's training operator would: it starts the job's worker pod, owned by the
// HyperPodPyTorchJob HyperOps created, bound to node, and waits until it runs. It returns the pod's name.
func startWorker(t *testing.T, w *harness.World, job, node string) string {
	t.Helper()
	ctx := t.Context()
	cr, err := plane.Dynamic().Resource(controlplane.HyperPodPyTorchJobGVR).Namespace(harness.Namespace).Get(ctx, job, metav1.GetOptions{})
	must(t, w, err)
	name := job + "-worker-0"
	controller := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: harness.Namespace, Labels: map[string]string{"job-name": job},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: cr.GetAPIVersion(), Kind: cr.GetKind(), Name: job, UID: cr.GetUID(), Controller: &controller}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "trainer", Image: busybox,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
	}
	_, err = plane.Client().CoreV1().Pods(harness.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	must(t, w, err)
	must(t, w, harness.Eventually(ctx, time.Minute, func() (bool, error) {
		p, err := plane.Client().CoreV1().Pods(harness.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	}))
	return name
}

// approveAll clicks Approve as each lead until the request leaves awaiting-approval (one vote, or two at critical
// risk).
func approveAll(t *testing.T, w *harness.World, id, ts string) {
	t.Helper()
	ctx := t.Context()
	for _, lead := range []string{harness.Lead1, harness.Lead2} {
		rec, err := w.WaitPhase(ctx, 30*time.Second, id, ops.PhaseAwaitingApproval, ops.PhaseApproved, ops.PhaseExecuting, ops.PhaseSucceeded)
		must(t, w, err)
		if rec.Phase != ops.PhaseAwaitingApproval {
			return
		}
		received := rec.Approval.Received()
		if _, err := w.WaitMessage(ctx, 30*time.Second, harness.OpsChannel, func(m fakeslack.Message) bool {
			return m.TS == ts && harness.HasButton(m, handlers.ActionApprove)
		}); err != nil {
			t.Fatalf("the plan of %s never offered Approve: %v", id, err)
		}
		_, err = w.Click(ctx, lead, harness.OpsChannel, ts, handlers.ActionApprove)
		must(t, w, err)
		_, err = w.WaitRecord(ctx, 30*time.Second, id, func(r *ops.Record) bool {
			return r.Phase != ops.PhaseAwaitingApproval || r.Approval.Received() > received
		})
		must(t, w, err)
	}
}
