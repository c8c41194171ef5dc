package kube

import (
	"context"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// TestObserve reports the real state after an interrupted execution, without changing anything.
func TestObserve(t *testing.T) {
	tests := []struct {
		name   string
		op     string
		params map[string]any
		before string
		after  string
	}{
		{"submit", "submit-training-job", trainParams(nil), "Job fraud-v17: not created", "Job fraud-v17: applied as planned"},
		{"deploy", "deploy-inference", deployParams(nil), "Deployment ranker: not created; Service ranker: not created", "Deployment ranker: applied as planned; Service ranker: applied as planned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			req := request(tt.op, tt.params)
			op, err := e.prepare(t, req)
			if err != nil {
				t.Fatal(err)
			}
			obs := op.(ops.Observer)
			res, err := obs.Observe(context.Background(), req)
			if err != nil || res.Summary != tt.before {
				t.Fatalf("before: %+v, %v", res, err)
			}
			e.execute(t, request(tt.op, tt.params))
			e.kube.ClearActions()
			res, err = obs.Observe(context.Background(), req)
			if err != nil || res.Summary != tt.after {
				t.Fatalf("after: %+v, %v", res, err)
			}
			if w := writes(e.kube.Actions()); len(w) != 0 {
				t.Fatalf("observing wrote %v", w)
			}
		})
	}
	t.Run("stop", func(t *testing.T) {
		e := newEnv(t, nil)
		e.execute(t, request("submit-training-job", trainParams(nil)))
		req := request("stop-training-job", map[string]any{"name": "fraud-v17"})
		op, err := e.prepare(t, req)
		if err != nil {
			t.Fatal(err)
		}
		res, err := op.(ops.Observer).Observe(context.Background(), req)
		if err != nil || !strings.Contains(res.Summary, "still present") {
			t.Fatalf("observe = %+v, %v", res, err)
		}
	})
}
