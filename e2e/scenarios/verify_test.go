package scenarios

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// The seed's smoke test: `/hp bootstrap verify` runs it and reports namespace, scheduling and logs as checked.
func TestBootstrapVerifyReportsEveryCheck(t *testing.T) {
	w := world(t, harness.Options{})
	ctx := t.Context()
	const id = "e2e-verify-1"
	// kwok runs no containers: the log the smoke-test pod "prints" is what pods/log serves from this file.
	if err := plane.SetContainerLog("starting smoke test\n" + `{"hyperops":"verify","ok":true}` + "\n"); err != nil {
		t.Fatal(err)
	}
	_, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, "bootstrap verify image="+busybox+" request-id="+id)
	must(t, w, err)
	rec, err := w.WaitPhase(ctx, 2*time.Minute, id, ops.PhaseSucceeded, ops.PhaseFailed)
	must(t, w, err)
	if rec.Phase != ops.PhaseSucceeded || rec.Result == nil {
		t.Fatalf("verify ended %s with %v, result %+v", rec.Phase, rec.Errors, rec.Result)
	}
	checks := map[string]string{}
	for _, d := range rec.Result.Details {
		checks[d.Label] = d.Value
	}
	for _, c := range []string{"namespace", "scheduling", "logs"} {
		if !strings.HasPrefix(checks[c], "ok") {
			t.Errorf("check %q = %q, want ok", c, checks[c])
		}
	}
	if !strings.Contains(checks["logs"], `"hyperops":"verify"`) {
		t.Errorf("logs check = %q, want the marker line read back through pods/log", checks["logs"])
	}
	// The request's own message (not the thread reply that also says succeeded), once it is updated.
	msg, err := w.WaitMessage(ctx, 30*time.Second, harness.OpsChannel, func(m fakeslack.Message) bool {
		text := strings.ToLower(harness.MessageText(m))
		return m.ThreadTS == "" && strings.Contains(text, id) && strings.Contains(text, "succeeded")
	})
	must(t, w, err)
	text := harness.MessageText(msg)
	for _, c := range []string{"namespace", "scheduling", "logs"} {
		if !strings.Contains(text, c) {
			// The checks may be told in the thread rather than in the message itself.
			if _, err := w.WaitInThread(ctx, 10*time.Second, harness.OpsChannel, msg.TS, c); err != nil {
				t.Errorf("Slack never showed the %s check: %v", c, err)
			}
		}
	}
}
