package kube

import (
	"context"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

func TestCreateStorage(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		cfg    func(*config.Cluster)
		code   ops.Code
	}{
		{name: "largest EBS volume", params: map[string]any{"name": "data", "size": "16Ti", "storage-class": "gp3"}},
		{name: "just over", params: map[string]any{"name": "data", "size": "17Ti", "storage-class": "gp3"}, code: ops.CodeQuotaExceeded},
		{name: "zero size", params: map[string]any{"name": "data", "size": "0", "storage-class": "gp3"}, code: ops.CodeInvalidArgument},
		{name: "class not allowed", params: map[string]any{"name": "data", "size": "1Ti", "storage-class": "io2"}, code: ops.CodeInvalidArgument},
		{name: "class required when restricted", params: map[string]any{"name": "data", "size": "1Ti"}, code: ops.CodeInvalidArgument},
		{name: "any class when unrestricted", params: map[string]any{"name": "data", "size": "1Ti"}, cfg: func(c *config.Cluster) { c.StorageClasses = nil }},
		{name: "bad access mode", params: map[string]any{"name": "data", "size": "1Ti", "storage-class": "gp3", "access-mode": "RWX"}, code: ops.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, withConfig(tt.cfg))
			_, err := e.prepare(t, request("create-storage", tt.params))
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, tt.code)
		})
	}
	t.Run("plan, execute, re-run", func(t *testing.T) {
		e := newEnv(t, nil)
		params := map[string]any{"name": "data", "size": "500Gi", "storage-class": "gp3", "access-mode": "ReadWriteMany"}
		p, _ := e.execute(t, request("create-storage", params))
		gb := 500 * float64(1<<30) / 1e9
		if math.Abs(p.Cost.MonthlyDelta-gb*0.08) > 1e-6 || !strings.Contains(p.Manifest, "ReadWriteMany") {
			t.Fatalf("plan = %+v", p)
		}
		pvc, err := e.kube.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), "data", metav1.GetOptions{})
		if err != nil || *pvc.Spec.StorageClassName != "gp3" {
			t.Fatalf("pvc = %+v, %v", pvc, err)
		}
		e.kube.ClearActions()
		p2, _ := e.execute(t, request("create-storage", params))
		if p2.Changes[0].Action != ops.ActionNoop || len(writes(e.kube.Actions())) != 0 {
			t.Fatalf("re-run = %+v, writes %v", p2.Changes, writes(e.kube.Actions()))
		}
	})
}

func mountingPod(name, claim string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
		Status: corev1.PodStatus{Phase: phase}}
}

func TestDeleteStorage(t *testing.T) {
	claim := func() *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: testNS, Labels: map[string]string{LabelManagedBy: ManagedByValue}}}
	}
	tests := []struct {
		name string
		objs []runtime.Object
		code ops.Code
		has  []string
	}{
		{name: "mounted by running pods", objs: []runtime.Object{claim(), mountingPod("trainer-0", "data", corev1.PodRunning), mountingPod("trainer-1", "data", corev1.PodPending)},
			code: ops.CodeInUse, has: []string{"trainer-0, trainer-1"}},
		{name: "only finished pods mounted it", objs: []runtime.Object{claim(), mountingPod("old", "data", corev1.PodSucceeded)}},
		{name: "other claims mounted", objs: []runtime.Object{claim(), mountingPod("x", "other", corev1.PodRunning)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objs)
			req := request("delete-storage", map[string]any{"name": "data"})
			op, err := e.prepare(t, req)
			if err != nil {
				t.Fatal(err)
			}
			if op.Spec().Baseline != ops.RiskCritical {
				t.Fatalf("baseline = %v", op.Spec().Baseline)
			}
			p, err := op.Plan(context.Background(), req)
			if tt.code != "" {
				wantCode(t, err, tt.code, tt.has...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Risk.Level != ops.RiskCritical || p.Changes[0].Action != ops.ActionDelete {
				t.Fatalf("plan = %+v", p)
			}
			if _, err := op.Execute(context.Background(), req, p, ops.Execution{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.kube.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), "data", metav1.GetOptions{}); err == nil {
				t.Fatal("claim still exists")
			}
		})
	}
}

func TestListStorage(t *testing.T) {
	sc := "gp3"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	e := newEnv(t, []runtime.Object{pvc, mountingPod("trainer-0", "data", corev1.PodRunning)})
	op, err := e.prepare(t, request("list-storage", nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Execute(context.Background(), request("list-storage", nil), nil, ops.Execution{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "Bound") || !strings.Contains(res.Output, "used by: trainer-0") || !strings.Contains(string(res.Data), `"size":"1Gi"`) {
		t.Fatalf("result = %+v %s", res, res.Data)
	}
}

// Every workload an operation's result asks to watch is of a kind the watcher informs on, and a new subscription
// can read where it stands (ObserveWatched): a created claim is read as the watcher reads it, pending then bound.
func TestWatchedResultsAreReadable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	results := map[string]*ops.Result{}
	_, results["create-storage"] = e.execute(t, request("create-storage", map[string]any{"name": "data", "size": "1Ti", "storage-class": "gp3"}))
	_, results["submit-training-job"] = e.execute(t, request("submit-training-job", trainParams(nil)))
	_, results["deploy-inference"] = e.execute(t, request("deploy-inference", deployParams(nil)))
	for op, res := range results {
		if res == nil || len(res.Watch) == 0 {
			t.Fatalf("%s: the result watches nothing: %+v", op, res)
		}
		for _, obj := range res.Watch {
			if !e.cs.Watchable(obj) {
				t.Errorf("%s: the result watches %s %s, a kind the watcher does not inform on", op, obj.Kind, obj.Name)
			}
			if _, _, found, err := e.cs.ObserveWatched(ctx, obj); err != nil || !found {
				t.Errorf("%s: reading %s %s: found %v, %v", op, obj.Kind, obj.Name, found, err)
			}
		}
	}
	pvc := results["create-storage"].Watch[0]
	if st, _, _, _ := e.cs.ObserveWatched(ctx, pvc); st != StatePending {
		t.Errorf("an unbound claim reads %q, want %q", st, StatePending)
	}
	claim, err := e.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Phase = corev1.ClaimBound
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, _, _, err := e.cs.ObserveWatched(ctx, pvc); st != StateBound || err != nil {
		t.Errorf("a bound claim reads %q, %v; want %q", st, err, StateBound)
	}
	if e.cs.Watchable(ops.ObjectRef{Kind: "Service", Name: "x"}) {
		t.Error("a Service is watchable, but the watcher does not inform on Services")
	}
}
