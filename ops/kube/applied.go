package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperops/hyperops/ops"
)

// AppliedRecords finds what HyperOps itself applied to an object: the record of the last request whose write to
// it was accepted (its Plan.Applies names the object). ops/state implements it over the request records, so the
// record stays the source of truth; scale and rollout build from it and never from the live object, which anyone
// with edit rights on the namespace can change.
type AppliedRecords interface {
	// LastApplied returns that record, or an error matching ops.ErrNotFound when there is none (the object was
	// deployed before HyperOps kept one, or the record expired after redis.requestTTL), or one matching
	// ops.ErrStateUnavailable.
	LastApplied(ctx context.Context, obj ops.ObjectRef) (*ops.Record, error)
}

// vouched is what HyperOps applied to an inference Deployment, read from its own record.
type vouched struct {
	requestID string
	params    ops.Params
	object    *unstructured.Unstructured
}

// vouchedInference reads the live Deployment (which must exist and be HyperOps's) and what HyperOps last applied
// to it. Without a record there is nothing HyperOps can vouch for, and the live object is not trusted instead.
func (r *registry) vouchedInference(ctx context.Context, t target, name string) (*unstructured.Unstructured, *vouched, error) {
	have, err := t.c.getObject(ctx, ResDeployment, t.ns, name)
	if err != nil {
		return nil, nil, err
	}
	if have == nil {
		return nil, nil, ops.Errorf(ops.CodeNotFound, "name", "deploy it first with "+ops.Ask("infer deploy"), "Deployment %s/%s not found", t.ns, name)
	}
	if err := requireManaged(ResDeployment, have); err != nil {
		return nil, nil, err
	}
	obj := ref(t.cfg.Name, ResDeployment, t.ns, name)
	none := ops.Errorf(ops.CodeNotFound, "name",
		"deploy it again with "+ops.Ask("infer deploy name="+name)+" and the image, replicas and GPUs it should run; HyperOps then records what it applied",
		"HyperOps has no record of what it applied to Deployment %s/%s (deployed before HyperOps kept one, or the record expired); its live spec and %s annotation are not trusted",
		t.ns, name, AnnotationInferenceSpec)
	if r.applied == nil {
		return nil, nil, none
	}
	rec, err := r.applied.LastApplied(ctx, obj)
	switch {
	case errors.Is(err, ops.ErrNotFound):
		return nil, nil, none
	case err != nil:
		return nil, nil, ops.Wrap(err, ops.CodeStateUnavailable, "", "retry once Redis is reachable; nothing was changed",
			"read what HyperOps applied to Deployment %s/%s: %v", t.ns, name, err)
	}
	v, err := vouchedFrom(rec, obj)
	if err != nil {
		return nil, nil, err
	}
	return have, v, nil
}

// vouchedFrom takes the applied Deployment and the parameters it was built from out of a record's plan.
func vouchedFrom(rec *ops.Record, obj ops.ObjectRef) (*vouched, error) {
	bad := func(why string) error {
		return ops.Errorf(ops.CodeInternal, "name", "deploy it again with "+ops.Ask("infer deploy name="+obj.Name),
			"the record %s of what HyperOps applied to Deployment %s/%s %s", rec.ID(), obj.Namespace, obj.Name, why)
	}
	if rec.Plan == nil {
		return nil, bad("has no plan")
	}
	d, err := decodeContract(rec.Plan)
	if err != nil {
		return nil, bad("does not decode")
	}
	if d.spec == nil {
		return nil, bad("carries no inference parameters")
	}
	for _, o := range d.objects {
		if o.res.Kind == obj.Kind && o.obj.GetNamespace() == obj.Namespace && o.obj.GetName() == obj.Name {
			return &vouched{requestID: rec.ID(), params: d.spec, object: o.obj}, nil
		}
	}
	return nil, bad("does not contain it")
}

// driftOf lists the fields HyperOps set on the object whose live value differs from what it applied (From applied,
// To live), leaving out the fields the request changes anyway.
func driftOf(applied, live *unstructured.Unstructured, changing ...string) []ops.FieldChange {
	ch, _ := diffObject(applied, live)
	var out []ops.FieldChange
	for _, f := range ch.Fields {
		if slices.Contains(changing, f.Path) {
			continue
		}
		// diffObject reports From as the live value and To as the wanted one; drift reads applied → live.
		out = append(out, ops.FieldChange{Path: f.Path, From: f.To, To: f.From})
	}
	return out
}

// reportDrift puts the drift of the live object into the plan and raises its risk one level (at least to high):
// someone changed what HyperOps applied, and approvers see which fields before the plan puts them back.
func reportDrift(d *desired, v *vouched, live *unstructured.Unstructured, changing ...string) {
	fields := driftOf(v.object, live, changing...)
	if len(fields) == 0 {
		return
	}
	d.drift = append(d.drift, ops.Change{Action: ops.ActionUpdate, Kind: v.object.GetKind(), Name: v.object.GetName(), Fields: fields})
	// The fields are named in Plan.Drift, which the plan message lists; the reason stays short enough to show whole.
	d.risk.Add(max(ops.RiskHigh, d.risk.Level.Up()),
		"drift: %s %s was changed outside HyperOps since %s applied it (%s); the plan applies HyperOps's values, never the live ones",
		v.object.GetKind(), v.object.GetName(), v.requestID, plural(len(fields), "field", "fields"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
