package kube

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// The training kinds of submit-training-job kind=.
const (
	TrainingJob      = "job"
	TrainingPyTorch  = "pytorchjob"
	TrainingHyperPod = "hyperpod"
)

// trainingKinds maps kind= to the resource it creates.
var trainingKinds = map[string]Resource{TrainingJob: ResJob, TrainingPyTorch: ResPyTorchJob, TrainingHyperPod: ResHyperPod}

// lockKindTraining is the lock scope kind of every training operation, whatever the job kind: a name is one job.
const lockKindTraining = "training"

var trainingKindParam = ops.ParamSpec{Name: "kind", Kind: ops.KindString, Default: TrainingJob,
	Enum: []string{TrainingJob, TrainingPyTorch, TrainingHyperPod},
	Help: "job (batch/v1 Job), pytorchjob (Kubeflow PyTorchJob) or hyperpod (HyperPodPyTorchJob)"}

func (r *registry) submitTrainingJob() ops.Operation {
	spec := ops.Spec{
		Name: "submit-training-job", Domain: "training", Topic: "train", Verb: "submit", Mutates: true, Baseline: ops.RiskLow,
		Summary: "Submit a training job (Job, PyTorchJob or HyperPodPyTorchJob) with GPUs, a deadline and guardrails",
		Params: []ops.ParamSpec{
			{Name: "name", Kind: ops.KindString, Required: true, Help: "job name (DNS-1123 label)"},
			{Name: "image", Kind: ops.KindString, Required: true, Help: "container image; must match the cluster's allowed registries"},
			{Name: "replicas", Kind: ops.KindInt, Default: "1", Help: "pods (workers) of the job, at most limits.maxTrainingReplicas",
				Bound: &ops.Bound{Min: 1, Limit: func(l config.Limits) int { return l.MaxTrainingReplicas }}},
			{Name: "gpus", Kind: ops.KindInt, Default: "0", Help: "GPUs per replica (nvidia.com/gpu); replicas × gpus at most limits.maxGPUsPerJob",
				Bound: &ops.Bound{Limit: func(l config.Limits) int { return l.MaxGPUsPerJob }}},
			trainingKindParam,
			{Name: "max-hours", Kind: ops.KindDuration, Help: "deadline (activeDeadlineSeconds), e.g. 12 or 90m; default and cap limits.maxTrainingHours"},
			{Name: "queue", Kind: ops.KindString, Help: "Kueue LocalQueue; only the cluster's configured queue (the default when one is set)"},
			{Name: "command", Kind: ops.KindList, Help: "argv, e.g. python train.py --epochs 3 (no shell)"},
			{Name: "cpu", Kind: ops.KindQuantity, Help: "CPU request per replica, e.g. 8"},
			{Name: "memory", Kind: ops.KindQuantity, Help: "memory per replica, e.g. 64Gi"},
		},
		Lock: r.lock(lockKindTraining),
		Headline: ops.MustTemplate(`Train {{.Name}} on {{.Target}} — {{$r := .Int "replicas" 1}}{{$g := .Int "gpus" 0}}` +
			`{{if gt $g 0}}{{.Count $r}} × {{.Plural $g "GPU" "GPUs"}}{{else}}{{.Plural $r "replica" "replicas"}}, no GPUs{{end}}` +
			`{{with .RunTime}}, up to {{.}}{{else}}{{with $.Duration "max-hours"}}, up to {{.}}{{end}}{{end}}`),
		Revert: "stops the job; what it computed and wrote stays",
	}
	return r.applyOperation(spec, checkTraining, func(ctx context.Context, t target, req *ops.Request) (*desired, error) {
		d, err := r.buildTraining(ctx, t, req)
		if err != nil {
			return nil, err
		}
		name, kind := req.Params.String("name"), req.Params.String("kind")
		d.undo, err = r.undoCreate(ctx, t, trainingKinds[kind], name, "stop-training-job", ops.Params{"name": name, "kind": kind},
			"stops the job "+name+"; what it computed and wrote stays")
		return d, err
	}, nil)
}

func checkTraining(t target, req *ops.Request) error {
	p := req.Params
	if err := checkName("name", p.String("name")); err != nil {
		return err
	}
	if err := checkImage(t.cfg, p.String("image")); err != nil {
		return err
	}
	replicas := p.IntOr("replicas", 1)
	if replicas < 1 {
		return ops.Errorf(ops.CodeInvalidArgument, "replicas", "use 1 or more", "replicas=%d: a job needs at least one", replicas)
	}
	if err := checkLimit(t.cfg, "replicas", replicas, "limits.maxTrainingReplicas", t.cfg.Limits.MaxTrainingReplicas); err != nil {
		return err
	}
	if gpus := p.IntOr("gpus", 0); gpus != 0 {
		total, ok := ops.MulCount(gpus, replicas)
		if !ok {
			return ops.Errorf(ops.CodeInvalidArgument, "gpus", fmt.Sprintf("use at most %d GPUs in all", t.cfg.Limits.MaxGPUsPerJob),
				"gpus=%d × replicas=%d is too large to count", gpus, replicas)
		}
		if err := checkLimit(t.cfg, "gpus", total, "limits.maxGPUsPerJob", t.cfg.Limits.MaxGPUsPerJob); err != nil {
			return gpusError(err, gpus, replicas)
		}
	}
	if _, err := trainingDeadline(t, p); err != nil {
		return err
	}
	if q := p.String("queue"); q != "" && q != t.cfg.Kueue.Queue {
		next := "leave queue= out"
		if t.cfg.Kueue.Queue != "" {
			next = "use queue=" + t.cfg.Kueue.Queue + " or leave it out"
		}
		return ops.Errorf(ops.CodeInvalidArgument, "queue", next, "queue %q is not clusters[%s].kueue.queue (%q)", q, t.cfg.Name, t.cfg.Kueue.Queue)
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

func gpusError(err error, gpus, replicas int64) error {
	e := ops.AsError(err)
	if replicas > 1 {
		e.Message = fmt.Sprintf("%s (gpus=%d × replicas=%d)", e.Message, gpus, replicas)
	}
	return e
}

// trainingDeadline is max-hours, defaulting to and capped by limits.maxTrainingHours.
func trainingDeadline(t target, p ops.Params) (time.Duration, error) {
	limit := time.Duration(t.cfg.Limits.MaxTrainingHours) * time.Hour
	if limit == 0 {
		return 0, ops.Errorf(ops.CodeQuotaExceeded, "max-hours", "ask the platform team to set clusters["+t.cfg.Name+"].limits.maxTrainingHours",
			"clusters[%s].limits.maxTrainingHours is 0, which forbids training", t.cfg.Name)
	}
	d, ok := p.Duration("max-hours")
	if !ok {
		return limit, nil
	}
	if d > limit {
		return 0, ops.Errorf(ops.CodeQuotaExceeded, "max-hours", fmt.Sprintf("use at most %dh", t.cfg.Limits.MaxTrainingHours),
			"max-hours=%.4g is more than %s allows: at most %d hours (clusters[%s].limits.maxTrainingHours=%d)", d.Hours(), t.cfg.Name,
			t.cfg.Limits.MaxTrainingHours, t.cfg.Name, t.cfg.Limits.MaxTrainingHours)
	}
	return d, nil
}

func (r *registry) buildTraining(ctx context.Context, t target, req *ops.Request) (*desired, error) {
	p := req.Params
	name, kind := p.String("name"), p.String("kind")
	res := trainingKinds[kind]
	if err := requireCRD(ctx, t.c, res); err != nil {
		return nil, err
	}
	if err := resourceCaps(ctx, t, p.String("cpu"), p.String("memory")); err != nil {
		return nil, err
	}
	deadline, _ := trainingDeadline(t, p)
	sa, _ := serviceAccount(t.cfg, req.Profile)
	replicas, gpus := p.IntOr("replicas", 1), p.IntOr("gpus", 0)
	k := container{name: "trainer", image: p.String("image"), command: p.List("command"), gpus: gpus,
		cpu: p.String("cpu"), memory: p.String("memory")}
	meta := metav1.ObjectMeta{Name: name, Namespace: t.ns, Labels: objectLabels(t.cfg, req)}
	if q := t.cfg.Kueue.Queue; q != "" {
		meta.Labels[LabelKueueQueue] = q
	}
	secs := int64(deadline / time.Second)
	if kind == TrainingPyTorch {
		k.name = "pytorch" // the training operator finds the container by this name
	}
	tpl := podTemplate(t.cfg, name, sa, corev1.RestartPolicyNever, k)
	var obj *unstructured.Unstructured
	var err error
	switch kind {
	case TrainingJob:
		obj, err = fromTyped(trainingBatchJob(meta, tpl, replicas, secs), ResJob)
	case TrainingPyTorch:
		obj, err = pyTorchJob(meta, tpl, replicas, secs)
	case TrainingHyperPod:
		obj, err = hyperPodJob(meta, tpl, replicas, gpus, secs)
	}
	if err != nil {
		return nil, err
	}
	d := &desired{summary: fmt.Sprintf("%s %s/%s: %d replica(s) × %d GPU(s), %s, deadline %s", res.Kind, t.ns, name, replicas, gpus, p.String("image"), deadline),
		runsAs: runsAs(req.Profile, sa)}
	d.add(res, obj)
	d.watch = []ops.ObjectRef{ref(t.cfg.Name, res, t.ns, name)}
	if err := r.addGPUCost(ctx, t, &d.cost, "training "+name, tpl.Spec, gpus, gpus*replicas); err != nil {
		return nil, err
	}
	if err := r.scheduleHealth(ctx, t, gpus > 0, d); err != nil {
		return nil, err
	}
	d.runFor = deadline
	if d.cost.HourlyDelta > 0 {
		d.cost.Total = d.cost.HourlyDelta * deadline.Hours()
		d.cost.TotalBasis = fmt.Sprintf("if it runs its full %g hours (its deadline, activeDeadlineSeconds)", deadline.Hours())
	}
	if gpus == 0 {
		d.warnings = append(d.warnings, "no GPUs requested: CPU and memory cost is not estimated")
	}
	return d, nil
}

func trainingBatchJob(meta metav1.ObjectMeta, tpl corev1.PodTemplateSpec, replicas, deadline int64) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{
		Parallelism:           ptr.To(int32(replicas)),
		Completions:           ptr.To(int32(replicas)),
		ActiveDeadlineSeconds: ptr.To(deadline),
		// A failed training pod is not retried: a retry re-spends GPU hours; resubmit deliberately instead.
		BackoffLimit: ptr.To(int32(0)),
		Template:     tpl,
	}}
	if replicas > 1 {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	}
	return j
}

func templateMap(tpl corev1.PodTemplateSpec) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tpl)
	if err != nil {
		return nil, fmt.Errorf("convert pod template: %w", err)
	}
	removeNulls(m)
	return m, nil
}

// pyTorchJob renders a kubeflow.org/v1 PyTorchJob: one Master and replicas-1 Workers.
func pyTorchJob(meta metav1.ObjectMeta, tpl corev1.PodTemplateSpec, replicas, deadline int64) (*unstructured.Unstructured, error) {
	tm, err := templateMap(tpl)
	if err != nil {
		return nil, err
	}
	specs := map[string]any{"Master": map[string]any{"replicas": int64(1), "restartPolicy": "Never", "template": tm}}
	if replicas > 1 {
		specs["Worker"] = map[string]any{"replicas": replicas - 1, "restartPolicy": "Never", "template": runtime.DeepCopyJSON(tm)}
	}
	return customObject(ResPyTorchJob, meta, map[string]any{
		"pytorchReplicaSpecs": specs,
		"runPolicy":           map[string]any{"activeDeadlineSeconds": deadline, "backoffLimit": int64(0), "cleanPodPolicy": "None"},
	}), nil
}

// hyperPodJob renders a sagemaker.amazonaws.com/v1 HyperPodPyTorchJob.
func hyperPodJob(meta metav1.ObjectMeta, tpl corev1.PodTemplateSpec, replicas, gpus, deadline int64) (*unstructured.Unstructured, error) {
	tm, err := templateMap(tpl)
	if err != nil {
		return nil, err
	}
	nproc := "auto"
	if gpus > 0 {
		nproc = fmt.Sprint(gpus)
	}
	return customObject(ResHyperPod, meta, map[string]any{
		"nprocPerNode": nproc,
		"replicaSpecs": []any{map[string]any{"name": "pods", "replicas": replicas, "template": tm}},
		"runPolicy":    map[string]any{"activeDeadlineSeconds": deadline, "jobMaxRetryCount": int64(0), "cleanPodPolicy": "None"},
	}), nil
}

func customObject(res Resource, meta metav1.ObjectMeta, spec map[string]any) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range meta.Labels {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": res.APIVersion(), "kind": res.Kind,
		"metadata": map[string]any{"name": meta.Name, "namespace": meta.Namespace, "labels": labels},
		"spec":     spec,
	}}
}

// requireCRD refuses a custom resource the cluster does not serve, naming the CRD.
func requireCRD(ctx context.Context, c *Cluster, res Resource) error {
	if _, typed := typedKinds[res.GVR]; typed {
		return nil
	}
	ok, err := servesResource(ctx, c, res)
	if err != nil {
		return err
	}
	if !ok {
		return ops.Errorf(ops.CodeCRDMissing, "kind", "install the operator that provides "+res.GVR.Resource+"."+res.GVR.Group+", or use kind=job",
			"cluster %s has no CRD %s.%s (%s)", c.Config.Name, res.GVR.Resource, res.GVR.Group, res.APIVersion())
	}
	return nil
}

// servesResource asks discovery whether the cluster serves a resource.
func servesResource(ctx context.Context, c *Cluster, res Resource) (bool, error) {
	list, err := c.Discovery.ServerResourcesForGroupVersion(res.APIVersion()) // no context in DiscoveryInterface
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, clusterError(err, "discover %s", res.APIVersion())
	}
	for _, r := range list.APIResources {
		if r.Name == res.GVR.Resource {
			return true, nil
		}
	}
	return false, nil
}
