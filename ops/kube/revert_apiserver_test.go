package kube

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/pricing"
)

// TestRevertAgainstAPIServer reverts through the engine, with the records in real Redis, on a real API server: an
// inference rollout goes back to exactly the spec it replaced, and a deleted volume's revert is refused.
func TestRevertAgainstAPIServer(t *testing.T) {
	ctx, cp := startTestPlane(t, controlplane.Options{}, hyperPodNode)
	clients, err := clientsFor(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := NewClustersFromClients(testConfig(), map[string]Clients{testCluster: clients})
	if err != nil {
		t.Fatal(err)
	}
	store := opstest.NewRedisStore(t).Store
	reg := &registry{cs: cs, pricer: pricing.NewTable(nil), pollEvery: 100 * time.Millisecond, applied: store}
	catalog := ops.NewCatalog()
	reg.register(catalog)
	e := engine.New(catalog, store, store, nil, engine.Options{Replica: "r1", LockTTL: 10 * time.Second})
	submit := func(t *testing.T, id, op string, params map[string]any) *ops.Record {
		t.Helper()
		req := *request(op, params)
		req.ID = id
		rec, err := e.Submit(ctx, req)
		if err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("%s: %v, record %+v", id, err, rec)
		}
		return rec
	}
	deps := cp.Client().AppsV1().Deployments(testNS)
	get := func(t *testing.T) *appsv1.Deployment {
		t.Helper()
		d, err := deps.Get(ctx, "reverted", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	newImage := strings.Replace(allowedImg, ":v1", ":v2", 1)

	t.Run("a rollout's revert restores the exact spec it replaced", func(t *testing.T) {
		submit(t, "rv-deploy", "deploy-inference", deployParams(map[string]any{"name": "reverted", "replicas": "2", "cpu": "1"}))
		settled(ctx, t, cp, "reverted")
		before := get(t)
		rollout := submit(t, "rv-rollout", "rollout-inference", map[string]any{"name": "reverted", "image": newImage})
		settled(ctx, t, cp, "reverted")
		if img := get(t).Spec.Template.Spec.Containers[0].Image; img != newImage {
			t.Fatalf("after the rollout the image is %s, want %s", img, newImage)
		}
		ask := ops.Request{Initiator: ops.Initiator{Kind: ops.Human, ID: "U0BOB", Name: "bob"}, Origin: "button"}
		rev, err := e.Revert(ctx, rollout.ID(), ask)
		if err != nil || rev.Phase != ops.PhaseSucceeded {
			t.Fatalf("revert: %v, record %+v", err, rev)
		}
		settled(ctx, t, cp, "reverted")
		after := get(t)
		if !equality.Semantic.DeepEqual(before.Spec, after.Spec) {
			t.Errorf("the revert left another spec:\nbefore %+v\nafter  %+v", before.Spec, after.Spec)
		}
		if before.Annotations[AnnotationInferenceSpec] != after.Annotations[AnnotationInferenceSpec] {
			t.Errorf("inference-spec annotation %s, want the deploy's %s", after.Annotations[AnnotationInferenceSpec], before.Annotations[AnnotationInferenceSpec])
		}
		if rev.Request.Operation != "rollout-inference" || rev.Request.Reverts != rollout.ID() || len(rev.Plan.Warnings) != 0 {
			t.Errorf("revert request %+v, warnings %q", rev.Request, rev.Plan.Warnings)
		}
		old, err := e.Get(ctx, rollout.ID())
		if err != nil || old.RevertedBy != rev.ID() {
			t.Errorf("rollout record: revertedBy %q (%v), want %s", old.RevertedBy, err, rev.ID())
		}
	})

	t.Run("a volume's deletion cannot be reverted and says why", func(t *testing.T) {
		submit(t, "rv-create", "create-storage", map[string]any{"name": "scratch", "size": "1Gi", "storage-class": "gp3"})
		del := submit(t, "rv-delete", OpDeleteStorage, map[string]any{"name": "scratch"})
		rec, err := e.Revert(ctx, del.ID(), ops.Request{Initiator: ops.Initiator{Kind: ops.Human, ID: "U0BOB"}})
		wantCode(t, err, ops.CodeNotRevertible, "rv-delete", "delete-storage cannot be reverted", "its data for good")
		if e := ops.AsError(err); !strings.Contains(e.Next, "storage create name=scratch") {
			t.Errorf("next step %q, want a new claim", e.Next)
		}
		if rec != nil {
			t.Errorf("a refused revert returned a record %+v", rec)
		}
		recs, err := e.List(ctx, engine.ListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Request.Reverts == del.ID() {
				t.Errorf("a refused revert stored request %s", r.ID())
			}
		}
	})
}
