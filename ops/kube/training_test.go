package kube

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
)

func trainParams(over map[string]any) map[string]any {
	return paramsWith(map[string]any{"name": "fraud-v17", "image": allowedImg, "replicas": "2", "gpus": "4", "max-hours": "12"}, over)
}

// paramsWith is params with the values in over set, and the ones over gives as nil taken out.
func paramsWith(params, over map[string]any) map[string]any {
	for k, v := range over {
		if v == nil {
			delete(params, k)
			continue
		}
		params[k] = v
	}
	return params
}

func TestSubmitTrainingJobGuardrails(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		ns     string
		cfg    func(*config.Cluster)
		code   ops.Code
		has    []string
	}{
		{name: "replicas at the limit", params: trainParams(map[string]any{"replicas": "4"})},
		{name: "replicas one over", params: trainParams(map[string]any{"replicas": "5"}), code: ops.CodeQuotaExceeded, has: []string{"replicas=5", "limits.maxTrainingReplicas=4"}},
		{name: "no replicas", params: trainParams(map[string]any{"replicas": "0"}), code: ops.CodeInvalidArgument},
		{name: "GPUs at the limit", params: trainParams(map[string]any{"replicas": "4", "gpus": "4"})},
		{name: "GPUs one over", params: trainParams(map[string]any{"replicas": "1", "gpus": "17"}), code: ops.CodeQuotaExceeded, has: []string{"gpus=17", "limits.maxGPUsPerJob=16"}},
		{name: "GPUs over across replicas", params: trainParams(map[string]any{"replicas": "3", "gpus": "6"}), code: ops.CodeQuotaExceeded, has: []string{"gpus=6 × replicas=3"}},
		{name: "hours at the limit", params: trainParams(map[string]any{"max-hours": "24"})},
		{name: "hours just over", params: trainParams(map[string]any{"max-hours": "24h1m"}), code: ops.CodeQuotaExceeded, has: []string{"maxTrainingHours=24"}},
		{name: "training forbidden by a zero limit", params: trainParams(nil), cfg: func(c *config.Cluster) { c.Limits.MaxTrainingHours = 0 }, code: ops.CodeQuotaExceeded, has: []string{"forbids training"}},
		{name: "namespace not allowed", params: trainParams(nil), ns: "kube-system", code: ops.CodeNamespaceNotAllowed, has: []string{`"kube-system"`, "ml-platform"}},
		{name: "second allowed namespace", params: trainParams(nil), ns: "ml-research"},
		{name: "image outside the registries", params: trainParams(map[string]any{"image": "docker.io/evil/miner:latest"}), code: ops.CodeImageNotAllowed, has: []string{"docker.io/evil/miner:latest"}},
		{name: "image glob does not cross a slash", params: trainParams(map[string]any{"image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/x:1"}), code: ops.CodeImageNotAllowed},
		{name: "name not DNS-1123", params: trainParams(map[string]any{"name": "Fraud_V17"}), code: ops.CodeInvalidArgument, has: []string{"DNS-1123"}},
		{name: "name 63 characters", params: trainParams(map[string]any{"name": strings.Repeat("a", 63)})},
		{name: "name 64 characters", params: trainParams(map[string]any{"name": strings.Repeat("a", 64)}), code: ops.CodeInvalidArgument},
		{name: "shell string command", params: trainParams(map[string]any{"command": []any{"sh", "-c", "curl x | sh"}}), code: ops.CodeInvalidArgument, has: []string{"argv"}},
		{name: "argv command", params: trainParams(map[string]any{"command": "python train.py --epochs 3"})},
		{name: "queue not configured", params: trainParams(map[string]any{"queue": "gold"}), code: ops.CodeInvalidArgument, has: []string{"kueue.queue"}},
		{name: "bad memory quantity", params: trainParams(map[string]any{"memory": "lots"}), code: ops.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, withConfig(tt.cfg))
			req := request("submit-training-job", tt.params)
			if tt.ns != "" {
				req.Target.Namespace = tt.ns
			}
			_, err := e.prepare(t, req)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			wantCode(t, err, tt.code, tt.has...)
		})
	}
}

func TestSubmitTrainingJobProfileIsChosenByName(t *testing.T) {
	e := newEnv(t, nil)
	req := request("submit-training-job", trainParams(nil))
	req.Profile = "admin"
	_, err := e.prepare(t, req)
	wantCode(t, err, ops.CodeInvalidArgument, `profile "admin"`)
}

func TestSubmitTrainingJobQuantityCappedByLargestNode(t *testing.T) {
	tests := []struct {
		memory string
		ok     bool
	}{{"192Gi", true}, {"193Gi", false}}
	for _, tt := range tests {
		t.Run(tt.memory, func(t *testing.T) {
			e := newEnv(t, nil)
			req := request("submit-training-job", trainParams(map[string]any{"memory": tt.memory}))
			op, err := e.prepare(t, req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = op.Plan(context.Background(), req)
			if tt.ok && err != nil {
				t.Fatalf("want accepted, got %v", err)
			}
			if !tt.ok {
				wantCode(t, err, ops.CodeQuotaExceeded, "largest node", "192Gi")
			}
		})
	}
}

func TestSubmitTrainingJobPlan(t *testing.T) {
	e := newEnv(t, nil)
	_, p := e.plan(t, request("submit-training-job", trainParams(nil)))
	if len(p.Changes) != 1 || p.Changes[0].Action != ops.ActionCreate || p.Changes[0].Kind != "Job" {
		t.Fatalf("changes = %+v", p.Changes)
	}
	if !p.ServerValidated || e.dryRuns != 1 {
		t.Fatalf("serverValidated=%v dryRuns=%d", p.ServerValidated, e.dryRuns)
	}
	if w := writes(e.kube.Actions()); len(w) != 0 {
		t.Fatalf("planning wrote to the cluster: %v", w)
	}
	for _, s := range []string{"activeDeadlineSeconds: 43200", "nvidia.com/gpu: \"4\"", "sagemaker.amazonaws.com/compute-type: hyperpod",
		"key: nvidia.com/gpu", "app.kubernetes.io/managed-by: hyperops", "hyperops.io/request-id: req-1", "hyperops.io/initiator-kind: human",
		"team: ml-platform", "serviceAccountName: trainer", "parallelism: 2", "completionMode: Indexed", "backoffLimit: 0"} {
		if !strings.Contains(p.Manifest, s) {
			t.Errorf("manifest lacks %q:\n%s", s, p.Manifest)
		}
	}
	// 2 replicas × 4 GPUs of 4-GPU ml.g5.12xlarge nodes = 2 nodes × $7.09/h, for at most 12h.
	if math.Abs(p.Cost.HourlyDelta-2*7.09) > 1e-9 || math.Abs(p.Cost.Total-2*7.09*12) > 1e-9 {
		t.Fatalf("cost = %+v", p.Cost)
	}
	// The 8 GPUs are what GPU and GPU-hour budgets charge.
	if p.Cost.GPUs != 8 {
		t.Fatalf("cost.gpus = %d, want 8 (2 replicas × 4 GPUs)", p.Cost.GPUs)
	}
	if !strings.Contains(p.Observed, "spec.activeDeadlineSeconds=<absent>") {
		t.Fatalf("observed = %s", p.Observed)
	}
}

func TestSubmitTrainingJobUnknownPrice(t *testing.T) {
	e := newEnv(t, []runtime.Object{gpuNodeObj("gpu-1", "g", "ml.x9.mystery", 8, "Schedulable")})
	_, p := e.plan(t, request("submit-training-job", trainParams(nil)))
	if len(p.Cost.Unknown) != 1 || p.Cost.Unknown[0] != "ml.x9.mystery" {
		t.Fatalf("cost = %+v", p.Cost)
	}
}

func TestSubmitTrainingJobExecuteAndRerun(t *testing.T) {
	e := newEnv(t, nil)
	_, res := e.execute(t, request("submit-training-job", trainParams(nil)))
	job, err := e.kube.BatchV1().Jobs(testNS).Get(context.Background(), "fraud-v17", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *job.Spec.ActiveDeadlineSeconds != 12*3600 || job.Labels[LabelRequestID] != "req-1" || job.Spec.Template.Labels[LabelWorkload] != "fraud-v17" {
		t.Fatalf("job = %+v", job)
	}
	if len(job.ManagedFields) == 0 || job.ManagedFields[0].Manager != FieldManager || job.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managed fields = %+v", job.ManagedFields)
	}
	if len(res.Watch) != 1 || res.Watch[0].Kind != "Job" || res.Watch[0].Name != "fraud-v17" {
		t.Fatalf("watch = %+v", res.Watch)
	}

	// The same request again: the plan is a no-op and executing writes nothing.
	e.kube.ClearActions()
	p2, res2 := e.execute(t, request("submit-training-job", trainParams(nil)))
	if p2.Changes[0].Action != ops.ActionNoop || p2.Cost.HourlyDelta != 0 {
		t.Fatalf("re-plan = %+v", p2)
	}
	if w := writes(e.kube.Actions()); len(w) != 0 {
		t.Fatalf("re-run wrote %v", w)
	}
	if !strings.Contains(res2.Summary, "unchanged") {
		t.Fatalf("summary = %q", res2.Summary)
	}

	// A change in the cluster changes the observed state, so an approved plan would be stale.
	job.Spec.ActiveDeadlineSeconds = ptrTo(int64(60))
	if _, err := e.kube.BatchV1().Jobs(testNS).Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, p3 := e.plan(t, request("submit-training-job", trainParams(nil)))
	if p3.Hash == p2.Hash || p3.Changes[0].Action != ops.ActionUpdate {
		t.Fatalf("plan after drift: %+v", p3.Changes)
	}
	if f := p3.Changes[0].Fields; len(f) != 1 || f[0].Path != "spec.activeDeadlineSeconds" || f[0].From != "60" || f[0].To != "43200" {
		t.Fatalf("fields = %+v", f)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestSubmitTrainingJobKueueLabel(t *testing.T) {
	e := newEnv(t, nil, withConfig(func(c *config.Cluster) { c.Kueue.Queue = "ml-queue" }))
	_, p := e.plan(t, request("submit-training-job", trainParams(map[string]any{"queue": "ml-queue"})))
	if !strings.Contains(p.Manifest, "kueue.x-k8s.io/queue-name: ml-queue") {
		t.Fatalf("manifest lacks the queue label:\n%s", p.Manifest)
	}
}

func TestSubmitTrainingJobCustomKinds(t *testing.T) {
	tests := []struct {
		kind, crd, deadlinePath string
	}{
		{TrainingPyTorch, "pytorchjobs.kubeflow.org", "spec.runPolicy.activeDeadlineSeconds"},
		{TrainingHyperPod, "hyperpodpytorchjobs.sagemaker.amazonaws.com", "spec.runPolicy.activeDeadlineSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" without its CRD", func(t *testing.T) {
			e := newEnv(t, nil)
			req := request("submit-training-job", trainParams(map[string]any{"kind": tt.kind}))
			op, err := e.prepare(t, req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = op.Plan(context.Background(), req)
			wantCode(t, err, ops.CodeCRDMissing, tt.crd)
		})
		t.Run(tt.kind+" with its CRD", func(t *testing.T) {
			e := newEnv(t, nil, withCRDs())
			p, _ := e.execute(t, request("submit-training-job", trainParams(map[string]any{"kind": tt.kind, "replicas": "3"})))
			if p.Changes[0].Action != ops.ActionCreate || !p.ServerValidated {
				t.Fatalf("plan = %+v", p.Changes)
			}
			res := trainingKinds[tt.kind]
			u, err := e.dyn.Resource(res.GVR).Namespace(testNS).Get(context.Background(), "fraud-v17", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d, _, _ := unstructured.NestedInt64(u.Object, "spec", "runPolicy", "activeDeadlineSeconds")
			if d != 43200 || u.GetLabels()[LabelManagedBy] != ManagedByValue {
				t.Fatalf("object = %v", u.Object)
			}
			if got := workloadGPUs(u); got != 12 {
				t.Fatalf("GPUs = %d, want 3 replicas × 4", got)
			}
			p2, _ := e.execute(t, request("submit-training-job", trainParams(map[string]any{"kind": tt.kind, "replicas": "3"})))
			if p2.Changes[0].Action != ops.ActionNoop {
				t.Fatalf("re-plan = %+v", p2.Changes[0])
			}
		})
	}
}

func managedJob(name string, labels map[string]string, conds ...batchv1.JobCondition) *batchv1.Job {
	l := map[string]string{LabelManagedBy: ManagedByValue, LabelRequestID: "req-0"}
	for k, v := range labels {
		l[k] = v
	}
	if labels != nil && labels[LabelManagedBy] == "" {
		delete(l, LabelManagedBy)
	}
	gpu := corev1.ResourceList{ResourceGPU: *resourceQty(4)}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: l, UID: types.UID("uid-" + TypesUID(name))},
		Spec: batchv1.JobSpec{Parallelism: ptrTo(int32(2)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "trainer", Image: allowedImg, Resources: corev1.ResourceRequirements{Limits: gpu}}}}}},
		Status: batchv1.JobStatus{Active: 2, Conditions: conds},
	}
}

func TestStopTrainingJob(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: testNS}}
	tests := []struct {
		name    string
		objs    []runtime.Object
		code    ops.Code
		action  ops.Action
		deleted bool
	}{
		{name: "running managed job", objs: []runtime.Object{managedJob("fraud-v17", nil), claim}, action: ops.ActionDelete, deleted: true},
		{name: "already gone", objs: []runtime.Object{claim}, action: ops.ActionNoop},
		{name: "not managed", objs: []runtime.Object{managedJob("fraud-v17", map[string]string{"owner": "kubectl"}), claim}, code: ops.CodeNotAuthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append([]runtime.Object{gpuNodeObj("gpu-1", "g", "ml.g5.12xlarge", 4, "Schedulable")}, tt.objs...)
			e := newEnv(t, objs)
			req := request("stop-training-job", map[string]any{"name": "fraud-v17"})
			op, err := e.prepare(t, req)
			if err != nil {
				t.Fatal(err)
			}
			p, err := op.Plan(context.Background(), req)
			if tt.code != "" {
				wantCode(t, err, tt.code, "not managed by HyperOps")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Changes[0].Action != tt.action {
				t.Fatalf("changes = %+v", p.Changes)
			}
			if tt.deleted && (p.Risk.Level != ops.RiskHigh || p.Cost.HourlyDelta >= 0) {
				t.Fatalf("risk = %+v cost = %+v", p.Risk, p.Cost)
			}
			if _, err := op.Execute(context.Background(), req, p, ops.Execution{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.kube.BatchV1().Jobs(testNS).Get(context.Background(), "fraud-v17", metav1.GetOptions{}); err == nil {
				t.Fatal("job still exists")
			}
			if _, err := e.kube.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), "data", metav1.GetOptions{}); err != nil {
				t.Fatalf("the claim was touched: %v", err)
			}
			for _, w := range writes(e.kube.Actions()) {
				if strings.Contains(w, "persistentvolumeclaims") {
					t.Fatalf("stop wrote to a claim: %s", w)
				}
			}
			// Stopping again changes nothing.
			e.kube.ClearActions()
			if _, err := op.Execute(context.Background(), req, p, ops.Execution{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGetTrainingJob(t *testing.T) {
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fraud-v17-0-abc", Namespace: testNS, Labels: map[string]string{LabelWorkload: "fraud-v17"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev1", Namespace: testNS},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "fraud-v17"}, Type: "Warning", Reason: "DeadlineExceeded", Message: "deadline"}
	e := newEnv(t, []runtime.Object{managedJob("fraud-v17", nil, failed), pod, ev})
	e.logs.set("fraud-v17-0-abc", "epoch 1\nepoch 2\nkilled")
	op, err := e.prepare(t, request("get-training-job", map[string]any{"name": "fraud-v17", "lines": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	req := request("get-training-job", map[string]any{"name": "fraud-v17", "kind": "job", "lines": int64(2)})
	res, err := op.Execute(context.Background(), req, nil, ops.Execution{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "failed") || !strings.Contains(res.Summary, "DeadlineExceeded") {
		t.Fatalf("summary = %q", res.Summary)
	}
	if res.Output != "epoch 2\nkilled" {
		t.Fatalf("log tail = %q", res.Output)
	}
	if !strings.Contains(string(res.Data), `Warning Job DeadlineExceeded: deadline`) {
		t.Fatalf("data = %s", res.Data)
	}
	_, err = op.Execute(context.Background(), request("get-training-job", map[string]any{"name": "nope", "kind": "job"}), nil, ops.Execution{})
	wantCode(t, err, ops.CodeNotFound)
}

func TestListTrainingJobs(t *testing.T) {
	done := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	unmanaged := managedJob("by-hand", map[string]string{"x": "y"})
	delete(unmanaged.Labels, LabelManagedBy)
	e := newEnv(t, []runtime.Object{managedJob("a", nil), managedJob("b", nil, done), unmanaged})
	op, err := e.prepare(t, request("list-training-jobs", nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Execute(context.Background(), request("list-training-jobs", nil), nil, ops.Execution{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Summary, "2 training job(s)") || !strings.Contains(res.Output, "completed") || strings.Contains(res.Output, "by-hand") {
		t.Fatalf("result = %+v", res)
	}
}

// TestSubmitTrainingJobOnFaultyNodes: a training job whose pods may land on an instance group with faulty nodes says
// so in its plan, naming the nodes and HyperPod's reason, and its risk goes one level up once Assess has set the
// rest; nodes under a deep health check or healthy groups say nothing.
func TestSubmitTrainingJobOnFaultyNodes(t *testing.T) {
	healthy := []runtime.Object{
		gpuNodeObj("hyperpod-i-0aaa", "gpu-workers", "ml.g5.12xlarge", 4, HealthSchedulable),
		gpuNodeObj("hyperpod-i-0bbb", "gpu-workers", "ml.g5.12xlarge", 4, HealthUnschedulable),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}},
	}
	faulty := append([]runtime.Object{gpuNodeObj("hyperpod-i-0ccc", "gpu-workers", "ml.g5.12xlarge", 4, HealthPendingReplacement)}, healthy...)
	xid := &instanceReader{instances: []fleet.InstanceHealth{{Group: "gpu-workers", InstanceID: "i-0ccc", Status: InstanceFailure, Message: "GPU 3 reported Xid 79"}}}
	tests := []struct {
		name    string
		objs    []runtime.Object
		reader  *instanceReader
		warning string
		want    ops.Level
		wantWhy string
	}{
		{"healthy group: nothing said", healthy, xid, "", ops.RiskLow, ""},
		{"faulty node, HyperPod's reason", faulty, xid,
			"instance group gpu-workers has 1 of 3 nodes faulty, rebooting or being replaced (hyperpod-i-0ccc faulty: GPU 3 reported Xid 79 (UnschedulablePendingReplacement, Failure))",
			ops.RiskMedium, "instance group gpu-workers has 1 node(s) faulty, rebooting or being replaced: one level up from low"},
		{"faulty node, the label alone", faulty, nil,
			"instance group gpu-workers has 1 of 3 nodes faulty, rebooting or being replaced (hyperpod-i-0ccc faulty: failed a health check; HyperPod marked it for replacement (UnschedulablePendingReplacement))",
			ops.RiskMedium, "instance group gpu-workers has 1 node(s) faulty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objs, withConfig(func(c *config.Cluster) { c.HyperPod.ClusterName = "ml-hp" }))
			if tt.reader != nil {
				e.reg.instances = tt.reader
			}
			req := request("submit-training-job", trainParams(nil))
			op, p := e.plan(t, req)
			ops.RiskPolicy{}.Assess(*req, op.Spec(), p)
			said := strings.Join(p.Warnings, "\n")
			if tt.warning == "" && strings.Contains(said, "instance group") || !strings.Contains(said, tt.warning) {
				t.Errorf("warnings:\n%s\nwant %q", said, tt.warning)
			}
			if p.Risk.Level != tt.want {
				t.Errorf("risk %s, want %s (%+v)", p.Risk.Level, tt.want, p.Risk.Reasons)
			}
			if tt.wantWhy != "" && !strings.Contains(fmt.Sprint(p.Risk.Reasons), tt.wantWhy) {
				t.Errorf("risk reasons %+v lack %q", p.Risk.Reasons, tt.wantWhy)
			}
		})
	}
}
