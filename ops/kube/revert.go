package kube

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperops/hyperops/ops"
)

// undoCreate is the undo of a request that creates the object res/ns/name: the operation op with params removes
// it again, when the object is not there yet; when it is, the request creates nothing, and removing the object
// would remove what somebody else made, so it cannot be reverted.
func (r *registry) undoCreate(ctx context.Context, t target, res Resource, name, op string, params ops.Params, restores string) (*ops.Undo, error) {
	have, err := t.c.getObject(ctx, res, t.ns, name)
	if err != nil {
		return nil, err
	}
	if have != nil {
		return &ops.Undo{Refusal: res.Kind + " " + t.ns + "/" + name + " existed before this request, which did not create it",
			Next: "ask for the change you want as a new request"}, nil
	}
	return &ops.Undo{Operation: op, Params: params, Restores: restores}, nil
}

// undoInference is the undo of a change to an inference server: the request that puts back what HyperOps applied
// to it last (v, its own record), the parameter param of it changing back.
func undoInference(op string, v *vouched, param string) *ops.Undo {
	name := v.params.String("name")
	p := ops.Params{"name": name, param: v.params[param]}
	if param == "replicas" {
		p[param] = v.params.IntOr("replicas", 1)
	}
	return &ops.Undo{Operation: op, Params: p, Restores: fmt.Sprintf("%s=%v of %s, as %s applied it", param, p[param], name, v.requestID)}
}

// undoDeploy is the undo of deploy-inference: deleting the server when the deploy creates it, else deploying
// again the parameters HyperOps applied to it last (its record; without one, nothing HyperOps can vouch for).
func (r *registry) undoDeploy(ctx context.Context, t target, have *unstructured.Unstructured, name string) (*ops.Undo, error) {
	if have == nil {
		return &ops.Undo{Operation: "delete-inference", Params: ops.Params{"name": name},
			Restores: "deletes the Deployment and Service " + name + " this request created"}, nil
	}
	_, v, err := r.vouchedInference(ctx, t, name)
	switch {
	case err != nil && ops.AsError(err).Code == ops.CodeStateUnavailable:
		return nil, err
	case err != nil:
		return &ops.Undo{Refusal: "HyperOps cannot tell what Deployment " + t.ns + "/" + name + " ran before this request: " + ops.AsError(err).Message,
			Next: "ask for the image, replicas and GPUs it should run with " + ops.Ask("infer deploy name="+name)}, nil
	}
	return &ops.Undo{Operation: "deploy-inference", Params: maps.Clone(v.params),
		Restores: "the spec of " + name + " as " + v.requestID + " applied it"}, nil
}
