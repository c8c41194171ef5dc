package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/progress"
)

// AnnotationInferenceSpec shows the parameters a Deployment was deployed with, for people reading the object. It
// is never read back: scale and rollout rebuild the whole desired object (server-side apply drops what the field
// manager no longer sends) from HyperOps's own record of what it applied (AppliedRecords), and a live annotation
// that differs from the applied one is reported as drift.
const AnnotationInferenceSpec = "hyperops.io/inference-spec"

const lockKindInference = "inference"

// maxInferenceReplicas is the guardrail that caps an inference server's replicas.
func maxInferenceReplicas(l config.Limits) int { return l.MaxInferenceReplicas }

func (r *registry) deployInference() ops.Operation {
	spec := ops.Spec{
		Name: "deploy-inference", Domain: "inference", Topic: "infer", Verb: "deploy", Mutates: true, Baseline: ops.RiskLow,
		Summary: "Deploy an inference server (Deployment + Service, readiness probe, rolling update without downtime)",
		Params: []ops.ParamSpec{
			{Name: "name", Kind: ops.KindString, Required: true, Help: "deployment and service name (DNS-1123 label)"},
			{Name: "image", Kind: ops.KindString, Required: true, Help: "container image; must match the cluster's allowed registries"},
			{Name: "replicas", Kind: ops.KindInt, Default: "1", Help: "pods, 1 to limits.maxInferenceReplicas",
				Bound: &ops.Bound{Min: 1, Limit: maxInferenceReplicas}},
			{Name: "gpus", Kind: ops.KindInt, Default: "0", Help: "GPUs per replica (nvidia.com/gpu)", Bound: &ops.Bound{}},
			{Name: "port", Kind: ops.KindInt, Default: "8080", Min: 1, Max: 65535, Help: "container port the Service sends traffic to",
				Bound: &ops.Bound{Min: 1, Max: 65535}},
			{Name: "health-path", Kind: ops.KindString, Default: "/healthz", Help: "HTTP path of the readiness probe"},
			{Name: "command", Kind: ops.KindList, Help: "argv, e.g. python serve.py --port 8080 (no shell)"},
			{Name: "cpu", Kind: ops.KindQuantity, Help: "CPU request per replica"},
			{Name: "memory", Kind: ops.KindQuantity, Help: "memory per replica"},
			{Name: "progress-deadline", Kind: ops.KindDuration, Default: "10m", Help: "how long a rollout may take before it counts as failed"},
		},
		Lock: r.lock(lockKindInference),
		Headline: ops.MustTemplate(`Deploy the inference server {{.Name}} on {{.Target}} — {{.Plural (.Int "replicas" 1) "replica" "replicas"}}` +
			`{{$g := .Int "gpus" 0}}{{if gt $g 0}} × {{.Plural $g "GPU" "GPUs"}}{{end}}`),
		Revert: "deletes the Deployment and Service it created",
	}
	return r.applyOperation(spec, checkInference, func(ctx context.Context, t target, req *ops.Request) (*desired, error) {
		have, err := t.c.getObject(ctx, ResDeployment, t.ns, req.Params.String("name"))
		if err != nil {
			return nil, err
		}
		var before int64
		if have != nil {
			before = workloadGPUs(have)
		}
		d, err := r.buildInference(ctx, t, req, req.Params, before)
		if err != nil {
			return nil, err
		}
		if d.undo, err = r.undoDeploy(ctx, t, have, req.Params.String("name")); err != nil {
			return nil, err
		}
		return d, r.replicasHealth(ctx, t, d)
	}, nil)
}

// replicasHealth says, for a change that starts replicas (a deploy, a scale up, a rollout), which of the nodes
// they may land on are faulty, rebooting or being replaced, and raises the risk as for a training job.
func (r *registry) replicasHealth(ctx context.Context, t target, d *desired) error {
	gpus, _ := d.spec.Int("gpus")
	return r.scheduleHealth(ctx, t, gpus > 0, d)
}

func checkInference(t target, req *ops.Request) error {
	return checkInferenceParams(t, req, req.Params, 1)
}

func checkInferenceParams(t target, req *ops.Request, p ops.Params, minReplicas int64) error {
	if err := checkName("name", p.String("name")); err != nil {
		return err
	}
	if err := checkImage(t.cfg, p.String("image")); err != nil {
		return err
	}
	replicas := p.IntOr("replicas", 1)
	if replicas < minReplicas {
		return ops.Errorf(ops.CodeInvalidArgument, "replicas", fmt.Sprintf("use %d or more", minReplicas), "replicas=%d is below %d", replicas, minReplicas)
	}
	if err := checkLimit(t.cfg, "replicas", replicas, "limits.maxInferenceReplicas", t.cfg.Limits.MaxInferenceReplicas); err != nil {
		return err
	}
	if g := p.IntOr("gpus", 0); g < 0 {
		return ops.Errorf(ops.CodeInvalidArgument, "gpus", "use 0 or more", "gpus=%d is negative", g)
	}
	if port := p.IntOr("port", 8080); port < 1 || port > 65535 {
		return ops.Errorf(ops.CodeInvalidArgument, "port", "use a port from 1 to 65535", "port=%d is not a TCP port", port)
	}
	if hp := p.String("health-path"); hp != "" && !strings.HasPrefix(hp, "/") {
		return ops.Errorf(ops.CodeInvalidArgument, "health-path", "start it with /", "health-path %q is not an absolute path", hp)
	}
	if err := checkCommand(p.List("command")); err != nil {
		return err
	}
	if err := checkResourceSyntax(p); err != nil {
		return err
	}
	_, err := serviceAccount(t.cfg, req.Profile)
	return err
}

// buildInference renders the Deployment and Service for parameters p; beforeGPUs are the GPUs the Deployment
// asks for now (0 when it does not exist), for the cost delta.
func (r *registry) buildInference(ctx context.Context, t target, req *ops.Request, p ops.Params, beforeGPUs int64) (*desired, error) {
	if err := resourceCaps(ctx, t, p.String("cpu"), p.String("memory")); err != nil {
		return nil, err
	}
	name := p.String("name")
	sa, _ := serviceAccount(t.cfg, req.Profile)
	replicas, gpus, port := p.IntOr("replicas", 1), p.IntOr("gpus", 0), int32(p.IntOr("port", 8080))
	deadline, ok := p.Duration("progress-deadline")
	if !ok {
		deadline = 10 * time.Minute
	}
	k := container{name: "server", image: p.String("image"), command: p.List("command"), gpus: gpus, cpu: p.String("cpu"), memory: p.String("memory")}
	tpl := podTemplate(t.cfg, name, sa, corev1.RestartPolicyAlways, k)
	c := &tpl.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: p.String("health-path"), Port: intstr.FromString("http")}}, PeriodSeconds: 5, FailureThreshold: 3}
	keep, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("record the inference spec: %w", err)
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: t.ns, Labels: objectLabels(t.cfg, req),
		Annotations: map[string]string{AnnotationInferenceSpec: string(keep)}}
	dep := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(replicas)),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: ManagedByValue, LabelWorkload: name}},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}},
		ProgressDeadlineSeconds: ptr.To(int32(deadline / time.Second)),
		Template:                tpl,
	}}
	svcMeta := metav1.ObjectMeta{Name: name, Namespace: t.ns, Labels: objectLabels(t.cfg, req)}
	svc := &corev1.Service{ObjectMeta: svcMeta, Spec: corev1.ServiceSpec{
		Selector: map[string]string{LabelManagedBy: ManagedByValue, LabelWorkload: name},
		Ports:    []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
	}}
	du, err := fromTyped(dep, ResDeployment)
	if err != nil {
		return nil, err
	}
	su, err := fromTyped(svc, ResService)
	if err != nil {
		return nil, err
	}
	d := &desired{summary: fmt.Sprintf("Deployment+Service %s/%s: %d replica(s) × %d GPU(s), %s, port %d", t.ns, name, replicas, gpus, p.String("image"), port),
		spec: p, runsAs: runsAs(req.Profile, sa)}
	d.add(ResDeployment, du)
	d.add(ResService, su)
	d.watch = []ops.ObjectRef{ref(t.cfg.Name, ResDeployment, t.ns, name)}
	d.applies = d.watch
	if err := r.addGPUCost(ctx, t, &d.cost, "inference "+name, tpl.Spec, gpus, gpus*replicas-beforeGPUs); err != nil {
		return nil, err
	}
	return d, nil
}

// rebuildInference builds the Deployment and Service of a change to an inference server: the parameters HyperOps
// applied last (its own record, never the live object) with the one parameter the request changes, checked by
// every guardrail deploy runs, as the configuration stands now. It returns the live Deployment and what HyperOps
// applied too, for the plan's drift.
func (r *registry) rebuildInference(ctx context.Context, t target, req *ops.Request, param string, value any) (
	*unstructured.Unstructured, *vouched, *desired, error) {
	have, v, err := r.vouchedInference(ctx, t, req.Params.String("name"))
	if err != nil {
		return nil, nil, nil, err
	}
	p := maps.Clone(v.params)
	p[param] = value
	// 0 replicas are fine here: a server scaled to zero may be scaled up or rolled.
	if err := checkInferenceParams(t, req, p, 0); err != nil {
		return nil, nil, nil, err
	}
	d, err := r.buildInference(ctx, t, req, p, workloadGPUs(have))
	if err != nil {
		return nil, nil, nil, err
	}
	return have, v, d, nil
}

func (r *registry) scaleInference() ops.Operation {
	spec := ops.Spec{
		Name: "scale-inference", Domain: "inference", Topic: "infer", Verb: "scale", Mutates: true, Baseline: ops.RiskLow,
		Summary: "Change the replicas of an inference Deployment (down or to zero is high risk)",
		Params: []ops.ParamSpec{nameParam,
			{Name: "replicas", Kind: ops.KindInt, Required: true, Help: "new replicas, 0 to limits.maxInferenceReplicas",
				Bound: &ops.Bound{Limit: maxInferenceReplicas}}},
		Lock: r.lock(lockKindInference),
		Headline: ops.MustTemplate(`Scale the inference server {{.Name}} on {{.Target}}` +
			`{{with .Change}} from {{.From}} to {{.To}}{{else}} to {{.Plural (.Int "replicas" 0) "replica" "replicas"}}{{end}}`),
		Destructive: true,
		Revert:      "scales the server back to the replicas it had",
	}
	check := func(t target, req *ops.Request) error {
		if err := checkName("name", req.Params.String("name")); err != nil {
			return err
		}
		n, _ := req.Params.Int("replicas")
		if n < 0 {
			return ops.Errorf(ops.CodeInvalidArgument, "replicas", "use 0 or more", "replicas=%d is negative", n)
		}
		return checkLimit(t.cfg, "replicas", n, "limits.maxInferenceReplicas", t.cfg.Limits.MaxInferenceReplicas)
	}
	return r.applyOperation(spec, check, func(ctx context.Context, t target, req *ops.Request) (*desired, error) {
		want, _ := req.Params.Int("replicas")
		have, v, d, err := r.rebuildInference(ctx, t, req, "replicas", want)
		if err != nil {
			return nil, err
		}
		name := req.Params.String("name")
		before, _, _ := unstructured.NestedInt64(have.Object, "spec", "replicas")
		d.summary = fmt.Sprintf("scale %s/%s from %d to %d replica(s)", t.ns, name, before, want)
		switch {
		case want == 0 && before > 0:
			d.risk.Add(ops.RiskHigh, "scales %s to zero: it stops serving", name)
		case want < before:
			d.risk.Add(ops.RiskHigh, "scales %s down from %d to %d: less capacity to serve", name, before, want)
		}
		reportDrift(d, v, have, "spec.replicas")
		d.undo = undoInference("scale-inference", v, "replicas")
		if want > before {
			return d, r.replicasHealth(ctx, t, d)
		}
		return d, nil
	}, nil)
}

func (r *registry) rolloutInference() ops.Operation {
	spec := ops.Spec{
		Name: "rollout-inference", Domain: "inference", Topic: "infer", Verb: "rollout", Mutates: true, Baseline: ops.RiskLow,
		Summary: "Roll an inference Deployment to a new image and follow it until available or its progress deadline",
		Params: []ops.ParamSpec{nameParam,
			{Name: "image", Kind: ops.KindString, Required: true, Help: "new image; must match the cluster's allowed registries"}},
		Lock:     r.lock(lockKindInference),
		Headline: ops.MustTemplate(`Roll the inference server {{.Name}} on {{.Target}} to {{.Param "image"}}`),
		Revert:   "rolls the server back to the image it replaced",
	}
	check := func(t target, req *ops.Request) error {
		if err := checkName("name", req.Params.String("name")); err != nil {
			return err
		}
		return checkImage(t.cfg, req.Params.String("image"))
	}
	build := func(ctx context.Context, t target, req *ops.Request) (*desired, error) {
		image := req.Params.String("image")
		have, v, d, err := r.rebuildInference(ctx, t, req, "image", image)
		if err != nil {
			return nil, err
		}
		d.summary = fmt.Sprintf("roll %s/%s from %s to %s (maxUnavailable 0)", t.ns, req.Params.String("name"), v.params.String("image"), image)
		reportDrift(d, v, have, "spec.template.spec.containers[0].image")
		d.undo = undoInference("rollout-inference", v, "image")
		return d, r.replicasHealth(ctx, t, d)
	}
	return r.applyOperation(spec, check, build, func(ctx context.Context, t target, req *ops.Request, res *ops.Result) error {
		return r.followRollout(ctx, t, req.Params.String("name"), res)
	})
}

// followRollout polls the Deployment until its rollout is available or has failed its progress deadline.
func (r *registry) followRollout(ctx context.Context, t target, name string, res *ops.Result) error {
	tick := time.NewTicker(r.poll())
	defer tick.Stop()
	last := ""
	for {
		dep, err := t.c.Kube.AppsV1().Deployments(t.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return clusterError(err, "follow the rollout of %s/%s", t.ns, name)
		}
		state, why := DeploymentState(dep)
		if msg := state + " " + why; msg != last {
			progress.Note(ctx, "rollout of %s: %s", name, msg)
			last = msg
		}
		switch state {
		case StateAvailable, StateScaledDown:
			res.Details = append(res.Details, ops.Detail{Label: "rollout", Value: state})
			return nil
		case StateFailed:
			return ops.Errorf(ops.CodeClusterUnavailable, "image", "check the pods with "+ops.Ask("infer status name="+name)+"; roll back with the previous image",
				"rollout of %s/%s failed: %s", t.ns, name, why)
		}
		select {
		case <-ctx.Done():
			return ops.Wrap(ctx.Err(), ops.CodeClusterUnavailable, "", "follow it with "+ops.Ask("infer status name="+name),
				"stopped following the rollout of %s/%s while %s", t.ns, name, why)
		case <-tick.C:
		}
	}
}

func (r *registry) poll() time.Duration {
	if r.pollEvery > 0 {
		return r.pollEvery
	}
	return 2 * time.Second
}

func (r *registry) deleteInference() ops.Operation {
	spec := ops.Spec{
		Name: "delete-inference", Domain: "inference", Topic: "infer", Verb: "delete", Mutates: true, Baseline: ops.RiskHigh,
		Summary:     "Delete an inference Deployment and its Service (volumes are never touched)",
		Params:      []ops.ParamSpec{nameParam},
		Lock:        r.lock(lockKindInference),
		Headline:    ops.MustTemplate(`Delete the inference server {{.Name}} on {{.Target}} (its volumes are kept)`),
		Destructive: true,
		Revert:      "deploys the server again as it was, its Deployment and its Service",
	}
	return r.deleteOperation(spec, checkNameOnly, func(ctx context.Context, t target, req *ops.Request) (*deletion, error) {
		name := req.Params.String("name")
		dep, err := t.c.getObject(ctx, ResDeployment, t.ns, name)
		if err != nil {
			return nil, err
		}
		svc, err := t.c.getObject(ctx, ResService, t.ns, name)
		if err != nil {
			return nil, err
		}
		for _, o := range []struct {
			res Resource
			u   *unstructured.Unstructured
		}{{ResDeployment, dep}, {ResService, svc}} {
			if o.u != nil {
				if err := requireManaged(o.res, o.u); err != nil {
					return nil, err
				}
			}
		}
		d := &deletion{objects: []doomed{{ResDeployment, t.ns, name, dep}, {ResService, t.ns, name, svc}},
			keep:    "persistent volume claims are kept: delete them separately with delete-storage",
			summary: fmt.Sprintf("delete Deployment and Service %s/%s", t.ns, name)}
		if dep == nil && svc == nil {
			d.summary = fmt.Sprintf("inference %s/%s is already gone", t.ns, name)
			return d, nil
		}
		d.risk.Add(ops.RiskHigh, "deleting %s stops serving its traffic", name)
		if dep != nil {
			if err := r.addReleasedGPUCost(ctx, t, &d.cost, "delete "+name, dep); err != nil {
				return nil, err
			}
		}
		return d, nil
	})
}

// inferenceStatus is get-inference's machine-readable answer.
type inferenceStatus struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	State     string   `json:"state"`
	Reason    string   `json:"reason,omitempty"`
	Image     string   `json:"image"`
	Replicas  int32    `json:"replicas"`
	Available int32    `json:"available"`
	Updated   int32    `json:"updated"`
	Pods      []string `json:"pods,omitempty"`
	Events    []string `json:"events,omitempty"`
}

func (r *registry) getInference() ops.Operation {
	spec := ops.Spec{
		Name: "get-inference", Domain: "inference", Topic: "infer", Verb: "status", Baseline: ops.RiskLow,
		Summary: "Show an inference Deployment: rollout state, replicas, pods and recent events",
		Params:  []ops.ParamSpec{nameParam},
	}
	return r.readOperation(spec, checkNameOnly, func(ctx context.Context, t target, req *ops.Request) (*ops.Result, error) {
		name := req.Params.String("name")
		dep, err := t.c.Kube.AppsV1().Deployments(t.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, ops.Errorf(ops.CodeNotFound, "name", "deploy it with "+ops.Ask("infer deploy"), "Deployment %s/%s not found", t.ns, name)
			}
			return nil, clusterError(err, "read Deployment %s/%s", t.ns, name)
		}
		st := inferenceStatus{Name: name, Namespace: t.ns, Replicas: ptr.Deref(dep.Spec.Replicas, 1),
			Available: dep.Status.AvailableReplicas, Updated: dep.Status.UpdatedReplicas}
		if len(dep.Spec.Template.Spec.Containers) > 0 {
			st.Image = dep.Spec.Template.Spec.Containers[0].Image
		}
		st.State, st.Reason = DeploymentState(dep)
		if _, st.Pods, st.Events, err = workloadActivity(ctx, t.c, t.ns, name); err != nil {
			return nil, err
		}
		res := &ops.Result{Summary: fmt.Sprintf("inference %s/%s is %s: %d/%d available, image %s", t.ns, name, st.State, st.Available, st.Replicas, st.Image),
			Objects: []ops.ObjectRef{ref(t.cfg.Name, ResDeployment, t.ns, name)}}
		res.Details = activityDetails(st.Pods, st.Events)
		res.Data, _ = json.Marshal(st)
		return res, nil
	})
}
