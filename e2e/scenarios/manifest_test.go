package scenarios

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/ops"
)

// An invalid manifest field caught by the API server's dry run is shown in the plan, before anyone approves.
// "1fraud-infer" is a valid DNS-1123 label (HyperOps' own name check passes) but not a valid Service name, which
// must be a DNS-1035 label: only the API server knows that.
func TestServerDryRunErrorShownBeforeApproval(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	const id, name = "e2e-invalid-1", "1fraud-infer"
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, "infer deploy name="+name+" image="+nginx+" request-id="+id)
	must(t, w, err)
	must(t, w, waitAnywhere(ctx, w, harness.Alice, "DNS-1035"))

	if rec, err := w.Record(ctx, id); err == nil {
		switch rec.Phase {
		case ops.PhaseApproved, ops.PhaseExecuting, ops.PhaseSucceeded, ops.PhaseFailed, ops.PhaseInterrupted:
			t.Errorf("request with an invalid manifest reached %s", rec.Phase)
		}
		if rec.Plan != nil && rec.Plan.ServerValidated {
			t.Errorf("plan claims the API server validated it: %+v", rec.Plan)
		}
	}
	if _, err := plane.Client().AppsV1().Deployments(harness.Namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment %s: err = %v, want NotFound", name, err)
	}
	if _, err := plane.Client().CoreV1().Services(harness.Namespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service %s: err = %v, want NotFound", name, err)
	}
}
