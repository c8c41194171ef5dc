package kube

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// What the cluster says (a log tail, events, condition messages) is redacted where it is read, before it can
// reach Slack: credential shapes, the configured secrets and redact.patterns; and the log tail is capped.
func TestClusterTextIsRedactedWhereItIsRead(t *testing.T) {
	const token = "xoxb-1234-5678-abcdefghijkl"
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
		Message: "pod failed: export DB_PASSWORD=swordfish"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fraud-v17-0-abc", Namespace: testNS, Labels: map[string]string{LabelWorkload: "fraud-v17"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev1", Namespace: testNS},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "fraud-v17-0-abc"}, Type: "Warning", Reason: "Failed",
		Message: "pull with AKIAIOSFODNN7EXAMPLE failed"}
	e := newEnv(t, []runtime.Object{managedJob("fraud-v17", nil, failed), pod, ev},
		func(cfg *config.Config, _ *env) {
			cfg.Redact = config.Redact{Patterns: []string{`(?i)password=(?P<secret>\S+)`}, MaxChars: 500}
		})
	e.logs.set("fraud-v17-0-abc", strings.Repeat("epoch ok\n", 200)+"connecting with "+token+"\nTraceback: password=hunter2 refused")
	req := request("get-training-job", map[string]any{"name": "fraud-v17", "lines": "500"})
	op, err := e.prepare(t, req)
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Execute(context.Background(), req, nil, ops.Execution{})
	if err != nil {
		t.Fatal(err)
	}
	all := res.Summary + res.Output + string(res.Data)
	for _, d := range res.Details {
		all += d.Value
	}
	for _, leak := range []string{token, "hunter2", "swordfish", "AKIAIOSFODNN7EXAMPLE"} {
		if strings.Contains(all, leak) {
			t.Errorf("%q reached the result", leak)
		}
	}
	if !strings.HasSuffix(res.Output, "Traceback: password=[REDACTED] refused") || !strings.HasPrefix(res.Output, "… (") {
		t.Errorf("log tail = %.80q … %q", res.Output, res.Output[max(0, len(res.Output)-60):])
	}
	if n := len([]rune(res.Output)); n > 540 {
		t.Errorf("log tail is %d characters, the cap is 500", n)
	}
}
