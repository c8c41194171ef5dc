package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/redact"
)

// FieldManager is the server-side apply field manager of every write HyperOps makes.
const FieldManager = "hyperops"

// Resource names a kind HyperOps writes: its resource (for clients) and its kind (for manifests).
type Resource struct {
	GVR  schema.GroupVersionResource
	Kind string
}

// APIVersion is group/version as manifests spell it.
func (r Resource) APIVersion() string { return r.GVR.GroupVersion().String() }

// The kinds HyperOps writes.
var (
	ResJob        = Resource{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "Job"}
	ResDeployment = Resource{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment"}
	ResService    = Resource{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service"}
	ResPVC        = Resource{schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "PersistentVolumeClaim"}
	ResPyTorchJob = Resource{schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}, "PyTorchJob"}
	ResHyperPod   = Resource{schema.GroupVersionResource{Group: "sagemaker.amazonaws.com", Version: "v1", Resource: "hyperpodpytorchjobs"}, "HyperPodPyTorchJob"}
)

// typed routes the built-in kinds through the typed clientset (so fake clientsets see them); custom resources go
// through the dynamic client.
type typed struct {
	get   func(ctx context.Context, k kubernetes.Interface, ns, name string) (runtime.Object, error)
	patch func(ctx context.Context, k kubernetes.Interface, ns, name string, data []byte, o metav1.PatchOptions) (runtime.Object, error)
	del   func(ctx context.Context, k kubernetes.Interface, ns, name string, o metav1.DeleteOptions) error
}

// namespacedClient is what every typed client-go client of a namespaced kind offers (JobInterface, …).
type namespacedClient[T runtime.Object] interface {
	Get(ctx context.Context, name string, o metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, o metav1.DeleteOptions) error
}

// typedFor adapts one typed client to the get / server-side apply / delete calls this package makes.
func typedFor[T runtime.Object, C namespacedClient[T]](client func(k kubernetes.Interface, ns string) C) typed {
	return typed{
		get: func(ctx context.Context, k kubernetes.Interface, ns, n string) (runtime.Object, error) {
			return client(k, ns).Get(ctx, n, metav1.GetOptions{})
		},
		patch: func(ctx context.Context, k kubernetes.Interface, ns, n string, d []byte, o metav1.PatchOptions) (runtime.Object, error) {
			return client(k, ns).Patch(ctx, n, types.ApplyPatchType, d, o)
		},
		del: func(ctx context.Context, k kubernetes.Interface, ns, n string, o metav1.DeleteOptions) error {
			return client(k, ns).Delete(ctx, n, o)
		},
	}
}

var typedKinds = map[schema.GroupVersionResource]typed{
	ResJob.GVR: typedFor[*batchv1.Job](func(k kubernetes.Interface, ns string) batchclient.JobInterface {
		return k.BatchV1().Jobs(ns)
	}),
	ResDeployment.GVR: typedFor[*appsv1.Deployment](func(k kubernetes.Interface, ns string) appsclient.DeploymentInterface {
		return k.AppsV1().Deployments(ns)
	}),
	ResService.GVR: typedFor[*corev1.Service](func(k kubernetes.Interface, ns string) coreclient.ServiceInterface {
		return k.CoreV1().Services(ns)
	}),
	ResPVC.GVR: typedFor[*corev1.PersistentVolumeClaim](func(k kubernetes.Interface, ns string) coreclient.PersistentVolumeClaimInterface {
		return k.CoreV1().PersistentVolumeClaims(ns)
	}),
}

// getObject reads an object; a missing object is (nil, nil).
func (c *Cluster) getObject(ctx context.Context, r Resource, ns, name string) (*unstructured.Unstructured, error) {
	var obj runtime.Object
	var err error
	if t, ok := typedKinds[r.GVR]; ok {
		obj, err = t.get(ctx, c.Kube, ns, name)
	} else {
		obj, err = c.dynamic().Resource(r.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, clusterError(err, "read %s %s/%s", r.Kind, ns, name)
	}
	return toUnstructured(obj, r)
}

// applyObject server-side applies obj (field manager hyperops, forced); dryRun asks the API server to validate and
// default it without persisting anything.
func (c *Cluster) applyObject(ctx context.Context, r Resource, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", r.Kind, obj.GetName(), err)
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	var out runtime.Object
	if t, ok := typedKinds[r.GVR]; ok {
		out, err = t.patch(ctx, c.Kube, ns, name, data, opts)
	} else {
		out, err = c.dynamic().Resource(r.GVR).Namespace(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	}
	if err != nil {
		verb := "apply"
		if dryRun {
			verb = "validate (server-side dry run)"
		}
		return nil, clusterError(err, "%s %s %s/%s", verb, r.Kind, ns, name)
	}
	return toUnstructured(out, r)
}

// deleteObject deletes an object with background propagation (dependents such as a Job's pods go too; claims
// never do, they are not dependents); a missing object is not an error. dryRun only validates.
func (c *Cluster) deleteObject(ctx context.Context, r Resource, ns, name string, dryRun bool) (bool, error) {
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var err error
	if t, ok := typedKinds[r.GVR]; ok {
		err = t.del(ctx, c.Kube, ns, name, opts)
	} else {
		err = c.dynamic().Resource(r.GVR).Namespace(ns).Delete(ctx, name, opts)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, clusterError(err, "delete %s %s/%s", r.Kind, ns, name)
	}
	return true, nil
}

func (c *Cluster) dynamic() dynamic.Interface { return c.Dynamic }

func toUnstructured(obj runtime.Object, r Resource) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", r.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(r.APIVersion())
	u.SetKind(r.Kind)
	return u, nil
}

// fromTyped renders a typed object as the unstructured body of an apply.
func fromTyped(obj runtime.Object, r Resource) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(obj, r)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	removeNulls(u.Object)
	return u, nil
}

// removeNulls drops nil values and empty maps that typed-to-unstructured conversion leaves (e.g.
// template.metadata.creationTimestamp), so an apply never claims ownership of fields HyperOps does not set.
func removeNulls(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			removeNulls(x)
			if len(x) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					removeNulls(em)
				}
			}
		}
	}
}

// clusterError maps API errors to user-facing codes: forbidden → E_NOT_AUTHORIZED, invalid → E_INVALID_ARGUMENT,
// anything else → E_CLUSTER_UNAVAILABLE.
func clusterError(err error, format string, args ...any) error {
	doing := fmt.Sprintf(format, args...)
	switch {
	case apierrors.IsForbidden(err):
		return ops.Wrap(err, ops.CodeNotAuthorized, "", "ask a cluster admin to grant HyperOps (or the impersonated user) this permission",
			"the cluster refused to %s: %s", doing, apiMessage(err))
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return ops.Wrap(err, ops.CodeInvalidArgument, "", "fix the arguments named in the message",
			"the API server rejected %s: %s", doing, apiMessage(err))
	case apierrors.IsAlreadyExists(err):
		return ops.Wrap(err, ops.CodeInvalidArgument, "name", "choose another name or stop the existing object first",
			"could not %s: %s", doing, apiMessage(err))
	case apierrors.IsConflict(err):
		return ops.Wrap(err, ops.CodeLocked, "", "something else keeps changing the object; retry once it settles",
			"could not %s: the object changed while HyperOps wrote it: %s", doing, apiMessage(err))
	}
	return ops.Wrap(err, ops.CodeClusterUnavailable, "", "retry; if it persists check the cluster's API server",
		"could not %s: %s", doing, redact.Credentials(err.Error()))
}

func apiMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Message != "" {
		return redact.Credentials(s.Status().Message)
	}
	return redact.Credentials(err.Error())
}

// LogReader reads the last lines of a container's log.
type LogReader interface {
	TailLogs(ctx context.Context, namespace, pod, container string, lines int64) (string, error)
}

// tailLogs reads a container's log through c's LogReader or the pods/log subresource.
func (c *Cluster) tailLogs(ctx context.Context, ns, pod, container string, lines int64) (string, error) {
	if c.logs != nil {
		return c.logs.TailLogs(ctx, ns, pod, container, lines)
	}
	req := c.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &lines})
	rc, err := req.Stream(ctx)
	if err != nil {
		return "", clusterError(err, "read the log of pod %s/%s", ns, pod)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read the log of pod %s/%s: %w", ns, pod, err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// listObjects lists objects of a kind in ns matching a label selector.
func (c *Cluster) listObjects(ctx context.Context, r Resource, ns, selector string) ([]unstructured.Unstructured, error) {
	var list runtime.Object
	var err error
	opts := metav1.ListOptions{LabelSelector: selector}
	switch r.GVR {
	case ResJob.GVR:
		list, err = c.Kube.BatchV1().Jobs(ns).List(ctx, opts)
	case ResDeployment.GVR:
		list, err = c.Kube.AppsV1().Deployments(ns).List(ctx, opts)
	case ResService.GVR:
		list, err = c.Kube.CoreV1().Services(ns).List(ctx, opts)
	case ResPVC.GVR:
		list, err = c.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	default:
		list, err = c.Dynamic.Resource(r.GVR).Namespace(ns).List(ctx, opts)
	}
	if err != nil {
		return nil, clusterError(err, "list %s in %s", r.GVR.Resource, ns)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("read the list of %s: %w", r.GVR.Resource, err)
	}
	out := make([]unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		u, err := toUnstructured(it, r)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, nil
}
