package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/pricing"
)

// gpuNode is one instance type a workload's GPU pods may land on: its GPUs a node and its price.
type gpuNode struct {
	instanceType string
	gpus         int64
	price        ops.Price
	known        bool // priced, with its GPUs a node known
}

// perGPU is the hourly price of one of the type's GPUs.
func (g gpuNode) perGPU() float64 { return g.price.Hourly / float64(g.gpus) }

// placement is every GPU instance type a workload's pods may be scheduled on, sorted by name; a budget counts the
// most expensive of them, since the scheduler, not the plan, picks where the pods go.
type placement struct {
	types []gpuNode
	// unlabelled counts matching GPU nodes without the instance-type label: somewhere the pods may land, unpriced.
	unlabelled bool
}

// placementOf finds the GPU instance types pods of spec, asking podGPUs GPUs each, may land on: the types of the
// cluster's GPU nodes that match the pods' node selector and required node affinity, and the NVIDIA GPU types of
// the cluster's instanceTypes that those constraints allow (see instanceTypeAllows), since capacity may add nodes of
// them while the pods wait or run. Types with fewer GPUs a node than a pod asks for are left out when another type
// fits. A configured type counts whether it has nodes today or not: a group scaled to zero may grow under a waiting job.
func (r *registry) placementOf(ctx context.Context, t target, spec corev1.PodSpec, podGPUs int64) (placement, error) {
	nodes, err := t.baseNodes(ctx)
	if err != nil {
		return placement{}, err
	}
	perType, unlabelled := landingTypes(t.cfg, nodes, spec)
	pl := placement{unlabelled: unlabelled}
	for _, it := range slices.Sorted(maps.Keys(perType)) {
		gpus := perType[it]
		if n := int64(t.cfg.GPUNodes.GPUsPerNode); n > 0 {
			gpus = n
		} else if s, ok := pricing.Shape(it); ok && gpus == 0 {
			gpus = int64(s.GPUs)
		}
		pl.types = append(pl.types, gpuNode{instanceType: it, gpus: gpus})
	}
	pl.types = fitting(pl.types, podGPUs)
	return pl, r.price(ctx, t, pl.types)
}

// landingTypes maps each instance type pods of spec may land on to the most GPUs one of its nodes allocates (0 for
// a type without nodes); unlabelled says some matching GPU node has no instance-type label.
func landingTypes(cfg *config.Cluster, nodes []corev1.Node, spec corev1.PodSpec) (perType map[string]int64, unlabelled bool) {
	perType = map[string]int64{}
	for _, n := range nodes {
		q, ok := n.Status.Allocatable[ResourceGPU]
		if !ok || q.Value() == 0 || !nodeAllows(spec, n.Name, n.Labels) {
			continue
		}
		if it := n.Labels[LabelInstanceType]; it != "" {
			perType[it] = max(perType[it], q.Value())
		} else {
			unlabelled = true
		}
	}
	for _, it := range cfg.InstanceTypes {
		if _, seen := perType[it]; !seen && nvidiaType(it) && instanceTypeAllows(spec, it) {
			perType[it] = 0
		}
	}
	// Pinned to a type that has no node and is not configured: price it all the same.
	if it := spec.NodeSelector[LabelInstanceType]; it != "" {
		if _, seen := perType[it]; !seen {
			perType[it] = 0
		}
	}
	return perType, unlabelled
}

// fitting leaves out the types a pod of podGPUs GPUs cannot fit on, unless none fits (the scheduler would leave
// the pods pending; the plan still prices every type).
func fitting(types []gpuNode, podGPUs int64) []gpuNode {
	fit := slices.DeleteFunc(slices.Clone(types), func(g gpuNode) bool { return g.gpus > 0 && g.gpus < podGPUs })
	if len(fit) == 0 {
		return types
	}
	return fit
}

// price asks the pricer for each type.
func (r *registry) price(ctx context.Context, t target, types []gpuNode) error {
	if r.pricer == nil {
		return nil
	}
	for i := range types {
		g := &types[i]
		p, ok, err := r.pricer.Price(ctx, t.cfg.Region, g.instanceType)
		if err != nil {
			return fmt.Errorf("price %s: %w", g.instanceType, err)
		}
		g.price, g.known = p, ok && g.gpus > 0
	}
	return nil
}

// nvidiaType reports whether an instance type is known to carry NVIDIA GPUs (nvidia.com/gpu): Trainium and
// Inferentia accelerators are another resource, and an unknown type may be anything.
func nvidiaType(it string) bool {
	s, ok := pricing.Shape(it)
	return ok && s.GPUs > 0 && s.GPU != "Trainium" && s.GPU != "Inferentia2"
}

// nodeAllows reports whether the scheduler may put a pod of spec on a node with these labels: its node selector and
// its required node affinity. Taints are left out: a taint that keeps the pods off a type today (a node being
// repaired) may be gone tomorrow, and a budget rather counts a type too many than one too few.
func nodeAllows(spec corev1.PodSpec, node string, l map[string]string) bool {
	for k, v := range spec.NodeSelector {
		if l[k] != v {
			return false
		}
	}
	return affinityAllows(spec, func(term corev1.NodeSelectorTerm) bool {
		for _, r := range term.MatchExpressions {
			if !requirementAllows(r, l) {
				return false
			}
		}
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && !requirementAllows(corev1.NodeSelectorRequirement{Key: f.Key, Operator: f.Operator,
				Values: f.Values}, map[string]string{"metadata.name": node}) {
				return false
			}
		}
		return true
	})
}

// LabelComputeType is the label HyperPod puts on its nodes ("hyperpod"); EKS managed node groups' nodes lack it.
const LabelComputeType = "sagemaker.amazonaws.com/compute-type"

// instanceTypeAllows reports whether a pod of spec may land on a node of instance type it that does not exist yet.
// Two labels of such a node are known: its instance type, and whether HyperPod runs it (HyperPod's types are the
// ml.* ones); the pod's constraints on those are judged, and any other label is one the node may carry.
func instanceTypeAllows(spec corev1.PodSpec, it string) bool {
	known := map[string]string{LabelInstanceType: it}
	if strings.HasPrefix(it, "ml.") {
		known[LabelComputeType] = "hyperpod"
	}
	judged := func(key string) bool { return key == LabelInstanceType || key == LabelComputeType }
	for k, v := range spec.NodeSelector {
		if judged(k) && known[k] != v {
			return false
		}
	}
	return affinityAllows(spec, func(term corev1.NodeSelectorTerm) bool {
		for _, r := range term.MatchExpressions {
			if judged(r.Key) && !requirementAllows(r, known) {
				return false
			}
		}
		return true
	})
}

// affinityAllows applies a pod's required node affinity: its terms are ORed, and an empty term matches nothing.
func affinityAllows(spec corev1.PodSpec, term func(corev1.NodeSelectorTerm) bool) bool {
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if (len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0) && term(t) {
			return true
		}
	}
	return false
}

// requirementAllows judges one node selector requirement against labels, as the scheduler does.
func requirementAllows(r corev1.NodeSelectorRequirement, l map[string]string) bool {
	v, has := l[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return r.Operator == corev1.NodeSelectorOpGt && have > want || r.Operator == corev1.NodeSelectorOpLt && have < want
	}
	return false
}

// podSpecOf is the pod spec of a live workload's first pod template and the GPUs one of its pods asks for, for
// pricing what stopping or deleting it frees.
func podSpecOf(u *unstructured.Unstructured) (corev1.PodSpec, int64) {
	var tpl corev1.PodTemplateSpec
	for _, rt := range replicaTemplates(u) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rt.template, &tpl); err == nil {
			return tpl.Spec, templateGPUs(rt.template)
		}
	}
	return tpl.Spec, 0
}
