package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/ops"
)

var nameParam = ops.ParamSpec{Name: "name", Kind: ops.KindString, Required: true, Help: "name of the object (DNS-1123 label)"}

func checkNameOnly(_ target, req *ops.Request) error {
	return checkName("name", req.Params.String("name"))
}

func (r *registry) stopTrainingJob() ops.Operation {
	spec := ops.Spec{
		Name: "stop-training-job", Domain: "training", Topic: "train", Verb: "stop", Mutates: true, Baseline: ops.RiskHigh,
		Summary:     "Stop a training job by deleting it (its pods go too; volumes are never touched)",
		Params:      []ops.ParamSpec{nameParam, trainingKindParam},
		Lock:        r.lock(lockKindTraining),
		Headline:    ops.MustTemplate(`Stop the training job {{.Name}} on {{.Target}} (its volumes are kept)`),
		Destructive: true,
		Revert:      "submits the job again as it was; it starts over from its last checkpoint, not where it stopped",
	}
	return r.deleteOperation(spec, checkNameOnly, func(ctx context.Context, t target, req *ops.Request) (*deletion, error) {
		name, res, have, err := readTrainingJob(ctx, t, req)
		if err != nil {
			return nil, err
		}
		d := &deletion{objects: []doomed{{res: res, ns: t.ns, name: name, have: have}},
			keep: "persistent volume claims are kept: delete them separately with delete-storage"}
		if have == nil {
			d.summary = fmt.Sprintf("%s %s/%s is already gone: nothing to stop", res.Kind, t.ns, name)
			return d, nil
		}
		if err := requireManaged(res, have); err != nil {
			return nil, err
		}
		state, _ := objectState(res, have)
		d.summary = fmt.Sprintf("stop %s %s/%s (%s)", res.Kind, t.ns, name, state)
		d.risk.Add(ops.RiskHigh, "stopping %s loses its progress since the last checkpoint", name)
		if state == StateRunning || state == StatePending {
			if err := r.addReleasedGPUCost(ctx, t, &d.cost, "stop "+name, have); err != nil {
				return nil, err
			}
		}
		return d, nil
	})
}

// objectState reads the state of any watched kind from its unstructured form.
func objectState(res Resource, u *unstructured.Unstructured) (string, string) {
	switch res.GVR {
	case ResJob.GVR:
		var j batchv1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &j); err != nil {
			return StatePending, ""
		}
		return JobState(&j)
	case ResPyTorchJob.GVR, ResHyperPod.GVR:
		return CustomJobState(u)
	}
	return "", ""
}

// workloadGPUs counts the GPUs a workload asks for: replicas × GPU limits of its pod template(s).
func workloadGPUs(u *unstructured.Unstructured) int64 {
	var total int64
	for _, rt := range replicaTemplates(u) {
		total += rt.replicas * templateGPUs(rt.template)
	}
	return total
}

// replicaTemplate is one pod template of a workload and how many pods it makes.
type replicaTemplate struct {
	replicas int64
	template map[string]any
}

// replicaTemplates are a workload's pod templates, in a stable order, with their replicas.
func replicaTemplates(u *unstructured.Unstructured) []replicaTemplate {
	intAt := func(m map[string]any, def int64, path ...string) int64 {
		if v, ok, _ := unstructured.NestedInt64(m, path...); ok {
			return v
		}
		return def
	}
	var out []replicaTemplate
	switch u.GetKind() {
	case ResJob.Kind:
		tpl, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
		out = append(out, replicaTemplate{intAt(u.Object, 1, "spec", "parallelism"), tpl})
	case ResDeployment.Kind:
		tpl, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
		out = append(out, replicaTemplate{intAt(u.Object, 1, "spec", "replicas"), tpl})
	case ResPyTorchJob.Kind:
		specs, _, _ := unstructured.NestedMap(u.Object, "spec", "pytorchReplicaSpecs")
		for _, role := range slices.Sorted(maps.Keys(specs)) {
			m, _ := specs[role].(map[string]any)
			tpl, _, _ := unstructured.NestedMap(m, "template")
			out = append(out, replicaTemplate{intAt(m, 1, "replicas"), tpl})
		}
	case ResHyperPod.Kind:
		specs, _, _ := unstructured.NestedSlice(u.Object, "spec", "replicaSpecs")
		for _, s := range specs {
			m, _ := s.(map[string]any)
			tpl, _, _ := unstructured.NestedMap(m, "template")
			out = append(out, replicaTemplate{intAt(m, 1, "replicas"), tpl})
		}
	}
	return out
}

// templateGPUs is the GPU limits of a pod template's containers: the GPUs one of its pods asks for.
func templateGPUs(tpl map[string]any) int64 {
	cs, _, _ := unstructured.NestedSlice(tpl, "spec", "containers")
	var n int64
	for _, c := range cs {
		m, _ := c.(map[string]any)
		v, ok, _ := unstructured.NestedFieldNoCopy(m, "resources", "limits", string(ResourceGPU))
		if !ok {
			continue
		}
		if q, err := resource.ParseQuantity(fmt.Sprint(v)); err == nil {
			n += q.Value()
		}
	}
	return n
}

// trainingStatus is get-training-job's machine-readable answer.
type trainingStatus struct {
	Kind       string   `json:"kind"`
	Name       string   `json:"name"`
	Namespace  string   `json:"namespace"`
	State      string   `json:"state"`
	Reason     string   `json:"reason,omitempty"`
	Conditions []string `json:"conditions,omitempty"`
	Pods       []string `json:"pods,omitempty"`
	Events     []string `json:"events,omitempty"`
	LogTail    string   `json:"logTail,omitempty"`
}

func (r *registry) getTrainingJob() ops.Operation {
	spec := ops.Spec{
		Name: "get-training-job", Domain: "training", Topic: "train", Verb: "status", Baseline: ops.RiskLow,
		Summary: "Show a training job: state, conditions, pods, recent events and a log tail",
		Params: []ops.ParamSpec{nameParam, trainingKindParam,
			{Name: "lines", Kind: ops.KindInt, Default: "50", Min: 1, Max: 500, Help: "log lines to show (at most 500)"}},
	}
	return r.readOperation(spec, checkNameOnly, func(ctx context.Context, t target, req *ops.Request) (*ops.Result, error) {
		name, res, have, err := readTrainingJob(ctx, t, req)
		if err != nil {
			return nil, err
		}
		if have == nil {
			return nil, ops.Errorf(ops.CodeNotFound, "name", "list jobs with "+ops.Ask("train list"), "%s %s/%s not found", res.Kind, t.ns, name)
		}
		st := trainingStatus{Kind: res.Kind, Name: name, Namespace: t.ns}
		st.State, st.Reason = objectState(res, have)
		conds, _, _ := unstructured.NestedSlice(have.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			st.Conditions = append(st.Conditions, t.c.redact.Text(strings.Trim(fmt.Sprintf("%v=%v %v %v", m["type"], m["status"], m["reason"], m["message"]), " ")))
		}
		pods, podStates, events, err := workloadActivity(ctx, t.c, t.ns, name)
		if err != nil {
			return nil, err
		}
		st.Pods, st.Events = podStates, events
		lines := req.Params.IntOr("lines", 50) // 1 to 500, checked by its spec
		st.LogTail = logTail(ctx, t.c, t.ns, pods, lines)
		res2 := &ops.Result{Summary: fmt.Sprintf("%s %s/%s is %s", res.Kind, t.ns, name, st.State), Output: st.LogTail,
			Objects: []ops.ObjectRef{ref(t.cfg.Name, res, t.ns, name)}}
		if st.Reason = t.c.redact.Text(st.Reason); st.Reason != "" {
			res2.Summary += " (" + st.Reason + ")"
		}
		res2.Details = activityDetails(st.Pods, st.Events)
		res2.Data, _ = json.Marshal(st)
		return res2, nil
	})
}

// jobSummary is one line of list-training-jobs.
type jobSummary struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	State     string `json:"state"`
	GPUs      int64  `json:"gpus"`
	RequestID string `json:"requestId,omitempty"`
}

func (r *registry) listTrainingJobs() ops.Operation {
	spec := ops.Spec{
		Name: "list-training-jobs", Domain: "training", Topic: "train", Verb: "list", Baseline: ops.RiskLow,
		Summary: "List the training jobs HyperOps manages in a namespace, with their state",
	}
	return r.readOperation(spec, func(target, *ops.Request) error { return nil }, func(ctx context.Context, t target, req *ops.Request) (*ops.Result, error) {
		var jobs []jobSummary
		for _, kind := range []string{TrainingJob, TrainingPyTorch, TrainingHyperPod} {
			res := trainingKinds[kind]
			if _, typed := typedKinds[res.GVR]; !typed {
				if ok, err := servesResource(ctx, t.c, res); err != nil || !ok {
					continue // a missing training operator just has no jobs to list
				}
			}
			items, err := t.c.listObjects(ctx, res, t.ns, ManagedSelector)
			if err != nil {
				return nil, err
			}
			for _, u := range items {
				s, _ := objectState(res, &u)
				jobs = append(jobs, jobSummary{res.Kind, u.GetName(), s, workloadGPUs(&u), u.GetLabels()[LabelRequestID]})
			}
		}
		out := &ops.Result{Summary: fmt.Sprintf("%d training job(s) in %s/%s", len(jobs), t.cfg.Name, t.ns)}
		var b strings.Builder
		for _, j := range jobs {
			fmt.Fprintf(&b, "%-20s %-32s %-10s %3d GPU(s)\n", j.Kind, j.Name, j.State, j.GPUs)
			out.Objects = append(out.Objects, ops.ObjectRef{Cluster: t.cfg.Name, Namespace: t.ns, Kind: j.Kind, Name: j.Name})
		}
		out.Output = b.String()
		out.Data, _ = json.Marshal(map[string]any{"jobs": jobs})
		return out, nil
	})
}

// readOperation builds a read-only operation: checked, then executed at once.
func (r *registry) readOperation(spec ops.Spec, check func(t target, req *ops.Request) error,
	run func(ctx context.Context, t target, req *ops.Request) (*ops.Result, error)) ops.Operation {
	return &operation{
		spec: spec,
		validate: func(_ context.Context, req *ops.Request) error {
			_, err := r.checked(req, check)
			return err
		},
		execute: func(ctx context.Context, req *ops.Request, _ *ops.Plan) (*ops.Result, error) {
			t, err := r.checkedAs(req, check)
			if err != nil {
				return nil, err
			}
			return run(ctx, t, req)
		},
	}
}

// readTrainingJob reads the training job the request names, of the kind it names (nil when there is none), after
// checking that the cluster serves that kind: what stopping a job and showing one both begin with.
func readTrainingJob(ctx context.Context, t target, req *ops.Request) (name string, res Resource, have *unstructured.Unstructured, err error) {
	name, res = req.Params.String("name"), trainingKinds[req.Params.String("kind")]
	if err := requireCRD(ctx, t.c, res); err != nil {
		return "", Resource{}, nil, err
	}
	if have, err = t.c.getObject(ctx, res, t.ns, name); err != nil {
		return "", Resource{}, nil, err
	}
	return name, res, have, nil
}
