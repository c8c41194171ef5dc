package faults

import (
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/ops"
)

func TestSmoke(t *testing.T) {
	w := newWorld(t)
	_, err := w.Slash(t.Context(), harness.Alice, harness.OpsChannel, "storage create name=smoke-1 size=1Gi storage-class="+harness.StorageClass+" request-id=smoke-1")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := w.WaitPhase(t.Context(), time.Minute, "smoke-1", ops.PhaseSucceeded, ops.PhaseAwaitingApproval, ops.PhaseFailed, ops.PhaseRejected)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("phase %s %v", rec.Phase, rec.Errors)
}
