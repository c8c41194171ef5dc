package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/progress"
)

func deployParams(over map[string]any) map[string]any {
	return paramsWith(map[string]any{"name": "ranker", "image": allowedImg, "replicas": "2", "gpus": "1", "port": "9000"}, over)
}

func TestDeployInferenceGuardrails(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		code   ops.Code
	}{
		{"replicas at the limit", deployParams(map[string]any{"replicas": "8"}), ""},
		{"replicas one over", deployParams(map[string]any{"replicas": "9"}), ops.CodeQuotaExceeded},
		{"zero replicas", deployParams(map[string]any{"replicas": "0"}), ops.CodeInvalidArgument},
		{"port at the top", deployParams(map[string]any{"port": "65535"}), ""},
		{"port past the top", deployParams(map[string]any{"port": "65536"}), ops.CodeInvalidArgument},
		{"image not allowed", deployParams(map[string]any{"image": "quay.io/x/y:1"}), ops.CodeImageNotAllowed},
		{"relative health path", deployParams(map[string]any{"health-path": "healthz"}), ops.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			_, err := e.prepare(t, request("deploy-inference", tt.params))
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, tt.code)
		})
	}
}

func TestDeployInferencePlanExecuteRerun(t *testing.T) {
	e := newEnv(t, nil)
	p, res := e.execute(t, request("deploy-inference", deployParams(nil)))
	if len(p.Changes) != 2 || p.Changes[0].Kind != "Deployment" || p.Changes[1].Kind != "Service" || e.dryRuns != 2 {
		t.Fatalf("changes = %+v, dry runs %d", p.Changes, e.dryRuns)
	}
	for _, s := range []string{"maxUnavailable: 0", "readinessProbe:", "path: /healthz", "containerPort: 9000", "nvidia.com/gpu: \"1\"", "progressDeadlineSeconds: 600"} {
		if !strings.Contains(p.Manifest, s) {
			t.Errorf("manifest lacks %q", s)
		}
	}
	// 2 replicas × 1 GPU of a 4-GPU ml.g5.12xlarge ($7.09/h).
	if math.Abs(p.Cost.HourlyDelta-0.5*7.09) > 1e-9 || p.Cost.GPUs != 2 {
		t.Fatalf("cost = %+v, want $%.4f/h and 2 GPUs", p.Cost, 0.5*7.09)
	}
	if len(res.Watch) != 1 || res.Watch[0].Kind != "Deployment" {
		t.Fatalf("watch = %+v", res.Watch)
	}
	svc, err := e.kube.CoreV1().Services(testNS).Get(context.Background(), "ranker", metav1.GetOptions{})
	if err != nil || svc.Spec.Ports[0].Port != 9000 || svc.Spec.Selector[LabelWorkload] != "ranker" {
		t.Fatalf("service = %+v, %v", svc, err)
	}
	e.kube.ClearActions()
	p2, _ := e.execute(t, request("deploy-inference", deployParams(nil)))
	if p2.Changes[0].Action != ops.ActionNoop || p2.Changes[1].Action != ops.ActionNoop {
		t.Fatalf("re-plan = %+v", p2.Changes)
	}
	if w := writes(e.kube.Actions()); len(w) != 0 {
		t.Fatalf("re-run wrote %v", w)
	}
}

func deployed(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, nil)
	e.execute(t, request("deploy-inference", deployParams(map[string]any{"replicas": "4"})))
	e.kube.ClearActions()
	return e
}

func TestScaleInference(t *testing.T) {
	tests := []struct {
		replicas string
		risk     ops.Level
		delta    float64
		code     ops.Code
		reason   string
	}{
		{replicas: "6", risk: ops.RiskLow, delta: 2 * 7.09 / 4},
		{replicas: "2", risk: ops.RiskHigh, delta: -2 * 7.09 / 4, reason: "down from 4 to 2"},
		{replicas: "0", risk: ops.RiskHigh, delta: -4 * 7.09 / 4, reason: "to zero"},
		{replicas: "8", risk: ops.RiskLow, delta: 4 * 7.09 / 4},
		{replicas: "9", code: ops.CodeQuotaExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.replicas, func(t *testing.T) {
			e := deployed(t)
			req := request("scale-inference", map[string]any{"name": "ranker", "replicas": tt.replicas})
			if tt.code != "" {
				_, err := e.prepare(t, req)
				wantCode(t, err, tt.code, "maxInferenceReplicas")
				return
			}
			p, _ := e.execute(t, req)
			if p.Risk.Level != tt.risk || math.Abs(p.Cost.HourlyDelta-tt.delta) > 1e-9 {
				t.Fatalf("risk = %+v cost = %+v", p.Risk, p.Cost)
			}
			if tt.reason != "" && !strings.Contains(p.Risk.Reasons[0].Text, tt.reason) {
				t.Fatalf("reasons = %+v", p.Risk.Reasons)
			}
			dep, _ := e.kube.AppsV1().Deployments(testNS).Get(context.Background(), "ranker", metav1.GetOptions{})
			if got := *dep.Spec.Replicas; got != int32(mustAtoi(tt.replicas)) || dep.Spec.Template.Spec.Containers[0].Image != allowedImg {
				t.Fatalf("deployment replicas %d image %s", got, dep.Spec.Template.Spec.Containers[0].Image)
			}
			if c := p.Changes[0]; c.Action != ops.ActionUpdate || !hasField(c, "spec.replicas") {
				t.Fatalf("change = %+v", c)
			}
		})
	}
}

func hasField(c ops.Change, path string) bool {
	for _, f := range c.Fields {
		if f.Path == path {
			return true
		}
	}
	return false
}

func mustAtoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

func TestScaleInferenceRefusesWhatHyperOpsDidNotDeploy(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: testNS}}
	e := newEnv(t, []runtime.Object{dep})
	req := request("scale-inference", map[string]any{"name": "legacy", "replicas": "1"})
	op, err := e.prepare(t, req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = op.Plan(context.Background(), req)
	wantCode(t, err, ops.CodeNotAuthorized, "not managed by HyperOps")
	_, err = op.Plan(context.Background(), request("scale-inference", map[string]any{"name": "ghost", "replicas": int64(1)}))
	wantCode(t, err, ops.CodeNotFound)
}

// controller plays the deployment controller: once the Deployment's template carries image, it reports the
// rollout as done (or as past its progress deadline).
func controller(t *testing.T, e *env, image string, fail bool) (stop func()) {
	return playOnce(func() bool {
		d, err := e.kube.AppsV1().Deployments(testNS).Get(context.Background(), "ranker", metav1.GetOptions{})
		if err != nil || d.Spec.Template.Spec.Containers[0].Image != image {
			return false
		}
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, AvailableReplicas: n, ReadyReplicas: n}
		if fail {
			d.Status.AvailableReplicas = 0
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "ranker-2" has timed out progressing.`}}
		}
		if _, err := e.kube.AppsV1().Deployments(testNS).UpdateStatus(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			t.Errorf("update status: %v", err)
		}
		return true
	})
}

func TestRolloutInference(t *testing.T) {
	newImage := "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v2"
	tests := []struct {
		name string
		fail bool
	}{{"becomes available", false}, {"misses its progress deadline", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := deployed(t)
			stop := controller(t, e, newImage, tt.fail)
			defer stop()
			req := request("rollout-inference", map[string]any{"name": "ranker", "image": newImage})
			op, p := e.plan(t, req)
			if c := p.Changes[0]; !hasField(c, "spec.template.spec.containers[0].image") {
				t.Fatalf("change = %+v", c)
			}
			var steps []string
			ctx := progress.With(context.Background(), func(m string) { steps = append(steps, m) })
			res, err := op.Execute(ctx, req, p, ops.Execution{})
			if tt.fail {
				wantCode(t, err, ops.CodeClusterUnavailable, "ProgressDeadlineExceeded")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Details[len(res.Details)-1].Value != StateAvailable || len(steps) == 0 {
				t.Fatalf("details = %+v steps = %v", res.Details, steps)
			}
		})
	}
	t.Run("image outside the registries", func(t *testing.T) {
		e := deployed(t)
		_, err := e.prepare(t, request("rollout-inference", map[string]any{"name": "ranker", "image": "ghcr.io/x/y:2"}))
		wantCode(t, err, ops.CodeImageNotAllowed)
	})
}

func TestDeleteInferenceKeepsVolumes(t *testing.T) {
	e := deployed(t)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "weights", Namespace: testNS, Labels: map[string]string{LabelManagedBy: ManagedByValue}}}
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(testNS).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kube.ClearActions()
	p, res := e.execute(t, request("delete-inference", map[string]any{"name": "ranker"}))
	if p.Risk.Level != ops.RiskHigh || len(p.Changes) != 2 || p.Changes[0].Action != ops.ActionDelete || p.Cost.HourlyDelta >= 0 || p.Cost.GPUs >= 0 {
		t.Fatalf("plan = %+v", p)
	}
	got := writes(e.kube.Actions())
	if strings.Join(got, ",") != "delete deployments/ranker,delete services/ranker" {
		t.Fatalf("writes = %v", got)
	}
	if !strings.Contains(res.Details[0].Value, "delete-storage") {
		t.Fatalf("details = %+v", res.Details)
	}
	p2, _ := e.execute(t, request("delete-inference", map[string]any{"name": "ranker"}))
	if p2.Changes[0].Action != ops.ActionNoop {
		t.Fatalf("second delete = %+v", p2.Changes)
	}
}

func TestGetInference(t *testing.T) {
	e := deployed(t)
	op, err := e.prepare(t, request("get-inference", map[string]any{"name": "ranker"}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Execute(context.Background(), request("get-inference", map[string]any{"name": "ranker"}), nil, ops.Execution{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "progressing") || !strings.Contains(res.Summary, "0/4 available") {
		t.Fatalf("summary = %q", res.Summary)
	}
}

func TestDeployInferenceNeverTakesOverAnotherObject(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ranker", Namespace: testNS, Labels: map[string]string{"owner": "platform"}}}
	e := newEnv(t, append(statusObjects()[:2], svc))
	req := request("deploy-inference", deployParams(nil))
	op, err := e.prepare(t, req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = op.Plan(context.Background(), req)
	wantCode(t, err, ops.CodeNotAuthorized, "Service ml-platform/ranker is not managed by HyperOps")
	_, err = op.Execute(context.Background(), req, nil, ops.Execution{})
	wantCode(t, err, ops.CodeNotAuthorized)
	if w := writes(e.kube.Actions()); len(w) != 0 {
		t.Fatalf("wrote %v", w)
	}
}

func TestDeployInferenceCostCountsOnlyTheChange(t *testing.T) {
	e := deployed(t) // 4 replicas × 1 GPU
	_, p := e.plan(t, request("deploy-inference", deployParams(map[string]any{"replicas": "4", "gpus": "2"})))
	if math.Abs(p.Cost.HourlyDelta-4*7.09/4) > 1e-9 {
		t.Fatalf("cost = %+v, want 4 more GPUs", p.Cost)
	}
}

// A controller's status write moves a Deployment's resourceVersion between HyperOps' read and its apply; the API
// server answers the apply 409. The object is still ours with no later fence, so the apply is retried at the fresh
// resourceVersion and the scale succeeds. A conflict that never clears is reported as E_LOCKED, not as a bad name.
func TestScaleInferenceRetriesAStatusConflict(t *testing.T) {
	for _, tt := range []struct {
		name      string
		conflicts int
		code      ops.Code
	}{
		{name: "one status write", conflicts: 1},
		{name: "a writer that never stops", conflicts: 100, code: ops.CodeLocked},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := deployed(t)
			req := request("scale-inference", map[string]any{"name": "ranker", "replicas": "6"})
			op, p := e.plan(t, req)
			var versions []string
			var moved string // the resourceVersion after the last status write
			left := tt.conflicts
			e.kube.PrependReactor("patch", "deployments", func(a ktesting.Action) (bool, runtime.Object, error) {
				pa := a.(ktesting.PatchActionImpl)
				if len(pa.PatchOptions.DryRun) > 0 {
					return false, nil, nil
				}
				var sent metav1.PartialObjectMetadata
				if err := json.Unmarshal(pa.Patch, &sent); err != nil {
					return true, nil, err
				}
				versions = append(versions, sent.ResourceVersion)
				if left == 0 {
					return false, nil, nil
				}
				left--
				// The controller's status write: the stored object's resourceVersion moves on.
				// (The tracker, not the clientset: a reactor runs under the clientset's lock.)
				obj, err := e.kube.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), testNS, "ranker")
				if err != nil {
					return true, nil, err
				}
				dep := obj.(*appsv1.Deployment).DeepCopy()
				dep.ResourceVersion = fmt.Sprintf("rv-%d", len(versions))
				if err := e.kube.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), dep, testNS); err != nil {
					return true, nil, err
				}
				if now, err := e.kube.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), testNS, "ranker"); err == nil {
					moved = now.(*appsv1.Deployment).ResourceVersion
				}
				return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "ranker", errors.New("the object has been modified"))
			})
			_, err := op.Execute(context.Background(), req, p, ops.Execution{Fence: 2, Replica: "test"})
			if tt.code != "" {
				wantCode(t, err, tt.code, "changed while HyperOps wrote it")
				return
			}
			if err != nil {
				t.Fatalf("execute after one status conflict: %v", err)
			}
			if len(versions) != 2 || versions[0] == versions[1] || versions[1] != moved {
				t.Fatalf("applies sent at resourceVersions %q, want a retry at the fresh one (%s)", versions, moved)
			}
			dep, _ := e.kube.AppsV1().Deployments(testNS).Get(context.Background(), "ranker", metav1.GetOptions{})
			if *dep.Spec.Replicas != 6 {
				t.Fatalf("replicas = %d after the retried apply, want 6", *dep.Spec.Replicas)
			}
		})
	}
}

// TestDeployInferenceOnFaultyNodes: replicas land where a training job would, so a deploy onto an instance group
// with a faulty node says so, with HyperPod's reason, and its risk goes one level up; a healthy group says nothing.
func TestDeployInferenceOnFaultyNodes(t *testing.T) {
	healthy := []runtime.Object{
		gpuNodeObj("hyperpod-i-0aaa", "gpu-workers", "ml.g5.12xlarge", 4, HealthSchedulable),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}},
	}
	faulty := append([]runtime.Object{gpuNodeObj("hyperpod-i-0ccc", "gpu-workers", "ml.g5.12xlarge", 4, HealthPendingReplacement)}, healthy...)
	xid := &instanceReader{instances: []fleet.InstanceHealth{{Group: "gpu-workers", InstanceID: "i-0ccc", Status: InstanceFailure, Message: "GPU 3 reported Xid 79"}}}
	for _, tt := range []struct {
		name    string
		objs    []runtime.Object
		warning string
	}{
		{"healthy group: nothing said", healthy, ""},
		{"faulty node", faulty, "instance group gpu-workers has 1 of 2 nodes faulty, rebooting or being replaced (hyperpod-i-0ccc faulty: GPU 3 reported Xid 79"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objs, withConfig(func(c *config.Cluster) { c.HyperPod.ClusterName = "ml-hp" }))
			e.reg.instances = xid
			req := request("deploy-inference", deployParams(nil))
			op, p := e.plan(t, req)
			base := p.Risk.Level
			ops.RiskPolicy{}.Assess(*req, op.Spec(), p)
			said := strings.Join(p.Warnings, "\n")
			if tt.warning == "" {
				if strings.Contains(said, "instance group") {
					t.Errorf("a healthy group is warned about:\n%s", said)
				}
				return
			}
			if !strings.Contains(said, tt.warning) {
				t.Errorf("warnings:\n%s\nwant %q", said, tt.warning)
			}
			if !strings.Contains(fmt.Sprint(p.Risk.Reasons), "faulty") || p.Risk.Level == base && base != ops.RiskCritical {
				t.Errorf("risk %s (from %s), reasons %+v: want one level up for the faulty node", p.Risk.Level, base, p.Risk.Reasons)
			}
		})
	}
}
