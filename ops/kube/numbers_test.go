package kube

import (
	"errors"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// Numbers that would overflow or wrap where they end up (int64 products, int32 fields) are refused with
// E_INVALID_ARGUMENT naming the field, before anything is planned.
func TestNumbersThatWouldOverflowAreRefused(t *testing.T) {
	inferParams := func(over map[string]any) map[string]any {
		return paramsWith(map[string]any{"name": "ranker", "image": allowedImg}, over)
	}
	tests := []struct {
		name   string
		op     string
		params map[string]any
		field  string
	}{
		// 2⁶² × 4 wraps int64 to 0, which passed maxGPUsPerJob (and priced the plan at a few dollars) before.
		{"gpus × replicas wraps int64 to 0", "submit-training-job", trainParams(map[string]any{"gpus": "4611686018427387904", "replicas": "4"}), "gpus"},
		{"gpus beyond any GPU count", "submit-training-job", trainParams(map[string]any{"gpus": "3037000500", "replicas": "4"}), "gpus"},
		{"replicas beyond int64", "submit-training-job", trainParams(map[string]any{"replicas": "9223372036854775808"}), "replicas"},
		{"replicas that wrap int32 to 1", "deploy-inference", inferParams(map[string]any{"replicas": "4294967297"}), "replicas"},
		// 4294967297 s as int32 seconds wraps to 1 s.
		{"progress-deadline that wraps to 1s", "deploy-inference", inferParams(map[string]any{"progress-deadline": "4294967297s"}), "progress-deadline"},
		{"progress-deadline beyond int64 nanoseconds", "deploy-inference", inferParams(map[string]any{"progress-deadline": "3000000h"}), "progress-deadline"},
		{"progress-deadline as a huge number of hours", "deploy-inference", inferParams(map[string]any{"progress-deadline": float64(1e300)}), "progress-deadline"},
		{"max-hours beyond float range", "submit-training-job", trainParams(map[string]any{"max-hours": "1e999"}), "max-hours"},
		{"port beyond a TCP port", "deploy-inference", inferParams(map[string]any{"port": "4294975488"}), "port"},
		{"log lines beyond the cap", "get-training-job", map[string]any{"name": "fraud-v17", "lines": "100000"}, "lines"},
		{"memory beyond any quantity", "submit-training-job", trainParams(map[string]any{"memory": "9Ei"}), "memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, withCRDs())
			_, err := e.prepare(t, request(tt.op, tt.params))
			var oe *ops.Error
			if !errors.As(err, &oe) {
				t.Fatalf("want E_INVALID_ARGUMENT on %s, got %v", tt.field, err)
			}
			if oe.Code != ops.CodeInvalidArgument || oe.Field != tt.field || oe.Next == "" {
				t.Fatalf("want E_INVALID_ARGUMENT on %s with a next step, got %s on %q: %v", tt.field, oe.Code, oe.Field, err)
			}
		})
	}
}

// The largest values that fit are still accepted by the number checks (the guardrails then decide).
func TestNumbersAtTheirCapsPassNormalization(t *testing.T) {
	e := newEnv(t, nil)
	op, err := e.cat.Lookup("deploy-inference")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ops.Normalize(op.Spec().Params, map[string]any{"name": "ranker", "image": allowedImg, "replicas": "2147483647",
		"progress-deadline": "2147483647s", "port": "65535"})
	if err != nil {
		t.Fatalf("want the caps accepted, got %v", err)
	}
	if d := p.String("progress-deadline"); d != "596523h14m7s" {
		t.Fatalf("progress-deadline = %s", d)
	}
}
