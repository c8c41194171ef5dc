package kube

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperops/hyperops/ops"
)

// addGPUCost adds the hourly cost of gpus GPUs held by pods of spec, podGPUs GPUs each (negative when released):
// the GPU share of a node × the node's price. GPUs added are priced at the most expensive type per GPU the pods may
// land on, since a budget must count the worst case; GPUs freed at the least expensive, so a saving is never
// overstated. The GPUs themselves count in the plan's Cost.GPUs, which GPU and GPU-hour budgets charge.
func (r *registry) addGPUCost(ctx context.Context, t target, c *ops.Cost, item string, spec corev1.PodSpec, podGPUs, gpus int64) error {
	if gpus == 0 {
		return nil
	}
	pl, err := r.placementOf(ctx, t, spec, podGPUs)
	if err != nil {
		return err
	}
	c.GPUs += int(gpus)
	pl.addTo(c, item, gpus)
	return nil
}

// addReleasedGPUCost adds the GPUs the live workload have frees when it is stopped or deleted.
func (r *registry) addReleasedGPUCost(ctx context.Context, t target, c *ops.Cost, item string, have *unstructured.Unstructured) error {
	spec, podGPUs := podSpecOf(have)
	return r.addGPUCost(ctx, t, c, item, spec, podGPUs, -workloadGPUs(have))
}

// addTo prices gpus at the placement's worst case (see addGPUCost) and says which type that is. A type without a
// price makes the estimate incomplete: the plan says so and risk treats it as expensive.
func (pl placement) addTo(c *ops.Cost, item string, gpus int64) {
	var known []gpuNode
	for _, g := range pl.types {
		if g.known {
			known = append(known, g)
		} else {
			c.Unknown = append(c.Unknown, g.instanceType)
		}
	}
	if pl.unlabelled {
		c.Unknown = append(c.Unknown, "GPU nodes without the "+LabelInstanceType+" label")
	}
	if len(known) == 0 {
		if len(pl.types) == 0 && !pl.unlabelled {
			c.Unknown = append(c.Unknown, "GPU nodes (none found: list the GPU types in instanceTypes or set gpuNodes.nodeSelector "+
				LabelInstanceType+")")
		}
		return
	}
	byRate := func(a, b gpuNode) int { return cmp.Compare(a.perGPU(), b.perGPU()) }
	g := slices.MaxFunc(known, byRate)
	if gpus < 0 {
		g = slices.MinFunc(known, byRate)
	}
	share := float64(gpus) / float64(g.gpus)
	c.AddHourly(fmt.Sprintf("%s: %d GPU(s) of %s (%d GPUs a node)", item, gpus, g.instanceType, g.gpus), share, g.price.Hourly, "node-hour")
	c.Source = g.price.Source
	c.PricedAt = pl.pricedAt(g.instanceType, gpus < 0)
	if len(pl.types) > 1 {
		c.MayLandOn = make([]string, len(pl.types))
		for i, t := range pl.types {
			c.MayLandOn[i] = t.instanceType
		}
	}
}

// pricedAt says in words which type the estimate uses and why.
func (pl placement) pricedAt(chosen string, frees bool) string {
	switch {
	case len(pl.types) == 1 && !pl.unlabelled && frees:
		return "priced at " + chosen + ", the only GPU type its pods may run on"
	case len(pl.types) == 1 && !pl.unlabelled:
		return "priced at " + chosen + ", the only GPU type its pods may land on"
	case frees:
		return "priced at " + chosen + ", the least expensive type its pods may run on, so the saving is not overstated"
	}
	return "priced at " + chosen + ", the most expensive type its pods may land on"
}

// nodeList memoizes one LIST of a cluster's nodes: the builders of one plan (resource caps, GPU pricing) share it,
// so a submit lists nodes once.
type nodeList struct {
	once  sync.Once
	items []corev1.Node
	err   error
}

// baseNodes lists the cluster's nodes through the executor's own clients, once per resolved target.
func (t target) baseNodes(ctx context.Context) ([]corev1.Node, error) {
	if t.nodes == nil {
		return listNodes(ctx, t.base)
	}
	t.nodes.once.Do(func() { t.nodes.items, t.nodes.err = listNodes(ctx, t.base) })
	return t.nodes.items, t.nodes.err
}

func listNodes(ctx context.Context, c *Cluster) ([]corev1.Node, error) {
	l, err := c.Kube.CoreV1().Nodes().List(ctx, listOptions(""))
	if err != nil {
		return nil, clusterError(err, "list nodes")
	}
	return l.Items, nil
}
