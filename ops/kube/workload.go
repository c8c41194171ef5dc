package kube

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Labels HyperOps puts on what it creates.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByValue     = "hyperops"
	LabelRequestID     = "hyperops.io/request-id"
	LabelInitiatorKind = "hyperops.io/initiator-kind"
	// LabelWorkload is on pods, so the watcher maps a pod back to its workload.
	LabelWorkload = "hyperops.io/workload"
	// LabelKueueQueue submits a job through Kueue's LocalQueue.
	LabelKueueQueue = "kueue.x-k8s.io/queue-name"
	// LabelInstanceType is the well-known node label of the instance type.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// ResourceGPU is the extended resource of NVIDIA GPUs.
	ResourceGPU = corev1.ResourceName("nvidia.com/gpu")
)

// ManagedSelector selects every object HyperOps manages.
const ManagedSelector = LabelManagedBy + "=" + ManagedByValue

// objectLabels are on every object HyperOps creates: managed-by, request id, initiator kind and required labels.
func objectLabels(cl *config.Cluster, req *ops.Request) map[string]string {
	l := maps.Clone(cl.RequiredLabels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManagedBy] = ManagedByValue
	l[LabelRequestID] = req.ID
	kind := string(req.Initiator.Kind)
	if kind == "" {
		kind = string(ops.Human)
	}
	l[LabelInitiatorKind] = kind
	return l
}

// podLabels are on pod templates. The request id stays off them: a new request for the same workload must not
// change the template (a Job's is immutable, a Deployment's would roll).
func podLabels(cl *config.Cluster, workload string) map[string]string {
	l := maps.Clone(cl.RequiredLabels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManagedBy] = ManagedByValue
	l[LabelWorkload] = workload
	return l
}

// container is what the operations ask of a pod's one container.
type container struct {
	name    string
	image   string
	command []string
	gpus    int64
	cpu     string
	memory  string
}

func (k container) build() corev1.Container {
	c := corev1.Container{Name: k.name, Image: k.image, Command: k.command}
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	if k.gpus > 0 {
		q := *resource.NewQuantity(k.gpus, resource.DecimalSI)
		req[ResourceGPU], lim[ResourceGPU] = q, q
	}
	if k.cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(k.cpu)
	}
	if k.memory != "" {
		q := resource.MustParse(k.memory)
		req[corev1.ResourceMemory], lim[corev1.ResourceMemory] = q, q
	}
	if len(req) > 0 {
		c.Resources.Requests = req
	}
	if len(lim) > 0 {
		c.Resources.Limits = lim
	}
	return c
}

// podTemplate places a pod: service account from the profile, and node selector and tolerations of GPU nodes when
// it asks for GPUs.
func podTemplate(cl *config.Cluster, workload, sa string, restart corev1.RestartPolicy, k container) corev1.PodTemplateSpec {
	spec := corev1.PodSpec{
		ServiceAccountName: sa,
		RestartPolicy:      restart,
		Containers:         []corev1.Container{k.build()},
	}
	if k.gpus > 0 {
		if len(cl.GPUNodes.NodeSelector) > 0 {
			spec.NodeSelector = maps.Clone(cl.GPUNodes.NodeSelector)
		}
		for _, t := range cl.GPUNodes.Tolerations {
			op := corev1.TolerationOpEqual
			if t.Operator == string(corev1.TolerationOpExists) {
				op = corev1.TolerationOpExists
			}
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: t.Key, Operator: op, Value: t.Value,
				Effect: corev1.TaintEffect(t.Effect)})
		}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels(cl, workload)}, Spec: spec}
}

// resourceCaps checks cpu= and memory= per pod: they must parse and fit on the largest node of the cluster, since a
// pod asking for more could never be scheduled.
func resourceCaps(ctx context.Context, t target, cpu, memory string) error {
	if cpu == "" && memory == "" {
		return nil
	}
	nodes, err := t.baseNodes(ctx)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return nil // no node to measure against (scaled to zero): the scheduler will tell
	}
	var maxCPU, maxMem resource.Quantity
	for _, n := range nodes {
		if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok && q.Cmp(maxCPU) > 0 {
			maxCPU = q
		}
		if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok && q.Cmp(maxMem) > 0 {
			maxMem = q
		}
	}
	if cpu != "" {
		if _, err := checkQuantity("cpu", cpu, maxCPU, fmt.Sprintf("the largest node of %s allocates %s CPU", t.cfg.Name, maxCPU.String())); err != nil {
			return err
		}
	}
	if memory != "" {
		if _, err := checkQuantity("memory", memory, maxMem, fmt.Sprintf("the largest node of %s allocates %s memory", t.cfg.Name, maxMem.String())); err != nil {
			return err
		}
	}
	return nil
}

// checkResourceSyntax parses cpu= and memory= without the cluster (Validate has no I/O).
func checkResourceSyntax(p ops.Params) error {
	for _, f := range []string{"cpu", "memory"} {
		if v := p.String(f); v != "" {
			if _, err := checkQuantity(f, v, resource.MustParse("1Ei"), "sanity bound"); err != nil {
				return err
			}
		}
	}
	return nil
}
