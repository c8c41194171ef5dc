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

// watchedKinds are the kinds the watcher informs on (Watcher.inform), by Kind: typed ones are read through the
// typed clients, the others (custom resources) through the dynamic client.
var watchedKinds = map[string]Resource{
	ResJob.Kind: ResJob, ResDeployment.Kind: ResDeployment, ResPVC.Kind: ResPVC,
	ResPyTorchJob.Kind: ResPyTorchJob, ResHyperPod.Kind: ResHyperPod,
}

// Watchable reports whether the watcher informs on obj's kind: a watch of any other kind would never be told.
func (cs *Clusters) Watchable(obj ops.ObjectRef) bool {
	_, ok := watchedKinds[obj.Kind]
	return ok
}

// ObserveWatched reads a watched object's current state (the watcher's words: pending, running, completed,
// failed, bound…) from its cluster; found is false when it does not exist (yet). It reads the kinds the watcher
// informs on, and draws their state as the watcher does (stateOf).
func (cs *Clusters) ObserveWatched(ctx context.Context, obj ops.ObjectRef) (st, reason string, found bool, err error) {
	res, ok := watchedKinds[obj.Kind]
	if !ok {
		return "", "", false, ops.Errorf(ops.CodeInvalidArgument, "kind", "use kind=job, pytorchjob, hyperpod or deployment",
			"cannot watch objects of kind %q", obj.Kind)
	}
	c, err := cs.Get(obj.Cluster)
	if err != nil {
		return "", "", false, err
	}
	var o any
	get := metav1.GetOptions{}
	switch res {
	case ResJob:
		o, err = c.Kube.BatchV1().Jobs(obj.Namespace).Get(ctx, obj.Name, get)
	case ResDeployment:
		o, err = c.Kube.AppsV1().Deployments(obj.Namespace).Get(ctx, obj.Name, get)
	case ResPVC:
		o, err = c.Kube.CoreV1().PersistentVolumeClaims(obj.Namespace).Get(ctx, obj.Name, get)
	default:
		o, err = c.Dynamic.Resource(res.GVR).Namespace(obj.Namespace).Get(ctx, obj.Name, get)
	}
	switch {
	case apierrors.IsNotFound(err):
		return "", "", false, nil
	case err != nil:
		return "", "", false, fmt.Errorf("read %s %s/%s: %w", obj.Kind, obj.Namespace, obj.Name, err)
	}
	st, reason = stateOf(o)
	return st, reason, true, nil
}
