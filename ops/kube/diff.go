package kube

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/hyperops/hyperops/ops"
)

// absent marks a field (or object) the cluster does not have.
const absent = "<absent>"

// flatten lists the leaves of an object as path → rendered value. Lists are indexed: spec.containers[0].image.
func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = "[]"
		}
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
		}
	case nil:
		out[prefix] = "null"
	case string:
		out[prefix] = x
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}

// diffObject compares the fields HyperOps sets (desired) with the same fields of the observed object (nil when it
// does not exist). Fields the server or other managers set are not HyperOps's business and are not compared.
// It also returns the canonical rendering of the observed values of those fields.
func diffObject(desired, observed *unstructured.Unstructured) (ops.Change, map[string]string) {
	ch := ops.Change{Kind: desired.GetKind(), Name: desired.GetName()}
	want := map[string]string{}
	flatten("", desired.Object, want)
	seen := map[string]string{}
	if observed == nil {
		ch.Action = ops.ActionCreate
		for p := range want {
			seen[p] = absent
		}
		return ch, seen
	}
	have := map[string]string{}
	flatten("", observed.Object, have)
	for _, p := range slices.Sorted(maps.Keys(want)) {
		got, ok := have[p]
		if !ok {
			got = absent
		}
		seen[p] = got
		if got != want[p] {
			ch.Fields = append(ch.Fields, ops.FieldChange{Path: p, From: got, To: want[p]})
		}
	}
	ch.Action = ops.ActionNoop
	if len(ch.Fields) > 0 {
		ch.Action = ops.ActionUpdate
	}
	return ch, seen
}

// renderObserved is the canonical text of the observed state a plan diffs against: sorted, one field a line.
func renderObserved(kind, name string, seen map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s\n", kind, name)
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		fmt.Fprintf(&b, "  %s=%s\n", k, seen[k])
	}
	return b.String()
}

// manifest renders objects as a multi-document YAML stream.
func manifest(objs ...*unstructured.Unstructured) (string, error) {
	docs := make([]string, 0, len(objs))
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return "", fmt.Errorf("render %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n"), nil
}
