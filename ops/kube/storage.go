package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/ops"
)

// maxVolumeSize is the largest EBS volume (gp3, io2): a claim above it could never be provisioned.
var maxVolumeSize = resource.MustParse("16Ti")

// storagePrices are on-demand $/GB-month of EBS volume types by the storage class names EKS uses for them
// (us-east-1, 2025-06). A class not listed has an unknown price.
var storagePrices = map[string]float64{"gp3": 0.08, "gp2": 0.10, "io1": 0.125, "io2": 0.125, "st1": 0.045, "sc1": 0.015}

const lockKindStorage = "pvc"

func (r *registry) createStorage() ops.Operation {
	spec := ops.Spec{
		Name: "create-storage", Domain: "storage", Topic: "storage", Verb: "create", Mutates: true, Baseline: ops.RiskLow,
		Summary: "Create a persistent volume claim (size, storage class, access mode)",
		Params: []ops.ParamSpec{
			{Name: "name", Kind: ops.KindString, Required: true, Help: "claim name (DNS-1123 label)"},
			{Name: "size", Kind: ops.KindQuantity, Required: true, Help: "size, e.g. 500Gi (at most 16Ti, the largest EBS volume)"},
			{Name: "storage-class", Kind: ops.KindString, Help: "storage class; one of the cluster's storageClasses (default: the cluster's default class)"},
			{Name: "access-mode", Kind: ops.KindString, Default: string(corev1.ReadWriteOnce),
				Enum: []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod)},
				Help: "ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod"},
		},
		Lock:     r.lock(lockKindStorage),
		Headline: ops.MustTemplate(`Create the volume claim {{.Name}} on {{.Target}}{{if .Set "size"}} — {{.Param "size"}}{{end}}`),
		Revert:   "deletes the claim it created, and with it whatever was written to it",
	}
	check := func(t target, req *ops.Request) error {
		p := req.Params
		if err := checkName("name", p.String("name")); err != nil {
			return err
		}
		if _, err := checkQuantity("size", p.String("size"), maxVolumeSize, "the largest EBS volume"); err != nil {
			return err
		}
		if sc := p.String("storage-class"); sc != "" && !t.cfg.AllowsStorageClass(sc) {
			return ops.Errorf(ops.CodeInvalidArgument, "storage-class", "use one of clusters["+t.cfg.Name+"].storageClasses: "+strings.Join(t.cfg.StorageClasses, ", "),
				"storage class %q is not allowed on %s", sc, t.cfg.Name)
		}
		if sc := p.String("storage-class"); sc == "" && len(t.cfg.StorageClasses) > 0 {
			return ops.Errorf(ops.CodeInvalidArgument, "storage-class", "add storage-class= one of "+strings.Join(t.cfg.StorageClasses, ", "),
				"cluster %s restricts storage classes, so storage-class is required", t.cfg.Name)
		}
		return nil
	}
	return r.applyOperation(spec, check, func(ctx context.Context, t target, req *ops.Request) (*desired, error) {
		p := req.Params
		size := resource.MustParse(p.String("size"))
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: p.String("name"), Namespace: t.ns, Labels: objectLabels(t.cfg, req)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(p.String("access-mode"))},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		}
		if sc := p.String("storage-class"); sc != "" {
			pvc.Spec.StorageClassName = &sc
		}
		u, err := fromTyped(pvc, ResPVC)
		if err != nil {
			return nil, err
		}
		d := &desired{summary: fmt.Sprintf("PersistentVolumeClaim %s/%s: %s %s %s", t.ns, pvc.Name, size.String(), p.String("access-mode"), p.String("storage-class"))}
		if d.undo, err = r.undoCreate(ctx, t, ResPVC, pvc.Name, OpDeleteStorage, ops.Params{"name": pvc.Name},
			"deletes the claim "+pvc.Name+" this request created, with its typed confirmation"); err != nil {
			return nil, err
		}
		d.add(ResPVC, u)
		d.watch = []ops.ObjectRef{ref(t.cfg.Name, ResPVC, t.ns, pvc.Name)}
		gb := float64(size.Value()) / 1e9
		if price, ok := storagePrices[p.String("storage-class")]; ok {
			d.cost.AddHourly(fmt.Sprintf("%s volume %s", p.String("storage-class"), size.String()), gb, price/ops.HoursPerMonth, "GB-hour")
			d.cost.Source = "built-in EBS list prices, us-east-1, 2025-06 (estimate)"
		} else {
			d.cost.Unknown = append(d.cost.Unknown, "storage class "+orDefault(p.String("storage-class"), "(cluster default)"))
		}
		return d, nil
	}, nil)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// podsMounting lists the pods in ns that mount the claim.
func podsMounting(ctx context.Context, c *Cluster, ns, claim string) ([]string, error) {
	l, err := c.Kube.CoreV1().Pods(ns).List(ctx, listOptions(""))
	if err != nil {
		return nil, clusterError(err, "list pods in %s", ns)
	}
	var out []string
	for _, p := range l.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				out = append(out, p.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// OpDeleteStorage deletes a claim and its data: the one operation whose approver types a name.
const OpDeleteStorage = "delete-storage"

func (r *registry) deleteStorage() ops.Operation {
	spec := ops.Spec{
		Name: OpDeleteStorage, Domain: "storage", Topic: "storage", Verb: "delete", Mutates: true, Baseline: ops.RiskCritical,
		Summary:  "Delete a persistent volume claim and, with its reclaim policy, its data; refused while any pod mounts it",
		Params:   []ops.ParamSpec{nameParam},
		Lock:     r.lock(lockKindStorage),
		Headline: ops.MustTemplate(`Delete the volume claim {{.Name}} on {{.Target}} {{.Strong "and its data"}}`),
		Confirm: &ops.Confirmation{Param: "name", Label: "claim name", Title: "Delete storage", Submit: "Delete data",
			Warning: ops.MustTemplate(`deletes the claim {{.Name}} in {{.Target}} and {{.Strong "its data, for good"}}`)},
		Destructive: true,
		Revert:      "cannot be reverted: the claim's data is gone for good",
	}
	return r.deleteOperation(spec, checkNameOnly, func(ctx context.Context, t target, req *ops.Request) (*deletion, error) {
		name := req.Params.String("name")
		have, err := t.c.getObject(ctx, ResPVC, t.ns, name)
		if err != nil {
			return nil, err
		}
		d := &deletion{objects: []doomed{{ResPVC, t.ns, name, have}}, undo: &ops.Undo{
			Refusal: "deleting a volume claim removes its data for good (rule: delete-storage cannot be reverted)",
			Next:    "create an empty claim with " + ops.Ask("storage create name="+name) + " and restore the data from your own backup"}}
		if have == nil {
			d.summary = fmt.Sprintf("claim %s/%s is already gone", t.ns, name)
			return d, nil
		}
		if err := requireManaged(ResPVC, have); err != nil {
			return nil, err
		}
		pods, err := podsMounting(ctx, t.c, t.ns, name)
		if err != nil {
			return nil, err
		}
		if len(pods) > 0 {
			return nil, ops.Errorf(ops.CodeInUse, "name", "stop the workloads using it first (stop-training-job / delete-inference), then retry",
				"claim %s/%s is mounted by pod(s) %s", t.ns, name, strings.Join(pods, ", "))
		}
		d.summary = fmt.Sprintf("delete claim %s/%s and its data", t.ns, name)
		d.risk.Add(ops.RiskCritical, "deletes the data on %s (not recoverable when the reclaim policy is Delete)", name)
		return d, nil
	})
}

// claimSummary is one line of list-storage.
type claimSummary struct {
	Name         string   `json:"name"`
	Phase        string   `json:"phase"`
	Size         string   `json:"size"`
	StorageClass string   `json:"storageClass,omitempty"`
	AccessModes  []string `json:"accessModes"`
	Managed      bool     `json:"managed"`
	UsedBy       []string `json:"usedBy,omitempty"`
}

func (r *registry) listStorage() ops.Operation {
	spec := ops.Spec{
		Name: "list-storage", Domain: "storage", Topic: "storage", Verb: "list", Baseline: ops.RiskLow,
		Summary: "List the persistent volume claims of a namespace, their size and the pods using them",
	}
	return r.readOperation(spec, func(target, *ops.Request) error { return nil }, func(ctx context.Context, t target, req *ops.Request) (*ops.Result, error) {
		l, err := t.c.Kube.CoreV1().PersistentVolumeClaims(t.ns).List(ctx, listOptions(""))
		if err != nil {
			return nil, clusterError(err, "list claims in %s", t.ns)
		}
		var claims []claimSummary
		var b strings.Builder
		for _, c := range l.Items {
			s := claimSummary{Name: c.Name, Phase: string(c.Status.Phase), Managed: c.Labels[LabelManagedBy] == ManagedByValue}
			if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
				s.Size = q.String()
			}
			if c.Spec.StorageClassName != nil {
				s.StorageClass = *c.Spec.StorageClassName
			}
			for _, m := range c.Spec.AccessModes {
				s.AccessModes = append(s.AccessModes, string(m))
			}
			if s.UsedBy, err = podsMounting(ctx, t.c, t.ns, c.Name); err != nil {
				return nil, err
			}
			claims = append(claims, s)
			fmt.Fprintf(&b, "%-32s %-8s %-8s %-8s used by: %s\n", s.Name, s.Phase, s.Size, s.StorageClass, strings.Join(s.UsedBy, ", "))
		}
		res := &ops.Result{Summary: fmt.Sprintf("%d claim(s) in %s/%s", len(claims), t.cfg.Name, t.ns), Output: b.String()}
		res.Data, _ = json.Marshal(map[string]any{"claims": claims})
		return res, nil
	})
}
