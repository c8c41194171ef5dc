package scenarios

import (
	"context"
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
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// The namespace's admission policy: images must be pinned, ":latest" is refused. HyperOps' own checks let such an
// image through (it matches the cluster's registry glob); only the API server knows the rule.
const (
	pinnedPolicy  = "e2e-pinned-images"
	pinnedMessage = "images must be pinned to a version: the :latest tag is not allowed in " + harness.Namespace
)

// An invalid manifest field caught by the API server's dry run is shown in the plan, before anyone approves: the
// request is rejected with the API server's message, offers no Approve, and nothing is created.
func TestDryRunRefusalShownBeforeApproval(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	installPinnedImagePolicy(t)
	const id, job = "e2e-dryrun-1", "e2e-latest-trainer"
	jobs := plane.Client().BatchV1().Jobs(harness.Namespace)

	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel,
		"train submit name="+job+" image=public.ecr.aws/docker/library/busybox:latest gpus=8 max-hours=1 request-id="+id)
	must(t, w, err)
	rec, err := w.WaitPhase(ctx, time.Minute, id, ops.PhaseRejected, ops.PhaseAwaitingApproval, ops.PhaseSucceeded)
	must(t, w, err)
	if rec.Phase != ops.PhaseRejected {
		t.Fatalf("a Job the admission policy refuses reached %s, want rejected at planning\n%s", rec.Phase, w.Logs())
	}
	if len(rec.Errors) == 0 || rec.Errors[0].Code != ops.CodeInvalidArgument ||
		!strings.Contains(rec.Errors[0].Message, pinnedMessage) || !strings.Contains(rec.Errors[0].Message, "dry run") {
		t.Errorf("record errors = %+v, want E_INVALID_ARGUMENT with the API server's dry-run refusal %q", rec.Errors, pinnedMessage)
	}
	if rec.Approval.Received() != 0 {
		t.Errorf("votes on a rejected request: %+v", rec.Approval.Votes)
	}

	// The request's message in the channel shows the refusal, and offers nothing to approve.
	msg, err := w.WaitText(ctx, 30*time.Second, harness.OpsChannel, id, pinnedMessage)
	must(t, w, err)
	if text := harness.MessageText(msg); !strings.Contains(text, string(ops.CodeInvalidArgument)) || !containsFold(text, "rejected") {
		t.Errorf("plan message does not say it was rejected with %s: %s", ops.CodeInvalidArgument, text)
	}
	if harness.HasButton(msg, handlers.ActionApprove) {
		t.Errorf("the rejected plan offers Approve: %s", msg.Blocks)
	}
	for _, m := range w.Slack.Snapshot().Messages[harness.OpsChannel] {
		if (m.TS == msg.TS || m.ThreadTS == msg.TS) && !m.Deleted && harness.HasButton(m, handlers.ActionApprove) {
			t.Errorf("message %s of the rejected request offers Approve", m.TS)
		}
		if n := revisionsWithButton(m, handlers.ActionApprove); m.TS == msg.TS && n > 0 {
			t.Errorf("the request's message offered Approve in %d earlier revision(s)", n)
		}
	}

	// Nothing reached the API server: no Job, no pod.
	if _, err := jobs.Get(ctx, job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Job %s after a refused dry run: err = %v, want NotFound", job, err)
	}
	pods, err := plane.Client().CoreV1().Pods(harness.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods of %s: %d (%v), want none", job, len(pods.Items), err)
	}
}

// revisionsWithButton counts the earlier versions of m (before chat.update) that carried the action.
func revisionsWithButton(m fakeslack.Message, action string) int {
	n := 0
	for _, r := range m.Revisions {
		if strings.Contains(string(r.Blocks), `"action_id":"`+action+`"`) {
			n++
		}
	}
	return n
}

// installPinnedImagePolicy installs, in the shared control plane, a ValidatingAdmissionPolicy (CEL) bound to the
// scenarios' namespace that refuses Jobs with a ":latest" image, waits until the API server enforces it, and
// removes it when the test ends.
func installPinnedImagePolicy(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	adm := plane.Client().AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: pinnedPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"},
						Resources: []string{"jobs"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: `object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))`,
				Message:    pinnedMessage,
				Reason:     ptr.To(metav1.StatusReasonInvalid),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: pinnedPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        pinnedPolicy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: harness.Namespace}}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("install the admission policy: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, pinnedPolicy, metav1.DeleteOptions{}); err != nil {
			t.Errorf("remove the admission policy binding: %v", err)
		}
		if err := adm.ValidatingAdmissionPolicies().Delete(ctx, pinnedPolicy, metav1.DeleteOptions{}); err != nil {
			t.Errorf("remove the admission policy: %v", err)
		}
	})
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind the admission policy: %v", err)
	}
	// The API server enforces a new policy once its informer has it: probe with a dry-run create of our own.
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-policy-probe", Namespace: harness.Namespace},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "probe", Image: "public.ecr.aws/docker/library/busybox:latest"}},
		}}},
	}
	var last error
	err := harness.Eventually(ctx, 30*time.Second, func() (bool, error) {
		_, last = plane.Client().BatchV1().Jobs(harness.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(last) && strings.Contains(last.Error(), pinnedMessage), nil
	})
	if err != nil {
		t.Fatalf("the API server never enforced %s: %v (last dry run: %v)", pinnedPolicy, err, last)
	}
}
