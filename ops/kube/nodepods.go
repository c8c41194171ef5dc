package kube

import (
	"context"
	"slices"
	"sort"

	"github.com/hyperops/hyperops/ops/fleet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ fleet.NodePodReader = (*Clusters)(nil)

// PodsOnNodes implements fleet.NodePodReader: the pods bound to the nodes that have not finished, DaemonSet pods
// left out (they come back with the node), sorted by node, namespace and name.
func (cs *Clusters) PodsOnNodes(ctx context.Context, cluster string, nodes []string) ([]fleet.NodePod, error) {
	c, err := cs.Get(cluster)
	if err != nil {
		return nil, err
	}
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, listOptions(""))
	if err != nil {
		return nil, clusterError(err, "list pods")
	}
	return podsOnNodes(pods.Items, nodes), nil
}

func podsOnNodes(pods []corev1.Pod, nodes []string) []fleet.NodePod {
	var out []fleet.NodePod
	for i := range pods {
		p := &pods[i]
		if !slices.Contains(nodes, p.Spec.NodeName) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		owner := ""
		if ref := metav1.GetControllerOf(p); ref != nil {
			if ref.Kind == "DaemonSet" {
				continue
			}
			owner = ref.Kind + " " + ref.Name
		}
		out = append(out, fleet.NodePod{Node: p.Spec.NodeName, Namespace: p.Namespace, Name: p.Name, Owner: owner, GPUs: PodRequest(p, ResourceGPU)})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}
