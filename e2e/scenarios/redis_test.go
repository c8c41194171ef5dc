package scenarios

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops"
)

// Stop Redis: mutating commands get E_STATE_UNAVAILABLE and nothing changes in the cluster; start it: work resumes.
func TestRedisStoppedFailsClosedThenResumes(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	claims := plane.Client().CoreV1().PersistentVolumeClaims(harness.Namespace)
	jobs := plane.Client().BatchV1().Jobs(harness.Namespace)

	w.Redis.Stop()
	refused := []struct{ text, user string }{
		{"storage create name=e2e-redis-down size=1Gi storage-class=" + harness.StorageClass + " request-id=e2e-redis-1", harness.Alice},
		{"train submit name=e2e-redis-down image=" + busybox + " request-id=e2e-redis-2", harness.Lead1},
	}
	for _, c := range refused {
		_, err := w.Slash(ctx, c.user, harness.OpsChannel, c.text)
		must(t, w, err)
		_, err = w.WaitEphemeral(ctx, 30*time.Second, c.user, string(ops.CodeStateUnavailable))
		must(t, w, err)
	}
	if _, err := claims.Get(ctx, "e2e-redis-down", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim created while Redis was down: err = %v, want NotFound", err)
	}
	if _, err := jobs.Get(ctx, "e2e-redis-down", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Job created while Redis was down: err = %v, want NotFound", err)
	}

	w.Redis.Restart()
	for _, r := range w.Replicas {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := r.WaitReady(rctx)
		cancel()
		must(t, w, err)
	}
	// The same request id: nothing of it was stored while Redis was down, so it runs now.
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, refused[0].text)
	must(t, w, err)
	rec, err := w.WaitPhase(ctx, time.Minute, "e2e-redis-1", ops.PhaseSucceeded, ops.PhaseAwaitingApproval)
	must(t, w, err)
	if rec.Phase == ops.PhaseAwaitingApproval {
		msg := waitApprovable(t, w, harness.OpsChannel, "e2e-redis-1")
		_, err := w.Click(ctx, harness.Lead1, harness.OpsChannel, msg.TS, handlers.ActionApprove)
		must(t, w, err)
		rec, err = w.WaitPhase(ctx, time.Minute, "e2e-redis-1", ops.PhaseSucceeded)
		must(t, w, err)
	}
	if rec.Request.Initiator.ID != harness.Alice {
		t.Errorf("initiator = %+v, want Alice", rec.Request.Initiator)
	}
	must(t, w, harness.Eventually(ctx, time.Minute, func() (bool, error) {
		_, err := claims.Get(ctx, "e2e-redis-down", metav1.GetOptions{})
		return err == nil, nil
	}))
	if _, err := w.WaitText(ctx, 30*time.Second, harness.OpsChannel, "e2e-redis-1", "succeeded"); err != nil {
		t.Error(err)
	}
}
