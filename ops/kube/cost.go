package kube

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hyperops/hyperops/ops"
)

// gpuNode is what one GPU node of a cluster costs and offers.
type gpuNode struct {
	instanceType string
	gpus         int64
	price        ops.Price
	known        bool
}

// gpuNodeOf finds the instance type of a cluster's GPU nodes (the gpuNodes node selector's instance-type, else the
// most common type among the nodes carrying GPUs that match the selector), its GPUs and its price.
func (r *registry) gpuNodeOf(ctx context.Context, t target) (gpuNode, error) {
	g := gpuNode{instanceType: t.cfg.GPUNodes.NodeSelector[LabelInstanceType], gpus: int64(t.cfg.GPUNodes.GPUsPerNode)}
	if g.instanceType == "" || g.gpus == 0 {
		nodes, err := t.baseNodes(ctx)
		if err != nil {
			return g, err
		}
		sel := labels.SelectorFromSet(t.cfg.GPUNodes.NodeSelector)
		count := map[string]int{}
		perType := map[string]int64{}
		for _, n := range nodes {
			q, ok := n.Status.Allocatable[ResourceGPU]
			if !ok || q.Value() == 0 || !sel.Matches(labels.Set(n.Labels)) {
				continue
			}
			it := n.Labels[LabelInstanceType]
			count[it]++
			perType[it] = max(perType[it], q.Value())
		}
		if g.instanceType == "" {
			g.instanceType = mostCommon(count)
		}
		if g.gpus == 0 {
			g.gpus = perType[g.instanceType]
		}
	}
	if g.gpus == 0 {
		if s, ok := ops.Shape(g.instanceType); ok {
			g.gpus = int64(s.GPUs)
		}
	}
	if g.instanceType == "" || r.pricer == nil {
		return g, nil
	}
	p, ok, err := r.pricer.Price(ctx, t.cfg.Region, g.instanceType)
	if err != nil {
		return g, fmt.Errorf("price %s: %w", g.instanceType, err)
	}
	g.price, g.known = p, ok && g.gpus > 0
	return g, nil
}

func mostCommon(count map[string]int) string {
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best := ""
	for _, k := range keys {
		if best == "" || count[k] > count[best] {
			best = k
		}
	}
	return best
}

// addGPUCost adds the hourly cost of gpus (negative when released): the GPU share of a node × the node's price;
// the GPUs themselves count in the plan's Cost.GPUs, which GPU and GPU-hour budgets charge.
func addGPUCost(c *ops.Cost, g gpuNode, item string, gpus int64) {
	if gpus == 0 {
		return
	}
	c.GPUs += int(gpus)
	if !g.known {
		name := g.instanceType
		if name == "" {
			name = "GPU nodes (instance type not found: set gpuNodes.nodeSelector " + LabelInstanceType + ")"
		}
		c.Unknown = append(c.Unknown, name)
		return
	}
	share := float64(gpus) / float64(g.gpus)
	c.AddHourly(fmt.Sprintf("%s: %d GPU(s) of %s (%d GPUs a node)", item, gpus, g.instanceType, g.gpus), share, g.price.Hourly, "node-hour")
	c.Source = g.price.Source
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
