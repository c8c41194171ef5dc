package kube

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/internal/planetest"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/pricing"
)

// TestAgainstAPIServer runs the operations against a real kube-apiserver (with scheduler, controllers and kwok
// nodes): what the fake clientset cannot show — server-side dry runs that persist nothing, server-side apply
// through the real field manager, and re-runs that leave the generation alone.
func TestAgainstAPIServer(t *testing.T) {
	ctx, cp := startTestPlane(t, controlplane.Options{WithCRDs: true},
		controlplane.NodeSpec{Name: "hp-gpu-0", InstanceGroup: "gpu-workers", InstanceType: "ml.g5.12xlarge", GPUs: 4},
		controlplane.NodeSpec{Name: "hp-gpu-1", InstanceGroup: "gpu-workers", InstanceType: "ml.g5.12xlarge", GPUs: 4})
	cs, err := NewClustersFromClients(testConfig(), map[string]Clients{testCluster: {Kube: cp.Client(), Dynamic: cp.Dynamic(), REST: cp.RESTConfig()}})
	if err != nil {
		t.Fatal(err)
	}
	applied := newMemApplied()
	e := &env{cs: cs, applied: applied, cat: ops.NewCatalog(),
		reg: &registry{cs: cs, pricer: pricing.NewTable(nil), pollEvery: 100 * time.Millisecond, applied: applied}}
	e.reg.register(e.cat)
	c, _ := cs.Get(testCluster)

	rerun := func(t *testing.T, op string, params map[string]any, res Resource, name string) {
		t.Helper()
		_, p := e.plan(t, request(op, params))
		if !p.ServerValidated || p.Changes[0].Action != ops.ActionCreate {
			t.Fatalf("plan = %+v", p.Changes)
		}
		if got, err := c.getObject(ctx, res, testNS, name); err != nil || got != nil {
			t.Fatalf("the dry run persisted %s: %v %v", name, got, err)
		}
		e.execute(t, request(op, params))
		first, err := c.getObject(ctx, res, testNS, name)
		if err != nil || first == nil {
			t.Fatalf("after execute: %v", err)
		}
		p2, _ := e.execute(t, request(op, params))
		for _, ch := range p2.Changes {
			if ch.Action != ops.ActionNoop {
				t.Fatalf("re-plan against the server: %+v", ch)
			}
		}
		// Even a forced apply of the same object (what a re-run by the same lock holder would send: the same
		// fence) changes no generation.
		d := first.DeepCopy()
		if _, err := c.applyObject(ctx, res, fenced(mustDesired(t, e, op, params, res), nil, 1), false); err != nil {
			t.Fatal(err)
		}
		second, err := c.getObject(ctx, res, testNS, name)
		if err != nil {
			t.Fatal(err)
		}
		if second.GetGeneration() != d.GetGeneration() || second.GetUID() != d.GetUID() {
			t.Fatalf("generation %d → %d, uid %s → %s", d.GetGeneration(), second.GetGeneration(), d.GetUID(), second.GetUID())
		}
	}
	t.Run("submit-training-job kind=job", func(t *testing.T) {
		rerun(t, "submit-training-job", trainParams(map[string]any{"name": "e2e-job"}), ResJob, "e2e-job")
	})
	t.Run("submit-training-job kind=pytorchjob", func(t *testing.T) {
		rerun(t, "submit-training-job", trainParams(map[string]any{"name": "e2e-ptj", "kind": TrainingPyTorch}), ResPyTorchJob, "e2e-ptj")
	})
	t.Run("deploy-inference", func(t *testing.T) {
		rerun(t, "deploy-inference", deployParams(map[string]any{"name": "e2e-ranker"}), ResDeployment, "e2e-ranker")
	})
	t.Run("a plan the server refuses", func(t *testing.T) {
		req := request("submit-training-job", trainParams(map[string]any{"name": "e2e-job", "image": allowedImg + "-changed"}))
		op, err := e.prepare(t, req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = op.Plan(ctx, req)
		wantCode(t, err, ops.CodeInvalidArgument, "field is immutable")
	})
	t.Run("stop-training-job", func(t *testing.T) {
		e.execute(t, request("stop-training-job", map[string]any{"name": "e2e-job"}))
		_, err := cp.Client().BatchV1().Jobs(testNS).Get(ctx, "e2e-job", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("job after stop: %v", err)
		}
	})
	t.Run("watcher tells the job kwok completes", func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		rec := newRecorder("a", nil, &mu, &got)
		stop := startWatcher(t, e, &memLeases{}, rec, "a")
		defer stop()
		e.execute(t, request("submit-training-job", trainParams(map[string]any{"name": "e2e-watched", "replicas": "1", "gpus": "1"})))
		opstest.Eventually(t, time.Minute, "completed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, g := range got {
				if strings.HasPrefix(g, "a Job/e2e-watched ") && strings.HasSuffix(g, "→completed") {
					return true
				}
			}
			return false
		})
		mu.Lock()
		defer mu.Unlock()
		// The states told go forward only (pending may be missed if the Job started before the informers synced).
		// A watcher that re-acquires its lease (slow machines renew late) re-emits the current state as a
		// reconciler does; the sink's compare-and-set on the last state told drops such a repeat, so it is
		// allowed here, but a state going backwards is not.
		order := map[string]int{StatePending: 0, StateRunning: 1, StateCompleted: 2}
		prev := -1
		for _, g := range got {
			if !strings.HasPrefix(g, "a Job/e2e-watched ") {
				continue
			}
			to := g[strings.LastIndex(g, "→")+len("→"):]
			n, ok := order[to]
			switch {
			case !ok || n < prev:
				t.Fatalf("told %q: %q goes backwards", got, g)
			case n == prev && !strings.Contains(g, " →"):
				t.Fatalf("told %q: %q repeats a transition (not a re-emit of the current state)", got, g)
			}
			prev = n
		}
	})
	t.Run("NewClusters from a kubeconfig file", func(t *testing.T) {
		cfg := testConfig()
		cfg.Clusters[0].Kubeconfig = cp.Kubeconfig()
		real, err := NewClusters(cfg)
		if err != nil {
			t.Fatal(err)
		}
		groups, err := real.NodeGroups(ctx, testCluster)
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 1 || groups[0].Group != "gpu-workers" || groups[0].GPUAllocatable != 8 || groups[0].Ready != 2 {
			t.Fatalf("groups = %+v", groups)
		}
	})
	t.Run("a hung API server answers within requestTimeout", func(t *testing.T) {
		testHungAPIServer(ctx, t, cp)
	})
	t.Run("verify-cluster", func(t *testing.T) {
		if err := cp.SetContainerLog(verifyMarker); err != nil {
			t.Fatal(err)
		}
		// As /hp bootstrap verify with no arguments: the cluster's default smoke-test image.
		req := request("verify-cluster", map[string]any{"timeout": "2m"})
		op, p := e.plan(t, req)
		res, err := op.Execute(ctx, req, p, ops.Execution{})
		if err != nil {
			t.Fatal(err)
		}
		var rep VerifyReport
		if err := json.Unmarshal(res.Data, &rep); err != nil || !rep.OK || len(rep.Checks) != 3 {
			t.Fatalf("report = %+v, %v", rep, err)
		}
		t.Logf("%s\n%s", res.Summary, res.Output)
	})
	t.Run("a faulty node in status and a training plan", func(t *testing.T) {
		// As HyperPod's health agent leaves a node that failed a check: labelled, and cordoned.
		if err := cp.SetNodeHealth(ctx, "hp-gpu-1", HealthPendingReplacement); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := cp.SetNodeHealth(context.Background(), "hp-gpu-1", HealthSchedulable); err != nil {
				t.Error(err)
			}
		})
		req := request("get-cluster-status", nil)
		op, err := e.prepare(t, req)
		if err != nil {
			t.Fatal(err)
		}
		res, err := op.Execute(ctx, req, nil, ops.Execution{})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"1 node(s) not healthy", "1 healthy, 1 faulty",
			"hp-gpu-1 faulty: failed a health check; HyperPod marked it for replacement (UnschedulablePendingReplacement)"} {
			if !strings.Contains(res.Summary+"\n"+res.Output, want) {
				t.Errorf("status lacks %q:\n%s\n%s", want, res.Summary, res.Output)
			}
		}
		treq := request("submit-training-job", trainParams(map[string]any{"name": "on-faulty"}))
		top, p := e.plan(t, treq)
		ops.RiskPolicy{}.Assess(*treq, top.Spec(), p)
		if !strings.Contains(strings.Join(p.Warnings, "\n"), "instance group gpu-workers has 1 of 2 nodes faulty") || p.Risk.Level != ops.RiskMedium {
			t.Errorf("training plan: risk %s, warnings %q", p.Risk.Level, p.Warnings)
		}
	})
}

// mustDesired builds the object an operation would apply.
func mustDesired(t *testing.T, e *env, op string, params map[string]any, res Resource) *unstructuredObj {
	t.Helper()
	req := request(op, params)
	if _, err := e.prepare(t, req); err != nil {
		t.Fatal(err)
	}
	tg, err := e.cs.resolve(req, true)
	if err != nil {
		t.Fatal(err)
	}
	var d *desired
	switch op {
	case "submit-training-job":
		d, err = e.reg.buildTraining(context.Background(), tg, req)
	case "deploy-inference":
		d, err = e.reg.buildInference(context.Background(), tg, req, req.Params, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range d.objects {
		if o.res == res {
			return o.obj
		}
	}
	t.Fatalf("%s builds no %s", op, res.Kind)
	return nil
}

// testHungAPIServer puts the fault proxy in front of the API server and holds requests there, never forwarding
// them: each call through NewClusters' clients ends with an error within the cluster's requestTimeout instead of
// holding its caller. (TestWatchesAreNotBounded shows a watch is left alone.)
func testHungAPIServer(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	proxy, err := faultproxy.NewKube(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: proxy.URL()}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	const bound = 2 * time.Second
	cfg := testConfig()
	cfg.Clusters[0].Kubeconfig, cfg.Clusters[0].RequestTimeout = path, config.Duration(bound)
	cs, err := NewClusters(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cs.Get(testCluster)
	for _, verb := range []string{"list", "get", "patch"} {
		proxy.Inject(faultproxy.Rule{Verb: verb, Action: faultproxy.HoldBefore})
		proxy.Inject(faultproxy.Rule{Verb: verb, DryRun: true, Action: faultproxy.HoldBefore})
	}
	// Without a bound each call would wait for its caller's own deadline, far past requestTimeout.
	calls := map[string]func(callCtx context.Context) error{
		"list nodes (node groups)": func(callCtx context.Context) error { _, err := cs.NodeGroups(callCtx, testCluster); return err },
		"get a config map": func(callCtx context.Context) error {
			_, err := c.Kube.CoreV1().ConfigMaps(testNS).Get(callCtx, "absent", metav1.GetOptions{})
			return err
		},
		"server-side dry run": func(callCtx context.Context) error {
			_, err := c.Kube.CoreV1().ConfigMaps(testNS).Patch(callCtx, "dry", types.ApplyPatchType,
				[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"}}`),
				metav1.PatchOptions{FieldManager: "hyperops", DryRun: []string{metav1.DryRunAll}})
			return err
		},
	}
	for name, call := range calls {
		callCtx, cancel := context.WithTimeout(ctx, 15*bound)
		start := time.Now()
		err := call(callCtx)
		took := time.Since(start)
		cancel()
		t.Logf("%s: %v after %s", name, err, took.Round(time.Millisecond))
		if err == nil || took > 5*bound {
			t.Errorf("%s: answered %v after %s; want an error within about %s", name, err, took, bound)
		}
	}
	proxy.ClearRules()
}

// hyperPodNode is a ready GPU node labelled as a HyperPod node, for the tests against a real API server.
var hyperPodNode = controlplane.NodeSpec{Name: "hp-gpu-0", InstanceGroup: "gpu-workers", InstanceType: "ml.g5.12xlarge", GPUs: 4,
	Labels: map[string]string{"sagemaker.amazonaws.com/compute-type": "hyperpod"}}

// startTestPlane starts a control plane with opts for a test against a real API server, adds the nodes and waits
// for them to be ready, and creates testNS with the "trainer" service account; it returns the plane and a context
// that ends after 4 minutes or with the test.
func startTestPlane(t *testing.T, opts controlplane.Options, nodes ...controlplane.NodeSpec) (context.Context, *controlplane.ControlPlane) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	cp := planetest.Start(t, ctx, opts)
	planetest.AddReadyNodes(t, ctx, cp, nodes...)
	if _, err := cp.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client().CoreV1().ServiceAccounts(testNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ctx, cp
}
