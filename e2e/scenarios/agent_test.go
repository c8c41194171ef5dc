package scenarios

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops"
)

const nginx = "public.ecr.aws/docker/library/nginx:1.27"

// agentRequest renders the agent request contract.
func agentRequest(t *testing.T, op, id string, workload map[string]any, dryRun bool) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"operation": op,
		"target":    map[string]any{"cluster": harness.Cluster, "namespace": harness.Namespace},
		"workload":  workload,
		"controls":  map[string]any{"requestId": id, "dryRun": dryRun},
	})
	if err != nil {
		t.Fatal(err)
	}
	return "```json\n" + string(b) + "\n```"
}

// An agent deploys inference with dryRun (server-side dry run reached the API server, nothing created), then for
// real; scales it beyond the cap (refused, clear error), then within it (approved, Deployment scaled).
func TestAgentDeploysAndScalesInference(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	const id, name = "e2e-infer-1", "fraud-infer"
	deploys := plane.Client().AppsV1().Deployments(harness.Namespace)
	workload := map[string]any{"name": name, "image": nginx, "replicas": 2}
	// The plane is shared: the Deployment's pods must not move onto the next scenario's nodes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := deploys.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Deployment %s: %v", name, err)
		}
	})

	// 1. Dry run: planned and validated by the API server, nothing created.
	dm, err := w.DM(ctx, agentRequest(t, "deploy-inference", id, workload, true))
	must(t, w, err)
	_, err = w.WaitAgentReply(ctx, time.Minute, dm, func(r harness.AgentReply) bool { return r.RequestID == id && r.Phase == string(ops.PhaseDone) })
	must(t, w, err)
	rec, err := w.Record(ctx, id)
	must(t, w, err)
	if rec.Plan == nil || !rec.Plan.ServerValidated || !rec.Request.DryRun {
		t.Errorf("dry-run record: plan %+v, dryRun %v; want a plan the API server validated", rec.Plan, rec.Request.DryRun)
	}
	if _, err := deploys.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Deployment after a dry run: err = %v, want NotFound", err)
	}

	// 2. For real, under the same id: an agent's mutation needs a lead, asked in the approvals channel.
	dm, err = w.DM(ctx, agentRequest(t, "deploy-inference", id, workload, false))
	must(t, w, err)
	approveInApprovals(t, w, id, harness.Lead1)
	_, err = w.WaitAgentReply(ctx, time.Minute, dm, func(r harness.AgentReply) bool { return r.RequestID == id && r.Phase == string(ops.PhaseSucceeded) })
	must(t, w, err)
	waitReplicas(t, w, name, 2)

	// 3. Beyond the cap: refused with the rule and value, nothing changes.
	dm, err = w.DM(ctx, agentRequest(t, "scale-inference", "e2e-infer-scale-10", map[string]any{"name": name, "replicas": harness.MaxInferenceReplicas + 6}, false))
	must(t, w, err)
	r, err := w.WaitAgentReply(ctx, time.Minute, dm, func(r harness.AgentReply) bool { return len(r.Errors) > 0 })
	must(t, w, err)
	if !r.HasCode(string(ops.CodeQuotaExceeded)) || r.Errors[0].Field != "replicas" {
		t.Errorf("scale beyond the cap answered %+v, want E_QUOTA_EXCEEDED on replicas", r.Errors)
	}
	waitReplicas(t, w, name, 2)

	// 4. Within the cap: approved (by a lead in the S0LEADS user group), scaled.
	const scaleID = "e2e-infer-scale-3"
	dm, err = w.DM(ctx, agentRequest(t, "scale-inference", scaleID, map[string]any{"name": name, "replicas": 3}, false))
	must(t, w, err)
	approveInApprovals(t, w, scaleID, harness.Lead2)
	_, err = w.WaitAgentReply(ctx, time.Minute, dm, func(r harness.AgentReply) bool {
		return r.RequestID == scaleID && r.Phase == string(ops.PhaseSucceeded)
	})
	must(t, w, err)
	waitReplicas(t, w, name, 3)
}

// approveInApprovals waits for an agent request's message in the approvals channel (with Stop and Take over, as
// agent requests have) and approves it as lead.
func approveInApprovals(t *testing.T, w *harness.World, id, lead string) {
	t.Helper()
	ctx := t.Context()
	_, err := w.WaitPhase(ctx, time.Minute, id, ops.PhaseAwaitingApproval)
	must(t, w, err)
	msg, err := w.WaitText(ctx, time.Minute, harness.ApprovalsChannel, id)
	must(t, w, err)
	for _, b := range []string{handlers.ActionApprove, handlers.ActionStop, handlers.ActionTakeOver} {
		if !harness.HasButton(msg, b) {
			t.Errorf("approvals message of %s lacks %s: %s", id, b, harness.MessageText(msg))
		}
	}
	_, err = w.Click(ctx, lead, harness.ApprovalsChannel, msg.TS, handlers.ActionApprove)
	must(t, w, err)
	_, err = w.WaitPhase(ctx, 2*time.Minute, id, ops.PhaseSucceeded)
	must(t, w, err)
}

func waitReplicas(t *testing.T, w *harness.World, name string, want int32) {
	t.Helper()
	ctx := t.Context()
	var got int32 = -1
	err := harness.Eventually(ctx, 30*time.Second, func() (bool, error) {
		d, err := plane.Client().AppsV1().Deployments(harness.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if d.Spec.Replicas != nil {
			got = *d.Spec.Replicas
		}
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("Deployment %s replicas = %d, want %d: %v\n%s", name, got, want, err, w.Logs())
	}
}
