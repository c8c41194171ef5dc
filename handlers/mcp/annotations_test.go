package mcp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/kube"
)

// TestToolAnnotationsFromSpecs checks the tools of the catalog the service registers say what they said when the
// server guessed from names (delete-, stop- and scale- operations destructive, reads read-only), now from each
// operation's spec, and that a new operation is annotated from its spec alone. Node recovery (reboot-, replace-),
// added after the guessing, is destructive by its spec.
func TestToolAnnotationsFromSpecs(t *testing.T) {
	cat := ops.NewCatalog()
	kube.Register(cat, nil, nil, nil, nil)
	aws.Register(cat, nil, nil, nil)
	specs := append(cat.Specs(), ops.Spec{Name: "restart-widget", Summary: "Restart a widget", Mutates: true, Destructive: true})
	for _, spec := range specs {
		a := operationTool(spec, BoundsFrom(&config.Config{}, specs), Targets{}).Annotations
		wantDestructive := spec.Mutates && (spec.Name == "restart-widget" || strings.HasPrefix(spec.Name, "delete-") ||
			strings.HasPrefix(spec.Name, "stop-") || strings.HasPrefix(spec.Name, "scale-") ||
			strings.HasPrefix(spec.Name, "reboot-") || strings.HasPrefix(spec.Name, "replace-"))
		if a.DestructiveHint == nil || *a.DestructiveHint != wantDestructive || a.ReadOnlyHint != !spec.Mutates || !a.IdempotentHint {
			t.Errorf("%s: destructive %v, read-only %v, idempotent %v; want destructive %v, read-only %v", spec.Name,
				*a.DestructiveHint, a.ReadOnlyHint, a.IdempotentHint, wantDestructive, !spec.Mutates)
		}
	}
}

// TestBoundsFromSpecs checks the static bounds the schemas publish come from the parameters' own bounds, as they
// did from a table of operation names: the largest limit of any cluster, and the operations' lower ends.
func TestBoundsFromSpecs(t *testing.T) {
	cat := ops.NewCatalog()
	kube.Register(cat, nil, nil, nil, nil)
	aws.Register(cat, nil, nil, nil)
	cfg := &config.Config{Clusters: []config.Cluster{
		{Limits: config.Limits{MaxTrainingReplicas: 4, MaxGPUsPerJob: 64, MaxInferenceReplicas: 3, MaxNodesPerGroup: 10}},
		{Limits: config.Limits{MaxTrainingReplicas: 8, MaxGPUsPerJob: 32, MaxInferenceReplicas: 6, MaxNodesPerGroup: 5}},
	}}
	got := BoundsFrom(cfg, cat.Specs())
	want := Bounds{
		"submit-training-job": {"replicas": {Min: ptr(1), Max: ptr(8)}, "gpus": {Min: ptr(0), Max: ptr(64)}},
		"deploy-inference":    {"replicas": {Min: ptr(1), Max: ptr(6)}, "gpus": {Min: ptr(0)}, "port": {Min: ptr(1), Max: ptr(65535)}},
		"scale-inference":     {"replicas": {Min: ptr(0), Max: ptr(6)}},
		"scale-capacity":      {"count": {Min: ptr(0), Max: ptr(10)}},
	}
	if len(got) != len(want) {
		t.Errorf("bounds of %d operations, want %d: %v", len(got), len(want), got)
	}
	for op, params := range want {
		if len(got[op]) != len(params) {
			t.Errorf("%s: %d bounded parameters, want %d", op, len(got[op]), len(params))
		}
		for p, w := range params {
			g := got[op][p]
			if !sameEnd(g.Min, w.Min) || !sameEnd(g.Max, w.Max) {
				t.Errorf("%s %s: %s, want %s", op, p, rangeText(g), rangeText(w))
			}
		}
	}
}

func sameEnd(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func rangeText(r Range) string {
	end := func(p *int64) string {
		if p == nil {
			return "open"
		}
		return fmt.Sprint(*p)
	}
	return "[" + end(r.Min) + ", " + end(r.Max) + "]"
}

func ptr(n int64) *int64 { return &n }
