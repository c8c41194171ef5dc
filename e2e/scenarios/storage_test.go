package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// delete-inference leaves the PVC; delete-storage is refused while a pod mounts it, then succeeds with its own
// approval after the pod is gone.
func TestDeletingWorkloadKeepsDataUntilStorageIsDeleted(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	const claim, svc = "e2e-data", "e2e-svc"
	claims := plane.Client().CoreV1().PersistentVolumeClaims(harness.Namespace)
	pods := plane.Client().CoreV1().Pods(harness.Namespace)

	run := func(id, text string, phase ops.Phase) *ops.Record {
		t.Helper()
		_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, text+" request-id="+id)
		must(t, w, err)
		rec, err := w.WaitPhase(ctx, time.Minute, id, phase)
		must(t, w, err)
		return rec
	}
	submit(t, w, "e2e-store-create", "storage create name="+claim+" size=10Gi storage-class="+harness.StorageClass)
	must(t, w, harness.Eventually(ctx, time.Minute, func() (bool, error) {
		c, err := claims.Get(ctx, claim, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, nil
	}))
	submit(t, w, "e2e-store-infer", "infer deploy name="+svc+" image="+nginx)

	// A pod of the team's mounts the claim (HyperOps' own operations take no volumes).
	user := mountingPod(t, w, claim)
	if _, err := pods.Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the pod mounting %s: %v", claim, err)
	}

	// delete-inference is destructive (high risk): a lead approves; the claim stays.
	run("e2e-store-infer-del", "infer delete name="+svc, ops.PhaseAwaitingApproval)
	msg := waitApprovable(t, w, harness.OpsChannel, "e2e-store-infer-del")
	_, err := w.Click(ctx, harness.Lead1, harness.OpsChannel, msg.TS, handlers.ActionApprove)
	must(t, w, err)
	_, err = w.WaitPhase(ctx, time.Minute, "e2e-store-infer-del", ops.PhaseSucceeded)
	must(t, w, err)
	must(t, w, harness.Eventually(ctx, 30*time.Second, func() (bool, error) {
		_, err := plane.Client().AppsV1().Deployments(harness.Namespace).Get(ctx, svc, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}))
	if _, err := claims.Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Fatalf("claim after delete-inference: %v, want it kept", err)
	}

	// delete-storage while the pod mounts it: refused, E_IN_USE, the claim stays.
	_, err = w.Slash(ctx, harness.Alice, harness.OpsChannel, "storage delete name="+claim+" request-id=e2e-store-del-1")
	must(t, w, err)
	must(t, w, waitAnywhere(ctx, w, harness.Alice, string(ops.CodeInUse), user.Name))
	if rec, err := w.Record(ctx, "e2e-store-del-1"); err == nil && (rec.Phase == ops.PhaseApproved || rec.Phase == ops.PhaseExecuting || rec.Phase == ops.PhaseSucceeded) {
		t.Fatalf("delete-storage of a mounted claim reached %s", rec.Phase)
	}
	if _, err := claims.Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Fatalf("claim after a refused delete-storage: %v", err)
	}

	// The pod goes; delete-storage is critical: two leads approve, each typing the claim name.
	if err := pods.Delete(ctx, user.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	must(t, w, harness.Eventually(ctx, time.Minute, func() (bool, error) {
		_, err := pods.Get(ctx, user.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}))
	rec := run("e2e-store-del-2", "storage delete name="+claim, ops.PhaseAwaitingApproval)
	if rec.Approval.Required != 2 || rec.Plan == nil || rec.Plan.Risk.Level != ops.RiskCritical {
		t.Errorf("delete-storage plan: required %d, plan %+v; want 2 approvals of a critical plan", rec.Approval.Required, rec.Plan)
	}
	msg = waitApprovable(t, w, harness.OpsChannel, "e2e-store-del-2")
	must(t, w, w.ApproveDeletion(ctx, harness.Lead1, harness.OpsChannel, msg.TS, claim))
	_, err = w.WaitRecord(ctx, 30*time.Second, "e2e-store-del-2", func(r *ops.Record) bool { return r.Approval.Received() == 1 })
	must(t, w, err)
	if _, err := claims.Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Fatalf("claim after one of two approvals: %v, want it kept", err)
	}
	must(t, w, w.ApproveDeletion(ctx, harness.Lead2, harness.OpsChannel, msg.TS, claim))
	_, err = w.WaitPhase(ctx, time.Minute, "e2e-store-del-2", ops.PhaseSucceeded)
	must(t, w, err)
	must(t, w, harness.Eventually(ctx, time.Minute, func() (bool, error) {
		_, err := claims.Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}))
}

// mountingPod is a pod on one of the world's GPU nodes that mounts claim.
func mountingPod(t *testing.T, w *harness.World, claim string) *corev1.Pod {
	t.Helper()
	nodes := w.GroupNodes()
	if len(nodes) == 0 {
		t.Fatal("the world has no GPU node to run the pod on")
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook-uses-" + claim},
		Spec: corev1.PodSpec{
			NodeName: string(nodes[0].Name),
			Containers: []corev1.Container{{Name: "notebook", Image: busybox,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}

// waitAnywhere waits until want shows in a message of the ops channel or an ephemeral to user.
func waitAnywhere(ctx context.Context, w *harness.World, user string, want ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	has := func(text string) bool {
		for _, s := range want {
			if !containsFold(text, s) {
				return false
			}
		}
		return true
	}
	_, err := w.Slack.WaitFor(ctx, func(s fakeslack.Snapshot) bool {
		for _, e := range s.Ephemerals {
			if e.User == user && has(harness.Visible(e.Text, e.Blocks)) {
				return true
			}
		}
		for _, m := range s.Messages[harness.OpsChannel] {
			if has(harness.MessageText(m)) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("Slack never showed %q to %s: %w", want, user, err)
	}
	return nil
}
