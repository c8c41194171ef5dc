package controlplane

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Custom resources of the training operators HyperOps drives.
var (
	// PyTorchJobGVR is Kubeflow's training-operator PyTorchJob.
	PyTorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}
	// HyperPodPyTorchJobGVR is the SageMaker HyperPod training operator's job.
	HyperPodPyTorchJobGVR = schema.GroupVersionResource{Group: "sagemaker.amazonaws.com", Version: "v1", Resource: "hyperpodpytorchjobs"}
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdDef names one CRD; the schema is ours and deliberately minimal: spec and status are
// free-form, so the API server validates structure (apiVersion, kind, metadata) only.
type crdDef struct {
	gvr            schema.GroupVersionResource
	kind, singular string
}

var trainingCRDs = []crdDef{
	{gvr: PyTorchJobGVR, kind: "PyTorchJob", singular: "pytorchjob"},
	{gvr: HyperPodPyTorchJobGVR, kind: "HyperPodPyTorchJob", singular: "hyperpodpytorchjob"},
}

func (d crdDef) object() *unstructured.Unstructured {
	freeForm := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": d.gvr.Resource + "." + d.gvr.Group},
		"spec": map[string]any{
			"group": d.gvr.Group,
			"scope": "Namespaced",
			"names": map[string]any{
				"plural": d.gvr.Resource, "singular": d.singular, "kind": d.kind,
				"listKind": d.kind + "List",
			},
			"versions": []any{map[string]any{
				"name": d.gvr.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"apiVersion": map[string]any{"type": "string"},
						"kind":       map[string]any{"type": "string"},
						"metadata":   map[string]any{"type": "object"},
						"spec":       freeForm,
						"status":     freeForm,
					},
				}},
			}},
		},
	}}
}

// InstallCRDs creates the PyTorchJob (kubeflow.org/v1) and HyperPodPyTorchJob
// (sagemaker.amazonaws.com/v1) CRDs, if absent, and waits until both are Established and
// served. ctx bounds the wait.
func (cp *ControlPlane) InstallCRDs(ctx context.Context) error {
	crds := cp.dynamic.Resource(crdGVR)
	for _, d := range trainingCRDs {
		_, err := crds.Create(ctx, d.object(), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", d.kind, err)
		}
	}
	for _, d := range trainingCRDs {
		if err := cp.waitCRD(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// waitCRD polls until the CRD is Established and a list of its resource succeeds, which is
// when clients (and the bot's discovery) can actually use it.
func (cp *ControlPlane) waitCRD(ctx context.Context, d crdDef) error {
	ticker := time.NewTicker(readyPollPeriod)
	defer ticker.Stop()
	name := d.gvr.Resource + "." + d.gvr.Group
	for {
		obj, err := cp.dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil && established(obj) {
			if _, err = cp.dynamic.Resource(d.gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w (last error: %v)", name, ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
