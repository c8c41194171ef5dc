package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperops/hyperops/ops"
)

// deletion is what a deleting operation removes, read from the cluster.
type deletion struct {
	summary string
	objects []doomed
	cost    ops.Cost
	risk    ops.Risk
	// keep explains what is deliberately left alone (volumes), for the plan.
	keep string
	// undo is how to put back what the deletion removes (Plan.Undo); nil when nothing can.
	undo *ops.Undo
}

type doomed struct {
	res  Resource
	ns   string
	name string
	have *unstructured.Unstructured // nil: already gone
}

// requireManaged refuses objects HyperOps did not create: it only deletes what it manages.
func requireManaged(res Resource, u *unstructured.Unstructured) error {
	if u.GetLabels()[LabelManagedBy] != ManagedByValue {
		return ops.Errorf(ops.CodeNotAuthorized, "name", "delete it the way it was created; HyperOps only deletes what it manages",
			"%s %s/%s is not managed by HyperOps (no %s label)", res.Kind, u.GetNamespace(), u.GetName(), ManagedSelector)
	}
	return nil
}

func observedLine(d doomed) string {
	if d.have == nil {
		return fmt.Sprintf("%s/%s absent\n", d.res.Kind, d.name)
	}
	return fmt.Sprintf("%s/%s uid=%s generation=%d\n", d.res.Kind, d.name, d.have.GetUID(), d.have.GetGeneration())
}

func (r *registry) deleteOperation(spec ops.Spec, check func(t target, req *ops.Request) error,
	build func(ctx context.Context, t target, req *ops.Request) (*deletion, error)) ops.Operation {
	prepare := func(ctx context.Context, req *ops.Request) (target, *deletion, error) {
		t, err := r.checkedAs(req, check)
		if err != nil {
			return t, nil, err
		}
		d, err := build(ctx, t, req)
		return t, d, err
	}
	return &observedOperation{
		operation: operation{
			spec: spec,
			validate: func(_ context.Context, req *ops.Request) error {
				_, err := r.checked(req, check)
				return err
			},
			plan: func(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
				t, d, err := prepare(ctx, req)
				if err != nil {
					return nil, err
				}
				p := &ops.Plan{Summary: d.summary, Cost: d.cost, Risk: d.risk, Undo: d.undo}
				var obs strings.Builder
				for _, o := range d.objects {
					obs.WriteString(observedLine(o))
					if o.have == nil {
						p.Changes = append(p.Changes, ops.Change{Action: ops.ActionNoop, Kind: o.res.Kind, Name: o.name})
						continue
					}
					p.Changes = append(p.Changes, ops.Change{Action: ops.ActionDelete, Kind: o.res.Kind, Name: o.name})
					if _, err := t.c.deleteObject(ctx, o.res, o.ns, o.name, true); err != nil {
						return nil, err
					}
				}
				if d.keep != "" {
					p.Warnings = append(p.Warnings, d.keep)
				}
				p.Observed, p.ServerValidated = obs.String(), true
				return p, nil
			},
			execute: func(ctx context.Context, req *ops.Request, _ *ops.Plan) (*ops.Result, error) {
				t, d, err := prepare(ctx, req)
				if err != nil {
					return nil, err
				}
				res := &ops.Result{}
				var parts []string
				type outcome struct {
					Kind    string `json:"kind"`
					Name    string `json:"name"`
					Deleted bool   `json:"deleted"`
				}
				var out []outcome
				for _, o := range d.objects {
					gone, err := t.c.deleteObject(ctx, o.res, o.ns, o.name, false)
					if err != nil && lostAnswer(err) {
						gone, err = deletedAfterAll(ctx, t.c, o, err)
					}
					if err != nil {
						return res, err
					}
					state := "deleted"
					if !gone {
						state = "already absent"
					}
					parts = append(parts, fmt.Sprintf("%s %s %s", o.res.Kind, o.name, state))
					out = append(out, outcome{o.res.Kind, o.name, gone})
					res.Objects = append(res.Objects, ref(t.cfg.Name, o.res, o.ns, o.name))
				}
				res.Summary = strings.Join(parts, "; ")
				if d.keep != "" {
					res.Details = append(res.Details, ops.Detail{Label: "kept", Value: d.keep})
				}
				res.Data, _ = json.Marshal(map[string]any{"objects": out})
				return res, nil
			},
		},
		observe: func(ctx context.Context, req *ops.Request) (*ops.Result, error) {
			t, d, err := prepare(ctx, req)
			if err != nil {
				return nil, err
			}
			var parts []string
			for _, o := range d.objects {
				state := "still present"
				if o.have == nil {
					state = "gone"
				}
				parts = append(parts, fmt.Sprintf("%s %s: %s", o.res.Kind, o.name, state))
			}
			_ = t
			return &ops.Result{Summary: strings.Join(parts, "; ")}, nil
		},
	}
}

// readBackTimeout bounds reading back a delete whose answer was lost.
const readBackTimeout = 30 * time.Second

// deletedAfterAll reads back a delete whose answer was lost: the object gone, or being deleted, is the delete done
// (deleting is idempotent, but sending it again would hide what happened); still there untouched, it was not; not
// readable, nobody knows, and the engine leaves it to people.
func deletedAfterAll(ctx context.Context, c *Cluster, o doomed, deleteErr error) (bool, error) {
	// The delete may have used up its context waiting for the answer: the read-back gets its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	have, err := c.getObject(ctx, o.res, o.ns, o.name)
	switch {
	case err != nil:
		return false, ops.OutcomeUnknown(deleteErr)
	case have == nil || have.GetDeletionTimestamp() != nil:
		return true, nil
	}
	return false, deleteErr
}
