package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	ktesting "k8s.io/client-go/testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/pricing"
)

const (
	testCluster = "ml-dev"
	testNS      = "ml-platform"
	allowedImg  = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v1"
)

func testConfig() *config.Config {
	return &config.Config{Clusters: []config.Cluster{{
		Name: testCluster, Region: "us-west-2", Environment: config.EnvDevelopment,
		Namespaces: []string{testNS, "ml-research"}, DefaultNamespace: testNS,
		Images: []string{"123456789012.dkr.ecr.us-west-2.amazonaws.com/*", "public.ecr.aws/docker/library/*"},
		Limits: config.Limits{MaxNodesPerGroup: 16, MaxTrainingReplicas: 4, MaxGPUsPerJob: 16, MaxTrainingHours: 24, MaxInferenceReplicas: 8},
		GPUNodes: config.GPUNodes{
			NodeSelector: map[string]string{"sagemaker.amazonaws.com/compute-type": "hyperpod"},
			Tolerations:  []config.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}},
		},
		Profiles:       map[string]config.Profile{"default": {ServiceAccount: "trainer"}},
		RequiredLabels: map[string]string{"team": "ml-platform"},
		StorageClasses: []string{"gp3"},
	}}}
}

// gpuNode is a HyperPod-labelled node with GPUs, as the e2e plane and real HyperPod nodes are labelled.
func gpuNodeObj(name, group, instanceType string, gpus int64, health string) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("48"),
		corev1.ResourceMemory: resource.MustParse("192Gi"),
		ResourceGPU:           *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			LabelHyperPodGroup: group, LabelInstanceType: instanceType, LabelNodeHealth: health,
			"sagemaker.amazonaws.com/compute-type": "hyperpod"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// env is one fake cluster: the typed and dynamic fakes, made to honour dry runs like an API server.
type env struct {
	kube *fake.Clientset
	dyn  *dynfake.FakeDynamicClient
	cs   *Clusters
	reg  *registry
	cat  *ops.Catalog
	logs *stubLogs
	// applied plays ops/state's index of what HyperOps applied; execute fills it as the engine would.
	applied *memApplied
	// dryRuns counts dry-run requests the fakes answered.
	mu      sync.Mutex
	dryRuns int
}

type envOption func(*config.Config, *env)

func withCRDs() envOption {
	return func(_ *config.Config, e *env) {
		e.kube.Resources = append(e.kube.Resources,
			&metav1.APIResourceList{GroupVersion: "kubeflow.org/v1", APIResources: []metav1.APIResource{{Name: "pytorchjobs", Namespaced: true, Kind: "PyTorchJob"}}},
			&metav1.APIResourceList{GroupVersion: "sagemaker.amazonaws.com/v1", APIResources: []metav1.APIResource{{Name: "hyperpodpytorchjobs", Namespaced: true, Kind: "HyperPodPyTorchJob"}}})
	}
}

// withConfig changes the cluster's configuration with f; a nil f changes nothing, so that a table test passes its
// rows' optional edit as it is.
func withConfig(f func(*config.Cluster)) envOption {
	return func(c *config.Config, _ *env) {
		if f != nil {
			f(&c.Clusters[0])
		}
	}
}

func newEnv(t *testing.T, objs []runtime.Object, opts ...envOption) *env {
	t.Helper()
	cfg := testConfig()
	if objs == nil {
		objs = []runtime.Object{
			gpuNodeObj("gpu-1", "gpu-workers", "ml.g5.12xlarge", 4, "Schedulable"),
			gpuNodeObj("gpu-2", "gpu-workers", "ml.g5.12xlarge", 4, "Unschedulable"),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}},
		}
	}
	e := &env{kube: fake.NewClientset(objs...), logs: &stubLogs{}}
	lists := map[schema.GroupVersionResource]string{ResPyTorchJob.GVR: "PyTorchJobList", ResHyperPod.GVR: "HyperPodPyTorchJobList"}
	e.dyn = dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists)
	for _, o := range opts {
		o(cfg, e)
	}
	e.kube.PrependReactor("patch", "*", e.typedDryRun)
	e.kube.PrependReactor("delete", "*", e.deleteDryRun)
	e.dyn.PrependReactor("patch", "*", e.dynamicApply)
	e.dyn.PrependReactor("delete", "*", e.deleteDryRun)
	cs, err := NewClustersFromClients(cfg, map[string]Clients{testCluster: {Kube: e.kube, Dynamic: e.dyn, Logs: e.logs}})
	if err != nil {
		t.Fatal(err)
	}
	e.cs = cs
	e.applied = newMemApplied()
	e.reg = &registry{cs: cs, pricer: pricing.NewTable(nil), pollEvery: 5 * time.Millisecond, applied: e.applied}
	e.cat = ops.NewCatalog()
	e.reg.register(e.cat)
	return e
}

// typedDryRun answers a dry-run apply like the API server does: the object as it would be, nothing persisted. The
// fake does no schema validation or defaulting; only the e2e tier shows those.
func (e *env) typedDryRun(a ktesting.Action) (bool, runtime.Object, error) {
	p, ok := a.(ktesting.PatchActionImpl)
	if !ok || len(p.PatchOptions.DryRun) == 0 {
		return false, nil, nil
	}
	e.countDryRun()
	var u unstructured.Unstructured
	if err := json.Unmarshal(p.Patch, &u.Object); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	obj, err := scheme.Scheme.New(u.GroupVersionKind())
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	return true, obj, nil
}

func (e *env) deleteDryRun(a ktesting.Action) (bool, runtime.Object, error) {
	d, ok := a.(ktesting.DeleteActionImpl)
	if !ok || len(d.DeleteOptions.DryRun) == 0 {
		return false, nil, nil
	}
	e.countDryRun()
	return true, nil, nil
}

// dynamicApply gives the dynamic fake the server's apply semantics it lacks: dry runs persist nothing, and an
// apply of a missing object creates it.
func (e *env) dynamicApply(a ktesting.Action) (bool, runtime.Object, error) {
	p, ok := a.(ktesting.PatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(p.Patch); err != nil { // integers stay int64, as the dynamic client decodes them
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if len(p.PatchOptions.DryRun) > 0 {
		e.countDryRun()
		return true, &u, nil
	}
	tr := e.dyn.Tracker()
	if _, err := tr.Get(p.GetResource(), p.GetNamespace(), p.GetName()); apierrors.IsNotFound(err) {
		u.SetGeneration(1)
		if err := tr.Create(p.GetResource(), &u, p.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, &u, nil
	}
	return false, nil, nil
}

func (e *env) countDryRun() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dryRuns++
}

// writes counts the requests that changed something (dry runs excluded).
func writes(actions []ktesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch x := a.(type) {
		case ktesting.PatchActionImpl:
			if len(x.PatchOptions.DryRun) == 0 {
				out = append(out, "patch "+x.GetResource().Resource+"/"+x.GetName())
			}
		case ktesting.DeleteActionImpl:
			if len(x.DeleteOptions.DryRun) == 0 {
				out = append(out, "delete "+x.GetResource().Resource+"/"+x.GetName())
			}
		case ktesting.CreateActionImpl:
			out = append(out, "create "+x.GetResource().Resource)
		case ktesting.UpdateActionImpl:
			out = append(out, "update "+x.GetResource().Resource)
		}
	}
	return out
}

// stubLogs stands in for pods/log, which the fake clientset answers with "fake logs" whatever the pod printed.
type stubLogs struct {
	mu   sync.Mutex
	text map[string]string
	// failing is how many reads fail next, as a kubelet's log endpoint does now and then (an error 500).
	failing int
	reads   int
}

func (s *stubLogs) set(pod, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.text == nil {
		s.text = map[string]string{}
	}
	s.text[pod] = text
}

func (s *stubLogs) TailLogs(_ context.Context, _, pod, _ string, lines int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.failing > 0 {
		s.failing--
		return "", errors.New("an error on the server (\"unknown\") has prevented the request from succeeding")
	}
	t, ok := s.text[pod]
	if !ok {
		return "", errors.New("no log for " + pod)
	}
	ls := strings.Split(t, "\n")
	if int64(len(ls)) > lines {
		ls = ls[int64(len(ls))-lines:]
	}
	return strings.Join(ls, "\n"), nil
}

func request(op string, params map[string]any) *ops.Request {
	return &ops.Request{ID: "req-1", Operation: op, Target: ops.Target{Cluster: testCluster, Namespace: testNS},
		Params: params, Initiator: ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}}
}

// prepare normalizes and validates a request as the engine does.
func (e *env) prepare(t *testing.T, req *ops.Request) (ops.Operation, error) {
	t.Helper()
	op, err := e.cat.Lookup(req.Operation)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ops.Normalize(op.Spec().Params, req.Params)
	if err != nil {
		return op, err
	}
	req.Params = p
	return op, op.Validate(context.Background(), req)
}

// plan validates and plans, failing the test on error.
func (e *env) plan(t *testing.T, req *ops.Request) (ops.Operation, *ops.Plan) {
	t.Helper()
	op, err := e.prepare(t, req)
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	p, err := op.Plan(context.Background(), req)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	p.Hash = ops.HashPlan(*req, p)
	return op, p
}

// execute plans and executes, failing the test on error.
func (e *env) execute(t *testing.T, req *ops.Request) (*ops.Plan, *ops.Result) {
	t.Helper()
	op, p := e.plan(t, req)
	res, err := op.Execute(context.Background(), req, p, ops.Execution{Fence: 1, Replica: "test"})
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	e.applied.record(&ops.Record{Request: *req, Plan: p, Phase: ops.PhaseSucceeded})
	return p, res
}

// memApplied is AppliedRecords in memory: the last record that applied each object, kept as a stored copy.
type memApplied struct {
	mu   sync.Mutex
	recs map[ops.ObjectRef]*ops.Record
}

func newMemApplied() *memApplied { return &memApplied{recs: map[ops.ObjectRef]*ops.Record{}} }

func (m *memApplied) record(rec *ops.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range rec.Plan.Applies {
		m.recs[o] = rec.Clone()
	}
}

func (m *memApplied) LastApplied(_ context.Context, obj ops.ObjectRef) (*ops.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[obj]
	if !ok {
		return nil, ops.ErrNotFound
	}
	return rec.Clone(), nil
}

func wantCode(t *testing.T, err error, code ops.Code, has ...string) {
	t.Helper()
	var e *ops.Error
	if !errors.As(err, &e) {
		t.Fatalf("want %s, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want %s, got %s: %v", code, e.Code, err)
	}
	for _, s := range has {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

func resourceQty(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

// TypesUID makes a readable fake UID.
func TypesUID(name string) string { return strings.ReplaceAll(name, "-", "") }

type clusterConfig = config.Cluster

type unstructuredObj = unstructured.Unstructured

// playOnce plays a part of the cluster that the fake clientset has no controller for: it runs act every 2 ms in a
// goroutine until act reports that it did its part, or until stop is called; stop waits for the goroutine to end.
func playOnce(act func() (done bool)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if act() {
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
