package kube

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/pricing"
)

// TestExecutionAgainstAPIServer runs whole submissions through an engine.Engine over real Redis against a real
// kube-apiserver, with every API call counted on the wire: one auto-approved submit makes one server-side dry run
// per object and at most one LIST of nodes, and a lock holder that lost its lock writes nothing.
func TestExecutionAgainstAPIServer(t *testing.T) {
	ctx, cp := startTestPlane(t, controlplane.Options{}, hyperPodNode)
	calls := &apiCalls{}
	rc := cp.RESTConfig()
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, calls: calls} }
	clients, err := clientsFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := NewClustersFromClients(testConfig(), map[string]Clients{testCluster: clients})
	if err != nil {
		t.Fatal(err)
	}
	reg := &registry{cs: cs, pricer: pricing.NewTable(nil), pollEvery: 100 * time.Millisecond}
	catalog := ops.NewCatalog()
	reg.register(catalog)
	c, _ := cs.Get(testCluster)

	t.Run("one auto-approved submit: one dry run per object, at most one LIST of nodes", func(t *testing.T) {
		store := opstest.NewRedisStore(t).Store
		e := engine.New(catalog, store, store, nil, engine.Options{Replica: "r1", LockTTL: 10 * time.Second})
		cases := []struct {
			name    string
			op      string
			params  map[string]any
			objects []string // resource/name of every object the plan applies
		}{
			// cpu= and memory= are checked against the largest node, gpus= priced from the GPU nodes: both read nodes.
			{"submit-training-job", "submit-training-job",
				trainParams(map[string]any{"name": "counted-job", "gpus": "2", "cpu": "4", "memory": "8Gi"}), []string{"jobs/counted-job"}},
			{"deploy-inference", "deploy-inference",
				deployParams(map[string]any{"name": "counted-ranker", "cpu": "2"}), []string{"deployments/counted-ranker", "services/counted-ranker"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req := *request(tc.op, tc.params)
				req.ID = "counted-" + tc.name
				calls.reset()
				rec, err := e.Submit(ctx, req)
				if err != nil || rec.Phase != ops.PhaseSucceeded {
					t.Fatalf("Submit: %v, record %+v", err, rec)
				}
				got := calls.all()
				for _, obj := range tc.objects {
					if n := count(got, "PATCH "+obj+" dryRun=All"); n != 1 {
						t.Errorf("%d server-side dry runs of %s, want 1; calls:\n%s", n, obj, strings.Join(got, "\n"))
					}
					if n := count(got, "PATCH "+obj); n != 1 {
						t.Errorf("%d applies of %s, want 1; calls:\n%s", n, obj, strings.Join(got, "\n"))
					}
				}
				if n := countPrefix(got, "PATCH ") - 2*len(tc.objects); n != 0 {
					t.Errorf("%d PATCH calls beyond one dry run and one apply per object; calls:\n%s", n, strings.Join(got, "\n"))
				}
				if n := count(got, "LIST nodes"); n > 1 {
					t.Errorf("%d LISTs of nodes, want at most 1; calls:\n%s", n, strings.Join(got, "\n"))
				}
				t.Logf("%d API calls: %s", len(got), strings.Join(got, "; "))
			})
		}
	})

	// The annotation-tampering case of issue 14, end to end: the engine records what the deploy applied in Redis,
	// someone edits the live Deployment, and the scale applies HyperOps's values and reports the drift.
	t.Run("a tampered inference-spec annotation is never applied; the plan reports drift", func(t *testing.T) {
		store := opstest.NewRedisStore(t).Store
		vouching := &registry{cs: cs, pricer: pricing.NewTable(nil), pollEvery: 100 * time.Millisecond, applied: store}
		vcat := ops.NewCatalog()
		vouching.register(vcat)
		e := engine.New(vcat, store, store, nil, engine.Options{Replica: "r1", LockTTL: 10 * time.Second})
		deploy := *request("deploy-inference", deployParams(map[string]any{"name": "vouched", "replicas": "2"}))
		deploy.ID = "vouched-deploy"
		if rec, err := e.Submit(ctx, deploy); err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("deploy: %v, record %+v", err, rec)
		}
		deps := cp.Client().AppsV1().Deployments(testNS)
		settled(ctx, t, cp, "vouched")
		dep, err := deps.Get(ctx, "vouched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep.Annotations[AnnotationInferenceSpec] = `{"name":"vouched","image":"` + evilImage + `","replicas":2,"gpus":8,"port":9000}`
		dep.Spec.Template.Spec.Containers[0].Image = evilImage
		if _, err := deps.Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		settled(ctx, t, cp, "vouched")
		scale := *request("scale-inference", map[string]any{"name": "vouched", "replicas": "3"})
		scale.ID = "vouched-scale"
		rec, err := e.Submit(ctx, scale)
		if err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("scale: %v, record %+v", err, rec)
		}
		if got := driftPaths(rec.Plan); strings.Join(got, ",") != annotation+","+imagePath {
			t.Errorf("drift = %v, want exactly the annotation and the image", got)
		}
		if !hasDriftReason(rec.Plan) {
			t.Errorf("risk = %+v, want a drift reason at high", rec.Plan.Risk)
		}
		live, err := deps.Get(ctx, "vouched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := live.Spec.Template.Spec.Containers[0]
		if c.Image != allowedImg || *live.Spec.Replicas != 3 || strings.Contains(live.Annotations[AnnotationInferenceSpec], "evil") {
			t.Fatalf("live: image %s, replicas %d, annotation %s", c.Image, *live.Spec.Replicas, live.Annotations[AnnotationInferenceSpec])
		}
		if g := c.Resources.Limits.Name(ResourceGPU, "").Value(); g != 1 {
			t.Fatalf("live GPUs %d, want the deployed 1", g)
		}
	})

	t.Run("lost lock: the stale holder's write is refused", func(t *testing.T) {
		rs := opstest.NewRedisStore(t)
		store := rs.Store
		deploy, err := catalog.Lookup("deploy-inference")
		if err != nil {
			t.Fatal(err)
		}
		g, gate := opstest.GateWrite(deploy, "infer-a")
		gated := ops.NewCatalog()
		gated.Register(g)
		e := engine.New(gated, store, store, nil, engine.Options{Replica: "r1", LockTTL: 10 * time.Second})
		scope := ops.LockScope{Cluster: testCluster, Namespace: testNS, Kind: lockKindInference, Name: "fenced-ranker"}
		reqA := *request("deploy-inference", deployParams(map[string]any{"name": "fenced-ranker", "replicas": "1"}))
		reqA.ID = "infer-a"
		reqB := *request("deploy-inference", deployParams(map[string]any{"name": "fenced-ranker", "replicas": "2"}))
		reqB.ID = "infer-b"

		xa, aDone := opstest.SubmitToGate(ctx, t, e, gate, reqA)
		lb := rs.StealLock(ctx, t, scope, "infer-b", xa.Fence)

		// A's write goes on: nothing carries a fence yet, so its guard is what refuses it.
		gate.Open()
		a := <-aDone
		wantCode(t, a.Err, ops.CodeLocked, "no longer held by this execution", scope.String())
		if a.Rec == nil || a.Rec.Phase != ops.PhaseFailed {
			t.Fatalf("A's record %+v, want failed", a.Rec)
		}
		for _, res := range []Resource{ResDeployment, ResService} {
			if got, err := c.getObject(ctx, res, testNS, "fenced-ranker"); err != nil || got != nil {
				t.Fatalf("the refused write created %s: %v, %v", res.Kind, got, err)
			}
		}

		// B, the holder of the larger fence, applies.
		rec, err := e.Submit(ctx, reqB)
		if err != nil || rec.Phase != ops.PhaseSucceeded || rec.Fence != lb.Fence {
			t.Fatalf("B: %v, record %+v; want succeeded at fence %d", err, rec, lb.Fence)
		}
		before := snapshot(ctx, t, c)
		if before[0].fence != fmt.Sprint(lb.Fence) || before[0].requestID != "infer-b" || before[0].replicas != 2 {
			t.Fatalf("after B the Deployment is %+v, want B's (fence %d, 2 replicas)", before[0], lb.Fence)
		}

		// A's write again, with a guard that passes as if its check had raced the loss: the fence B left on the
		// objects refuses it. With its real guard it is refused too.
		write := deploy.(ops.Steps).Write
		bypassed := xa
		bypassed.Guard = func(context.Context) error { return nil }
		_, err = write(ctx, &a.Rec.Request, a.Rec.Plan, bypassed)
		wantCode(t, err, ops.CodeLocked, fmt.Sprintf("later lock holder (fence %d > %d)", lb.Fence, xa.Fence))
		_, err = write(ctx, &a.Rec.Request, a.Rec.Plan, xa)
		wantCode(t, err, ops.CodeLocked)
		if after := snapshot(ctx, t, c); !slices.Equal(after, before) {
			t.Fatalf("the stale holder changed the objects:\nbefore %+v\nafter  %+v", before, after)
		}
	})

	t.Run("an apply refused at its second object reports what it applied, and a new request converges", func(t *testing.T) {
		halfwayApply(ctx, t, cp, catalog, c)
	})
}

// halfwayApply makes the API server refuse (422) the real apply of the Service of deploy-inference "halfway" (not
// its dry run, so planning passes), after the Deployment was applied.
func halfwayApply(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, catalog *ops.Catalog, c *Cluster) {
	store := opstest.NewRedisStore(t).Store
	e := engine.New(catalog, store, store, nil, engine.Options{Replica: "r1", LockTTL: 10 * time.Second})
	unrefuse := refuseService(ctx, t, cp, "halfway")
	req := *request("deploy-inference", deployParams(map[string]any{"name": "halfway"}))
	req.ID = "halfway-1"
	rec, err := e.Submit(ctx, req)
	wantCode(t, err, ops.CodeInvalidArgument, "1 of 2 objects applied", "not applied Service halfway", "new requestId")
	if rec == nil || rec.Phase != ops.PhaseFailed || len(rec.Errors) == 0 {
		t.Fatalf("record %+v, want failed with its error", rec)
	}
	dep, err := c.getObject(ctx, ResDeployment, testNS, "halfway")
	if err != nil || dep == nil {
		t.Fatalf("the Deployment applied before the refusal: %v, %v", dep, err)
	}
	recorded := rec.Errors[len(rec.Errors)-1].Message
	if want := fmt.Sprintf("Deployment halfway (create, uid %s, generation %d)", dep.GetUID(), dep.GetGeneration()); !strings.Contains(recorded, want) {
		t.Errorf("the recorded error %q does not name what was applied (%s)", recorded, want)
	}
	if svc, err := c.getObject(ctx, ResService, testNS, "halfway"); err != nil || svc != nil {
		t.Fatalf("the refused Service exists: %v, %v", svc, err)
	}

	unrefuse()
	req.ID = "halfway-2"
	rec, err = e.Submit(ctx, req)
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("the new request: %v, record %+v", err, rec)
	}
	// The applied Deployment is as planned but for the request id it carries; the Service is what is left to create.
	if ch := rec.Plan.Changes; len(ch) != 2 || ch[1].Action != ops.ActionCreate || !onlyRequestID(ch[0]) {
		t.Errorf("the new plan %+v, want the Deployment changed only in its request id and the Service created", ch)
	}
	after, err := c.getObject(ctx, ResDeployment, testNS, "halfway")
	if err != nil || after.GetUID() != dep.GetUID() {
		t.Errorf("the Deployment was replaced: %v (uid %s, was %s)", err, after.GetUID(), dep.GetUID())
	}
	if svc, err := c.getObject(ctx, ResService, testNS, "halfway"); err != nil || svc == nil {
		t.Fatalf("the Service after the new request: %v, %v", svc, err)
	}
}

// onlyRequestID reports whether ch changes nothing but the request id an object carries.
func onlyRequestID(ch ops.Change) bool {
	for _, f := range ch.Fields {
		if !strings.HasSuffix(f.Path, "hyperops.io/request-id") {
			return false
		}
	}
	return ch.Action == ops.ActionNoop || ch.Action == ops.ActionUpdate
}

// refuseService installs a ValidatingAdmissionPolicy that refuses, as invalid (422), creating or updating the
// Service name for real while letting server-side dry runs through, waits until the API server enforces it, and
// returns the function that removes it again (and waits until it is gone).
func refuseService(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, name string) func() {
	t.Helper()
	ar := cp.Client().AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				}}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("request.dryRun == true || object.metadata.name != %q", name),
				Reason:     ptr.To(metav1.StatusReasonInvalid),
				Message:    "refused by the test's admission policy",
			}},
		},
	}
	if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := func() error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		_, err := cp.Client().CoreV1().Services(testNS).Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		// A dry run passes by design; the real create is what the policy refuses.
		_, err = cp.Client().CoreV1().Services(testNS).Create(ctx, svc, metav1.CreateOptions{})
		if err == nil {
			_ = cp.Client().CoreV1().Services(testNS).Delete(ctx, name, metav1.DeleteOptions{})
		}
		return err
	}
	pollUntil(ctx, t, "the admission policy to refuse Service "+name, func() bool { return apierrors.IsInvalid(probe()) })
	return func() {
		if err := ar.ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := ar.ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		pollUntil(ctx, t, "the admission policy to be gone", func() bool {
			_, err := cp.Client().CoreV1().Services(testNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return false
			}
			// Gone when a real create passes: undo it, so the request creates the Service itself.
			if _, err := cp.Client().CoreV1().Services(testNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
				return false
			}
			return cp.Client().CoreV1().Services(testNS).Delete(ctx, name, metav1.DeleteOptions{}) == nil
		})
	}
}

// pollUntil polls cond every 100 ms (each poll is API calls) until it holds or ctx ends.
func pollUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// objectView is what a stale write could change on an object (its status, and so its resourceVersion, moves on
// with the controllers).
type objectView struct {
	kind, fence, requestID string
	generation, replicas   int64
}

func snapshot(ctx context.Context, t *testing.T, c *Cluster) []objectView {
	t.Helper()
	var out []objectView
	for _, res := range []Resource{ResDeployment, ResService} {
		u, err := c.getObject(ctx, res, testNS, "fenced-ranker")
		if err != nil || u == nil {
			t.Fatalf("read %s: %v, %v", res.Kind, u, err)
		}
		v := objectView{kind: res.Kind, fence: u.GetAnnotations()[FenceAnnotation],
			requestID: u.GetLabels()[LabelRequestID], generation: u.GetGeneration()}
		v.replicas, _, _ = unstructured.NestedInt64(u.Object, "spec", "replicas")
		out = append(out, v)
	}
	return out
}

// settled waits until the deployment controller stopped writing the Deployment's status (the same resourceVersion
// twice, half a second apart, with the rollout observed): an apply carries the resourceVersion it read, so a status
// write in between would make it a conflict.
func settled(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, name string) {
	t.Helper()
	last := ""
	for {
		dep, err := cp.Client().AppsV1().Deployments(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dep.Status.ObservedGeneration == dep.Generation && dep.ResourceVersion == last {
			return
		}
		last = dep.ResourceVersion
		select {
		case <-ctx.Done():
			t.Fatalf("Deployment %s did not settle: %v", name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// apiCalls records the API requests that went over the wire, as "VERB resource[/name][ dryRun=All]".
type apiCalls struct {
	mu    sync.Mutex
	calls []string
}

func (a *apiCalls) add(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, s)
}

func (a *apiCalls) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = nil
}

func (a *apiCalls) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

type countingTransport struct {
	next  http.RoundTripper
	calls *apiCalls
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.add(describeCall(r))
	return c.next.RoundTrip(r)
}

// describeCall names a request by verb (GET of a collection is LIST), resource, name and dry run.
func describeCall(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return r.Method + " " + r.URL.Path // discovery and the like
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	verb := r.Method
	if verb == http.MethodGet && len(parts) == 1 {
		verb = "LIST"
	}
	s := verb + " " + strings.Join(parts, "/")
	if d := r.URL.Query().Get("dryRun"); d != "" {
		s += " dryRun=" + d
	}
	return s
}

// count is how many calls are exactly s ("PATCH jobs/x" is an apply, "PATCH jobs/x dryRun=All" a dry run).
func count(calls []string, s string) int {
	n := 0
	for _, c := range calls {
		if c == s {
			n++
		}
	}
	return n
}

func countPrefix(calls []string, p string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, p) {
			n++
		}
	}
	return n
}
