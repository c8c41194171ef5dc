package mcp

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

func TestInputSchemaFromParamSpecs(t *testing.T) {
	spec := ops.Spec{Name: "submit-training-job", Mutates: true, Params: []ops.ParamSpec{
		{Name: "name", Kind: ops.KindString, Required: true, Help: "job name"},
		{Name: "replicas", Kind: ops.KindInt, Default: "1", Help: "pods",
			Bound: &ops.Bound{Min: 1, Limit: func(l config.Limits) int { return l.MaxTrainingReplicas }}},
		{Name: "kind", Kind: ops.KindString, Default: "job", Enum: []string{"job", "pytorchjob"}, Help: "kind"},
		{Name: "max-hours", Kind: ops.KindDuration, Help: "deadline"},
		{Name: "memory", Kind: ops.KindQuantity, Help: "memory"},
		{Name: "command", Kind: ops.KindList, Help: "argv"},
		{Name: "spot", Kind: ops.KindBool, Help: "spot"},
	}}
	cfg := &config.Config{Clusters: []config.Cluster{
		{Name: "a", Namespaces: []string{"ml"}, Limits: config.Limits{MaxTrainingReplicas: 4}},
		{Name: "b", Namespaces: []string{"ml", "research"}, Limits: config.Limits{MaxTrainingReplicas: 16}},
	}}
	s := InputSchema(spec, BoundsFrom(cfg, []ops.Spec{spec}), TargetsFrom(cfg))
	b, _ := json.Marshal(s)
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	props := got["properties"].(map[string]any)
	prop := func(name string) map[string]any { return props[name].(map[string]any) }
	if got["additionalProperties"] != false || got["type"] != "object" {
		t.Errorf("schema = %s, want a closed object", b)
	}
	if req := got["required"].([]any); !slices.Equal(req, []any{"name", "requestId"}) {
		t.Errorf("required = %v, want the required parameter without a default and requestId", req)
	}
	for name, want := range map[string]string{"name": `"string"`, "replicas": `"integer"`, "kind": `"string"`, "maxHours": `["string","number"]`,
		"memory": `["string","number"]`, "command": `"array"`, "spot": `"boolean"`, "dryRun": `"boolean"`, "requestId": `"string"`} {
		if tb, _ := json.Marshal(prop(name)["type"]); string(tb) != want {
			t.Errorf("%s type = %s, want %s", name, tb, want)
		}
	}
	if r := prop("replicas"); r["minimum"] != float64(1) || r["maximum"] != float64(16) || r["default"] != float64(1) {
		t.Errorf("replicas = %v, want 1..16 (the largest cluster limit), default 1", r)
	}
	if e := prop("kind")["enum"]; len(e.([]any)) != 2 {
		t.Errorf("kind enum = %v", e)
	}
	target := prop("target")["properties"].(map[string]any)
	if ns := target["namespace"].(map[string]any)["enum"].([]any); len(ns) != 2 {
		t.Errorf("namespaces = %v, want ml and research once each", ns)
	}
	read := InputSchema(ops.Spec{Name: "get-widget", Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true}}}, nil, Targets{})
	if slices.Contains(read["required"].([]string), agentapi.FieldRequestID) {
		t.Error("a read requires requestId")
	}
}

func TestBoundsCheck(t *testing.T) {
	b := Bounds{"scale-inference": {"replicas": {Min: ptr(0), Max: ptr(8)}}}
	for _, tc := range []struct {
		n    any
		code ops.Code
	}{{int64(8), ""}, {int64(0), ""}, {int64(9), ops.CodeQuotaExceeded}, {int64(-1), ops.CodeInvalidArgument}, {"x", ""}} {
		err := b.check("scale-inference", map[string]any{"replicas": tc.n})
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("replicas=%v refused: %v", tc.n, err)
		case tc.code != "" && (err == nil || ops.AsError(err.(ops.Errors)[0]).Code != tc.code):
			t.Errorf("replicas=%v: %v, want %s", tc.n, err, tc.code)
		}
	}
}

func TestSummaryIsOneParagraph(t *testing.T) {
	r := Reply{Waiting: &Waiting{Channel: "C0APPROVE", Permalink: "https://fake.slack.com/archives/C0APPROVE/p1", Approvers: []string{"U0LEAD1"}}}
	r.RequestID, r.Operation, r.Phase = "train-1", "submit-training-job", ops.PhaseAwaitingApproval
	s := Summary(r)
	for _, want := range []string{"train-1", "awaiting-approval", "C0APPROVE", "https://fake.slack.com/archives/C0APPROVE/p1", "U0LEAD1", "wait_request"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
	if strings.Contains(s, "\n") {
		t.Errorf("summary has line breaks: %q", s)
	}
}

func TestTokenMatch(t *testing.T) {
	a := &agentServer{agent: Agent{Initiator: ops.Initiator{ID: "U0A"}}}
	a.agent.digest = sha("tok-a")
	b := &agentServer{agent: Agent{Initiator: ops.Initiator{ID: "U0B"}}}
	b.agent.digest = sha("tok-b")
	all := []*agentServer{a, b}
	for token, want := range map[string]*agentServer{"tok-a": a, "tok-b": b, "tok-c": nil, "": nil, "tok-a ": nil} {
		if got := match(all, token); got != want {
			t.Errorf("match(%q) = %v, want %v", token, got, want)
		}
	}
}

func sha(s string) [32]byte { return sha256.Sum256([]byte(s)) }
