package collect

import (
	"github.com/hyperops/hyperops/ops/report"

	"context"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hyperops/hyperops/config"
)

// The objects below are shaped as Kueue's CRDs (kueue.x-k8s.io v1beta2, and v1beta1 where it differs: spec.cohort).

type flavorQuota struct {
	name                   string
	gpu, cpu               any
	borrowingLimit         any // nil: no limit
	usedGPU, borrowedGPU   any
	withoutGPU, withoutUse bool
}

func clusterQueueObj(version, name, cohort string, pending, reserving, admitted int64, flavors ...flavorQuota) *unstructured.Unstructured {
	var specFlavors, usage []any
	covered := []any{"cpu", "nvidia.com/gpu"}
	for _, f := range flavors {
		res := []any{map[string]any{"name": "cpu", "nominalQuota": f.cpu}}
		if !f.withoutGPU {
			gpu := map[string]any{"name": "nvidia.com/gpu", "nominalQuota": f.gpu}
			if f.borrowingLimit != nil {
				gpu["borrowingLimit"] = f.borrowingLimit
			}
			res = append(res, gpu)
		}
		specFlavors = append(specFlavors, map[string]any{"name": f.name, "resources": res})
		if f.withoutUse {
			continue
		}
		used := []any{map[string]any{"name": "cpu", "total": "96", "borrowed": "0"}}
		if !f.withoutGPU {
			used = append(used, map[string]any{"name": "nvidia.com/gpu", "total": f.usedGPU, "borrowed": f.borrowedGPU})
		}
		usage = append(usage, map[string]any{"name": f.name, "resources": used})
	}
	if len(flavors) > 0 && flavors[0].withoutGPU {
		covered = []any{"cpu"}
	}
	spec := map[string]any{
		"namespaceSelector": map[string]any{},
		"queueingStrategy":  "BestEffortFIFO",
		"resourceGroups":    []any{map[string]any{"coveredResources": covered, "flavors": specFlavors}},
	}
	if cohort != "" {
		key := "cohortName"
		if version == "v1beta1" {
			key = "cohort"
		}
		spec[key] = cohort
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KueueGroup + "/" + version, "kind": "ClusterQueue",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
		"status": map[string]any{
			"flavorsReservation": usage, "flavorsUsage": usage,
			"pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": admitted,
		},
	}}
}

func localQueueObj(version, namespace, name, clusterQueue string, pending, admitted int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KueueGroup + "/" + version, "kind": "LocalQueue",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"clusterQueue": clusterQueue},
		"status": map[string]any{
			"pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted,
			"flavorsUsage": []any{map[string]any{"name": "p5", "resources": []any{map[string]any{"name": "nvidia.com/gpu", "total": "8"}}}},
		},
	}}
}

func kueueResource(version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: KueueGroup, Version: version, Resource: resource}
}

// kueueFake is a dynamic client serving Kueue's list kinds in both versions; notServed versions answer 404 as an API
// server does for a resource no CRD defines.
func kueueFake(notServed []string, objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	kinds := map[schema.GroupVersionResource]string{}
	for _, v := range KueueVersions {
		kinds[kueueResource(v, ResourceClusterQueues)] = "ClusterQueueList"
		kinds[kueueResource(v, ResourceLocalQueues)] = "LocalQueueList"
	}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, objs...)
	dc.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		gvr := a.GetResource()
		for _, v := range notServed {
			if gvr.Group == KueueGroup && gvr.Version == v {
				return true, nil, apierrors.NewNotFound(gvr.GroupResource(), "")
			}
		}
		return false, nil, nil
	})
	return dc
}

func kueueBuilder(dc dynamic.Interface) *Builder {
	b, _ := newBuilder(fixture(), nil, nil)
	b.Dynamic = func(string) (dynamic.Interface, error) { return dc, nil }
	return b
}

var kueueSpec = Spec{Report: "daily-capacity", Cluster: "ml-prod-eks", Region: "us-west-2", KueueQueue: "team-a",
	Namespaces: []string{"ml-platform", "research"}}

func ptr[T any](v T) *T { return &v }

func TestBuildKueueQueues(t *testing.T) {
	tests := []struct {
		name      string
		notServed []string
		objs      []runtime.Object
		want      *report.Kueue
	}{
		{
			name: "queue borrowing from its cohort",
			objs: []runtime.Object{
				clusterQueueObj("v1beta2", "team-a-cq", "gpu-pool", 0, 2, 2,
					flavorQuota{name: "p5", gpu: "16", cpu: "192", borrowingLimit: "8", usedGPU: "24", borrowedGPU: "8"},
					flavorQuota{name: "p4d", gpu: int64(8), cpu: "96", borrowingLimit: int64(0), usedGPU: int64(8), borrowedGPU: int64(0)}),
				clusterQueueObj("v1beta2", "team-b-cq", "gpu-pool", 0, 0, 0, flavorQuota{name: "p5", gpu: "16", cpu: "192", usedGPU: "0", borrowedGPU: "0"}),
				localQueueObj("v1beta2", "ml-platform", "team-a", "team-a-cq", 0, 2),
				localQueueObj("v1beta2", "ml-platform", "team-b", "team-b-cq", 0, 0),
			},
			want: &report.Kueue{Installed: true, Version: "v1beta2", Queue: "team-a", Resource: "nvidia.com/gpu",
				LocalQueues: []report.LocalQueue{{Namespace: "ml-platform", Name: "team-a", ClusterQueue: "team-a-cq", Admitted: 2}},
				ClusterQueues: []report.ClusterQueue{{Name: "team-a-cq", Cohort: "gpu-pool", Covered: true, Flavors: []string{"p5", "p4d"},
					Nominal: 24, BorrowingLimit: ptr(int64(8)), Used: 32, Borrowed: 8, Reserving: 2, Admitted: 2}},
			},
		},
		{
			name: "queue with pending workloads, no borrowing limit, in two namespaces",
			objs: []runtime.Object{
				clusterQueueObj("v1beta2", "shared-cq", "gpu-pool", 5, 3, 3,
					flavorQuota{name: "p5", gpu: int64(64), cpu: "1536", usedGPU: int64(64), borrowedGPU: int64(0)}),
				localQueueObj("v1beta2", "ml-platform", "team-a", "shared-cq", 3, 2),
				localQueueObj("v1beta2", "research", "team-a", "shared-cq", 2, 1),
				// Not the cluster's namespaces: another team's queue of the same name.
				localQueueObj("v1beta2", "other-team", "team-a", "other-cq", 9, 9),
			},
			want: &report.Kueue{Installed: true, Version: "v1beta2", Queue: "team-a", Resource: "nvidia.com/gpu",
				LocalQueues: []report.LocalQueue{
					{Namespace: "ml-platform", Name: "team-a", ClusterQueue: "shared-cq", Pending: 3, Admitted: 2},
					{Namespace: "research", Name: "team-a", ClusterQueue: "shared-cq", Pending: 2, Admitted: 1},
				},
				ClusterQueues: []report.ClusterQueue{{Name: "shared-cq", Cohort: "gpu-pool", Covered: true, Flavors: []string{"p5"},
					Nominal: 64, Used: 64, Pending: 5, Reserving: 3, Admitted: 3}},
			},
		},
		{
			name:      "only v1beta1 served (Kueue before 0.15)",
			notServed: []string{"v1beta2"},
			objs: []runtime.Object{
				clusterQueueObj("v1beta1", "team-a-cq", "gpu-pool", 1, 1, 1,
					flavorQuota{name: "p5", gpu: "8", cpu: "192", borrowingLimit: "4", usedGPU: "12", borrowedGPU: "4"}),
				localQueueObj("v1beta1", "ml-platform", "team-a", "team-a-cq", 1, 1),
			},
			want: &report.Kueue{Installed: true, Version: "v1beta1", Queue: "team-a", Resource: "nvidia.com/gpu",
				LocalQueues: []report.LocalQueue{{Namespace: "ml-platform", Name: "team-a", ClusterQueue: "team-a-cq", Pending: 1, Admitted: 1}},
				ClusterQueues: []report.ClusterQueue{{Name: "team-a-cq", Cohort: "gpu-pool", Covered: true, Flavors: []string{"p5"},
					Nominal: 8, BorrowingLimit: ptr(int64(4)), Used: 12, Borrowed: 4, Pending: 1, Reserving: 1, Admitted: 1}},
			},
		},
		{
			name: "ClusterQueue without GPU quota, without a cohort, and one that does not exist",
			objs: []runtime.Object{
				clusterQueueObj("v1beta2", "cpu-cq", "", 0, 0, 0, flavorQuota{name: "default", cpu: "64", withoutGPU: true}),
				localQueueObj("v1beta2", "ml-platform", "team-a", "cpu-cq", 0, 0),
				localQueueObj("v1beta2", "research", "team-a", "deleted-cq", 4, 0),
			},
			want: &report.Kueue{Installed: true, Version: "v1beta2", Queue: "team-a", Resource: "nvidia.com/gpu",
				LocalQueues: []report.LocalQueue{
					{Namespace: "ml-platform", Name: "team-a", ClusterQueue: "cpu-cq"},
					{Namespace: "research", Name: "team-a", ClusterQueue: "deleted-cq", Pending: 4},
				},
				ClusterQueues: []report.ClusterQueue{{Name: "cpu-cq"}, {Name: "deleted-cq", Missing: true}},
			},
		},
		{
			name: "no LocalQueue of that name",
			objs: []runtime.Object{localQueueObj("v1beta2", "ml-platform", "team-b", "team-b-cq", 0, 0)},
			want: &report.Kueue{Installed: true, Version: "v1beta2", Queue: "team-a", Resource: "nvidia.com/gpu"},
		},
		{
			name:      "CRD missing",
			notServed: KueueVersions,
			want:      &report.Kueue{Queue: "team-a", Resource: "nvidia.com/gpu"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := kueueBuilder(kueueFake(tt.notServed, tt.objs...)).Build(context.Background(), kueueSpec)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if len(r.Warnings) != 0 {
				t.Errorf("warnings %q, want none", r.Warnings)
			}
			if !reflect.DeepEqual(r.Kueue, tt.want) {
				t.Errorf("kueue:\n got %+v\nwant %+v", r.Kueue, tt.want)
			}
			if r.GPUs.Total != 28 || r.Pending.Pods != 2 {
				t.Errorf("the rest of the report changed: GPUs %+v, pending %+v", r.GPUs, r.Pending)
			}
		})
	}
}

func TestBuildKueueNotConfigured(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		{"no queue in the cluster's config", prodSpec},
		{"queues section not shown", func() Spec { s := kueueSpec; s.Sections = []string{report.SectionGPUs, report.SectionSpend}; return s }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := kueueFake(nil, localQueueObj("v1beta2", "ml-platform", "team-a", "team-a-cq", 1, 1))
			r, err := kueueBuilder(dc).Build(context.Background(), tt.spec)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if r.Kueue != nil || len(r.Warnings) != 0 {
				t.Errorf("kueue %+v, warnings %q; want neither", r.Kueue, r.Warnings)
			}
			if n := len(dc.Actions()); n != 0 {
				t.Errorf("%d calls to the dynamic client (%v), want none", n, dc.Actions())
			}
		})
	}
}

func TestBuildKueueUnreadableIsAWarning(t *testing.T) {
	dc := kueueFake(nil)
	dc.PrependReactor("list", "localqueues", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", nil)
	})
	r, err := kueueBuilder(dc).Build(context.Background(), kueueSpec)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if r.Kueue != nil {
		t.Errorf("kueue = %+v, want nil", r.Kueue)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "Kueue queues unavailable") || !strings.Contains(r.Warnings[0], "forbidden") {
		t.Errorf("warnings = %q, want one saying the Kueue queues are unavailable because of RBAC", r.Warnings)
	}
	if r.GPUs.Total != 28 {
		t.Errorf("GPUs = %+v: the rest of the report must stand", r.GPUs)
	}
}

// pagingDynamic is a dynamic client whose lists return one item a page, as a server may return fewer than the limit;
// the continue token is the offset of the next item. It records the options of every list.
type pagingDynamic struct {
	dynamic.Interface
	asked *[]metav1.ListOptions
}

func (p pagingDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return pagingResource{p.Interface.Resource(gvr), p.asked}
}

type pagingResource struct {
	dynamic.NamespaceableResourceInterface
	asked *[]metav1.ListOptions
}

func (r pagingResource) Namespace(ns string) dynamic.ResourceInterface {
	return pagingList{r.NamespaceableResourceInterface.Namespace(ns), r.asked}
}

func (r pagingResource) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return pagingList{r.NamespaceableResourceInterface, r.asked}.List(ctx, o)
}

type pagingList struct {
	dynamic.ResourceInterface
	asked *[]metav1.ListOptions
}

func (l pagingList) List(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	*l.asked = append(*l.asked, o)
	all, err := l.ResourceInterface.List(ctx, o)
	if err != nil {
		return nil, err
	}
	sort.Slice(all.Items, func(i, j int) bool {
		return all.Items[i].GetNamespace()+"/"+all.Items[i].GetName() < all.Items[j].GetNamespace()+"/"+all.Items[j].GetName()
	})
	at := 0
	if o.Continue != "" {
		at, _ = strconv.Atoi(o.Continue)
	}
	page := &unstructured.UnstructuredList{Object: all.Object}
	if at < len(all.Items) {
		page.Items = all.Items[at : at+1]
	}
	if at+1 < len(all.Items) {
		page.SetContinue(strconv.Itoa(at + 1))
	}
	return page, nil
}

func TestBuildKueueReadsEveryPage(t *testing.T) {
	var asked []metav1.ListOptions
	dc := pagingDynamic{Interface: kueueFake(nil,
		clusterQueueObj("v1beta2", "a-other-cq", "", 0, 0, 0, flavorQuota{name: "p5", gpu: "8", cpu: "1", usedGPU: "0", borrowedGPU: "0"}),
		clusterQueueObj("v1beta2", "shared-cq", "", 2, 1, 1, flavorQuota{name: "p5", gpu: "8", cpu: "1", usedGPU: "8", borrowedGPU: "0"}),
		localQueueObj("v1beta2", "ml-platform", "team-a", "shared-cq", 1, 1),
		localQueueObj("v1beta2", "research", "team-a", "shared-cq", 1, 0),
	), asked: &asked}
	b := kueueBuilder(dc)
	r, err := b.Build(context.Background(), kueueSpec)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if r.Kueue == nil || len(r.Kueue.LocalQueues) != 2 || len(r.Kueue.ClusterQueues) != 1 || r.Kueue.ClusterQueues[0].Pending != 2 ||
		r.Kueue.ClusterQueues[0].Missing {
		t.Fatalf("kueue = %+v, want both pages' LocalQueues and the ClusterQueue on the second page", r.Kueue)
	}
	// Two LocalQueue pages, then two ClusterQueue pages.
	if len(asked) != 4 {
		t.Fatalf("%d lists, want 4: %+v", len(asked), asked)
	}
	for i, o := range asked {
		if o.Limit != listPageSize || (i%2 == 1) != (o.Continue != "") {
			t.Errorf("list %d options = %+v, want a limit of %d and the continue token on each second page", i, o, listPageSize)
		}
	}
	if asked[0].FieldSelector != "metadata.name=team-a" {
		t.Errorf("LocalQueue list selects %q, want metadata.name=team-a", asked[0].FieldSelector)
	}
}

func TestSpecsForCarriesKueue(t *testing.T) {
	cfg := &config.Config{Clusters: []config.Cluster{{Name: "a", Namespaces: []string{"ml-platform"}, Kueue: config.Kueue{Queue: "team-a"}}}}
	specs := SpecsFor(cfg, &config.Report{Name: "r", Timezone: "UTC"})
	if len(specs) != 1 || specs[0].KueueQueue != "team-a" || !reflect.DeepEqual(specs[0].Namespaces, []string{"ml-platform"}) {
		t.Errorf("specs = %+v, want the cluster's Kueue queue and namespaces", specs)
	}
}
