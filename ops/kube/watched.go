package kube

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hyperops/hyperops/ops"
)

// watchKinds maps what people write in kind= to the resources the watcher informs on.
var watchKinds = map[string]Resource{
	"": ResJob, "job": ResJob, "pytorchjob": ResPyTorchJob, "hyperpod": ResHyperPod,
	"hyperpodpytorchjob": ResHyperPod, "deployment": ResDeployment,
}

var _ ops.WatchedObjects = (*Clusters)(nil)

// WatchedObject names the object a person asked to watch on a resolved target: a known kind and a DNS-1123 name.
func (cs *Clusters) WatchedObject(t ops.Target, kind, name string) (ops.ObjectRef, error) {
	res, ok := watchKinds[strings.ToLower(kind)]
	if !ok {
		return ops.ObjectRef{}, ops.Errorf(ops.CodeInvalidArgument, "kind", "use kind=job, pytorchjob, hyperpod or deployment",
			"cannot watch objects of kind %q", kind)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return ops.ObjectRef{}, ops.Errorf(ops.CodeInvalidArgument, "job", "use the workload's Kubernetes name",
			"%q is not a valid name: %s", name, strings.Join(errs, "; "))
	}
	return ops.ObjectRef{Cluster: t.Cluster, Namespace: t.Namespace, APIVersion: res.APIVersion(), Kind: res.Kind, Name: name}, nil
}

// ObserveWatched reads a watched object's current state (the watcher's words: pending, running, completed,
// failed…) from its cluster; found is false when it does not exist (yet).
func (cs *Clusters) ObserveWatched(ctx context.Context, obj ops.ObjectRef) (st, reason string, found bool, err error) {
	c, err := cs.Get(obj.Cluster)
	if err != nil {
		return "", "", false, err
	}
	get := metav1.GetOptions{}
	switch obj.Kind {
	case ResJob.Kind:
		j, gerr := c.Kube.BatchV1().Jobs(obj.Namespace).Get(ctx, obj.Name, get)
		if gerr == nil {
			st, reason = JobState(j)
		}
		err = gerr
	case ResDeployment.Kind:
		d, gerr := c.Kube.AppsV1().Deployments(obj.Namespace).Get(ctx, obj.Name, get)
		if gerr == nil {
			st, reason = DeploymentState(d)
		}
		err = gerr
	default:
		res, ok := watchKinds[strings.ToLower(obj.Kind)]
		if !ok {
			return "", "", false, fmt.Errorf("watch: unknown kind %s", obj.Kind)
		}
		u, gerr := c.Dynamic.Resource(res.GVR).Namespace(obj.Namespace).Get(ctx, obj.Name, get)
		if gerr == nil {
			st, reason = CustomJobState(u)
		}
		err = gerr
	}
	switch {
	case apierrors.IsNotFound(err):
		return "", "", false, nil
	case err != nil:
		return "", "", false, fmt.Errorf("read %s %s/%s: %w", obj.Kind, obj.Namespace, obj.Name, err)
	}
	return st, reason, true, nil
}
