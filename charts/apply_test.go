package charts

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// TestApplyToAPIServer applies the chart (every option on except the ServiceMonitor, whose CRD the plane lacks) to
// a real kube-apiserver, first as a server-side dry run and then for real, and asks the API server with
// SubjectAccessReviews what the chart's service account may do: everything the code calls, and nothing beyond.
func TestApplyToAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{WithCRDs: true})
	if err != nil {
		t.Fatalf("start the control plane (make e2e-tools builds it): %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	admin := cp.Client()
	for _, ns := range []string{releaseNS, "ml-platform", "ml-research", "other-team"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}

	vals := readValues(t, "all-on.yaml")
	vals["metrics"].(map[string]any)["serviceMonitor"].(map[string]any)["enabled"] = false
	out, err := renderChart(loadChart(t), vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r, err := decodeRendered(out)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClient(admin.Discovery().RESTClient())))
	for _, dryRun := range []bool{true, false} {
		for _, m := range r.Manifests {
			if err := applyManifest(ctx, cp, mapper, m, dryRun); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range r.Manifests {
		gvk := m.Obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Dynamic().Resource(mapping.Resource).Namespace(m.Obj.GetNamespace()).Get(ctx, m.Obj.GetName(),
			metav1.GetOptions{}); err != nil {
			t.Errorf("%s after apply: %v", m.ID(), err)
		}
	}

	sa := "system:serviceaccount:" + releaseNS + ":hyperops-executor"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNS, "system:authenticated"}
	t.Run("SubjectAccessReview", func(t *testing.T) { checkAccess(ctx, t, admin, sa, groups) })
	t.Run("as the service account", func(t *testing.T) { actAsServiceAccount(ctx, t, cp, sa, groups) })
}

func applyManifest(ctx context.Context, cp *controlplane.ControlPlane, mapper *restmapper.DeferredDiscoveryRESTMapper,
	m manifest, dryRun bool) error {
	gvk := m.Obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: the API server does not serve it: %w", m.ID(), err)
	}
	data, err := m.Obj.MarshalJSON()
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "helm", Force: ptr.To(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = cp.Dynamic().Resource(mapping.Resource).Namespace(m.Obj.GetNamespace()).
		Patch(ctx, m.Obj.GetName(), types.ApplyPatchType, data, opts)
	if err != nil {
		return fmt.Errorf("apply %s (dry run %v): %w", m.ID(), dryRun, err)
	}
	return nil
}

type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	res := a.resource
	if a.subresource != "" {
		res += "/" + a.subresource
	}
	if a.group != "" {
		res = a.group + "/" + res
	}
	return fmt.Sprintf("%s %s ns=%q name=%q", a.verb, res, a.namespace, a.name)
}

// checkAccess asks the API server whether the service account may do what the code does (scanned from ops/ and
// bot/, plus the informers' list and watch) and may not do what would make it more than an operator of workloads.
func checkAccess(ctx context.Context, t *testing.T, admin kubernetes.Interface, user string, groups []string) {
	used, err := scanKubeCalls(repoPaths("ops", "bot"))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[access]bool{}
	for _, g := range used {
		res, sub, _ := strings.Cut(g.Resource, "/")
		if g.ClusterWide {
			allowed[access{verb: g.Verb, group: g.Group, resource: res, subresource: sub}] = true
			continue
		}
		for _, ns := range []string{"ml-platform", "ml-research"} {
			name := ""
			if res == "namespaces" {
				name = ns // a namespace reads itself only
			}
			allowed[access{verb: g.Verb, group: g.Group, resource: res, subresource: sub, namespace: ns, name: name}] = true
		}
	}
	for _, kind := range []access{{group: "batch", resource: "jobs"}, {group: "apps", resource: "deployments"},
		{resource: "pods"}, {resource: "events"}, {group: "kubeflow.org", resource: "pytorchjobs"},
		{group: "sagemaker.amazonaws.com", resource: "hyperpodpytorchjobs"}} {
		for _, verb := range []string{"list", "watch"} { // the watchers' informers
			kind.verb, kind.namespace = verb, "ml-platform"
			allowed[kind] = true
		}
	}
	allowed[access{verb: "impersonate", resource: "users", name: "slack:U0LEAD1"}] = true
	allowed[access{verb: "impersonate", resource: "groups", name: "hyperops:agents"}] = true

	denied := []access{
		{verb: "get", resource: "secrets", namespace: "other-team", name: "db"},
		{verb: "list", resource: "secrets", namespace: "other-team"},
		{verb: "list", resource: "secrets"},
		{verb: "get", resource: "secrets", namespace: "ml-platform", name: "db"},
		{verb: "get", resource: "secrets", namespace: releaseNS, name: "slack-tokens"},
		{verb: "delete", resource: "nodes", name: "hp-gpu-0"},
		{verb: "patch", resource: "nodes", name: "hp-gpu-0"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: "ml-platform"},
		{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "cluster-admin"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "roles", namespace: "ml-platform"},
		{verb: "create", resource: "pods", namespace: "ml-platform"},
		{verb: "create", resource: "pods", subresource: "exec", namespace: "ml-platform"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "ml-platform", name: "default"},
		{verb: "create", group: "batch", resource: "jobs", namespace: "other-team"},
		{verb: "delete", group: "apps", resource: "deployments", namespace: "kube-system"},
		{verb: "get", resource: "namespaces", name: "kube-system"},
		{verb: "delete", resource: "namespaces", namespace: "ml-platform", name: "ml-platform"},
		{verb: "impersonate", resource: "users", name: "kubernetes-admin"},
		{verb: "impersonate", resource: "groups", name: "system:masters"},
		{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system", name: "default"},
		{verb: "update", group: "apps", resource: "deployments", namespace: "ml-platform"},
	}
	want := maps.Clone(allowed)
	for _, a := range denied {
		want[a] = false
	}
	for a, ok := range want {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource,
				Subresource: a.subresource, Namespace: a.namespace, Name: a.name},
		}}
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview %s: %v", a, err)
		}
		if got.Status.Allowed != ok {
			t.Errorf("%s: allowed = %v, want %v (%s)", a, got.Status.Allowed, ok, got.Status.Reason)
		}
	}
	t.Logf("%d access reviews (%d allowed, %d denied)", len(want), len(allowed), len(denied))
}

// actAsServiceAccount uses a client that authenticates as the service account: the smoke test's namespace read and
// a server-side dry-run apply of a Job (patch that creates) work in an allowed namespace, and not elsewhere.
func actAsServiceAccount(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, user string, groups []string) {
	cfg, err := cp.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Namespaces().Get(ctx, "ml-platform", metav1.GetOptions{}); err != nil {
		t.Errorf("get its own namespace ml-platform: %v", err)
	}
	if _, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list nodes: %v", err)
	}
	job := []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"hyperops-verify"},"spec":{"template":{"spec":` +
		`{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox","command":["true"]}]}}}}`)
	opts := metav1.PatchOptions{FieldManager: "hyperops", Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}}
	if _, err := kc.BatchV1().Jobs("ml-platform").Patch(ctx, "hyperops-verify", types.ApplyPatchType, job, opts); err != nil {
		t.Errorf("server-side apply (dry run) of a Job in ml-platform: %v", err)
	}
	var forbidden []error
	_, err = kc.BatchV1().Jobs("other-team").Patch(ctx, "hyperops-verify", types.ApplyPatchType, job, opts)
	forbidden = append(forbidden, err)
	_, err = kc.CoreV1().Secrets("other-team").List(ctx, metav1.ListOptions{})
	forbidden = append(forbidden, err)
	err = kc.CoreV1().Nodes().Delete(ctx, "no-such-node", metav1.DeleteOptions{})
	forbidden = append(forbidden, err)
	_, err = kc.BatchV1().Jobs("ml-platform").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("list jobs in ml-platform: %v", err)
	}
	for i, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("forbidden call %d: err = %v, want Forbidden", i, err)
		}
	}
}
