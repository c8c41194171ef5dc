package bot

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
)

func (h *harness) get(path string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(h.ctx(), http.MethodGet, "http://"+h.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *harness) waitStatus(path string, want int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := h.get(path)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s = %d %q, want %d", path, code, body, want)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP endpoint with a deadline
	}
}

// /readyz turns unready when Redis stops and ready when it returns; /healthz stays alive throughout.
func TestReadyzFollowsRedis(t *testing.T) {
	h := start(t)
	h.waitStatus("/readyz", http.StatusOK)
	h.redis.Stop()
	h.waitStatus("/readyz", http.StatusServiceUnavailable)
	if code, _ := h.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d while Redis is down, want 200", code)
	}
	h.redis.Restart()
	h.waitStatus("/readyz", http.StatusOK)
}

// /metrics exposes the series of docs/architecture.md, parsed as Prometheus text.
func TestMetricsScrape(t *testing.T) {
	h := start(t)
	h.slash(userAlice, chOps, "widget scale name=m count=1")
	s := h.waitFor("plan", func(s fakeslack.Snapshot) bool {
		return len(topLevel(s, chOps)) == 1 && hasButton(topLevel(s, chOps)[0], handlers.ActionApprove)
	})
	h.click(userLead1, chOps, topLevel(s, chOps)[0].TS, handlers.ActionApprove)
	h.waitFor("success", func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(chOps, topLevel(s, chOps)[0].TS)
		return strings.Contains(m.Text, "succeeded")
	})
	_, body := h.get("/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	for _, name := range []string{"hyperops_envelopes_total", "hyperops_ack_latency_seconds", "hyperops_requests_total", "hyperops_approvals_total",
		"hyperops_executions_total", "hyperops_execution_duration_seconds", "hyperops_slack_api_calls_total", "hyperops_redis_errors_total",
		"hyperops_watched_objects"} {
		if _, ok := families[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if f := families["hyperops_executions_total"]; f != nil {
		got := f.GetMetric()[0]
		if got.GetCounter().GetValue() != 1 {
			t.Errorf("executions = %v, want 1", got.GetCounter().GetValue())
		}
	}
	if f := families["hyperops_envelopes_total"]; f == nil || len(f.GetMetric()) < 2 {
		t.Errorf("envelopes by type: %v", f)
	}
}
