package kube

import (
	"sort"

	"github.com/hyperops/hyperops/ops/fleet"
	corev1 "k8s.io/api/core/v1"
)

// Ungrouped names the nodes that carry neither a HyperPod instance group nor an EKS node group label.
const Ungrouped = "(ungrouped)"

// NodeGrouping folds a cluster's nodes, then the pods placed on them, into node groups. It is the one reading of
// groups that /hp status, the capacity checks and the capacity report share, so they cannot disagree on a group's
// name, its readiness or its GPUs.
type NodeGrouping struct {
	gpu       corev1.ResourceName
	groups    map[string]*fleet.GroupNodes
	ofNode    map[string]*fleet.GroupNodes
	labels    map[string]string // node → its health label
	order     []string          // node names as added
	instances map[string]fleet.InstanceHealth
}

// NewNodeGrouping counts gpu as the GPU resource (ResourceGPU when empty).
func NewNodeGrouping(gpu corev1.ResourceName) *NodeGrouping {
	if gpu == "" {
		gpu = ResourceGPU
	}
	return &NodeGrouping{gpu: gpu, groups: map[string]*fleet.GroupNodes{}, ofNode: map[string]*fleet.GroupNodes{},
		labels: map[string]string{}, instances: map[string]fleet.InstanceHealth{}}
}

// GPU is the resource counted as GPUs.
func (g *NodeGrouping) GPU() corev1.ResourceName { return g.gpu }

// AddNode counts a node in its group: nodes, Ready, HyperPod health labels, GPUs allocatable.
func (g *NodeGrouping) AddNode(n *corev1.Node) {
	name := NodeGroupOf(n)
	grp, ok := g.groups[name]
	if !ok {
		grp = &fleet.GroupNodes{Group: name, InstanceType: n.Labels[LabelInstanceType]}
		g.groups[name] = grp
	}
	g.ofNode[n.Name] = grp
	g.order = append(g.order, n.Name)
	grp.Nodes++
	if NodeReady(n) {
		grp.Ready++
	}
	if h := healthLabel(n); h != "" {
		g.labels[n.Name] = h
		if grp.Health == nil {
			grp.Health = map[string]int{}
		}
		grp.Health[h]++
	}
	if q, ok := n.Status.Allocatable[g.gpu]; ok {
		grp.GPUAllocatable += q.Value()
	}
}

// AddPod counts the GPUs a live pod requests against the group of the node it is placed on, and reports whether it
// was placed on a node AddNode counted. Finished pods hold no GPUs and are not counted.
func (g *NodeGrouping) AddPod(p *corev1.Pod) (placed bool) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Spec.NodeName == "" {
		return false
	}
	grp, ok := g.ofNode[p.Spec.NodeName]
	if ok {
		grp.GPURequested += PodRequest(p, g.gpu)
	}
	return ok
}

// AddInstances adds what HyperPod says of its instances (ListClusterNodes), matched to nodes by instance ID: a
// HyperPod node is named hyperpod-<instance id>. Instances without a node are left out: the counts are the
// cluster's nodes.
func (g *NodeGrouping) AddInstances(instances []fleet.InstanceHealth) {
	for _, in := range instances {
		g.instances[in.InstanceID] = in
	}
}

// Groups returns the groups by name, each with its nodes' health.
func (g *NodeGrouping) Groups() []fleet.GroupNodes {
	out := make([]fleet.GroupNodes, 0, len(g.groups))
	health := map[*fleet.GroupNodes]*fleet.GroupNodes{}
	for _, grp := range g.groups {
		c := *grp
		c.Unhealthy = nil
		health[grp] = &c
	}
	for _, name := range g.order {
		grp := health[g.ofNode[name]]
		id := instanceIDOf(name)
		in, known := g.instances[id]
		h := ClassifyNode(g.labels[name], in.Status, in.Message)
		grp.States.Add(h.State)
		if h.State == fleet.HealthHealthy {
			continue
		}
		h.Node = name
		if known {
			h.InstanceID = id
		}
		grp.Unhealthy = append(grp.Unhealthy, h)
	}
	for _, grp := range health {
		out = append(out, *grp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// NodeGroupOf names a node's group: its HyperPod instance group, else its EKS node group, else Ungrouped.
func NodeGroupOf(n *corev1.Node) string {
	if g := n.Labels[LabelHyperPodGroup]; g != "" {
		return g
	}
	if g := n.Labels[LabelEKSNodeGroup]; g != "" {
		return g
	}
	return Ungrouped
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodRequest is the pod's effective request of the resource, as the scheduler counts it: the larger of the sum of
// its containers (sidecars included) and its largest init container, plus overhead. A limit without a request counts
// as the request (the API server defaults it so for extended resources).
func PodRequest(p *corev1.Pod, res corev1.ResourceName) int64 {
	var sum, initMax int64
	for i := range p.Spec.Containers {
		sum += containerRequest(&p.Spec.Containers[i], res)
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += containerRequest(c, res) // sidecars run alongside the containers
			continue
		}
		initMax = max(initMax, containerRequest(c, res))
	}
	if q, ok := p.Spec.Overhead[res]; ok {
		sum += q.Value()
	}
	return max(sum, initMax)
}

func containerRequest(c *corev1.Container, res corev1.ResourceName) int64 {
	if q, ok := c.Resources.Requests[res]; ok {
		return q.Value()
	}
	if q, ok := c.Resources.Limits[res]; ok {
		return q.Value()
	}
	return 0
}
