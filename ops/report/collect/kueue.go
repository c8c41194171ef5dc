package collect

import (
	"github.com/hyperops/hyperops/ops/report"

	"context"
	"fmt"
	"slices"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// DynamicClients returns the dynamic client of a registered cluster, for the custom resources the report reads
// (Kueue's queues).
type DynamicClients func(cluster string) (dynamic.Interface, error)

// KueueGroup is Kueue's API group.
const KueueGroup = "kueue.x-k8s.io"

// KueueVersions are the versions of KueueGroup the report reads, in the order it tries them: Kueue 0.15 added
// v1beta2 and 0.20 stopped serving v1beta1, so the newer one goes first and the older one covers older installs. The
// fields the report reads are the same in both except the cohort (spec.cohortName, formerly spec.cohort).
var KueueVersions = []string{"v1beta2", "v1beta1"}

// Kueue's resources, as the dynamic client names them. The calls spell out their GroupVersionResource, so the
// chart's RBAC test sees which resources the report lists.
const (
	ResourceClusterQueues = "clusterqueues"
	ResourceLocalQueues   = "localqueues"
)

// readKueue reads the LocalQueues named queue in namespaces (all namespaces when empty) and the ClusterQueues they
// submit to. A cluster that serves no Kueue API is a Kueue with Installed false, not an error.
func readKueue(ctx context.Context, dc dynamic.Interface, queue string, namespaces []string, res string) (*report.Kueue, error) {
	k := &report.Kueue{Queue: queue, Resource: res}
	for _, v := range KueueVersions {
		lqs, err := readLocalQueues(ctx, dc, v, queue, namespaces)
		if apierrors.IsNotFound(err) {
			continue // this version is not served: a 404 for the resource, as for any absent CRD
		}
		if err != nil {
			return nil, err
		}
		k.Installed, k.Version, k.LocalQueues = true, v, lqs
		break
	}
	if !k.Installed || len(k.LocalQueues) == 0 {
		return k, nil
	}
	wanted := map[string]bool{}
	for _, lq := range k.LocalQueues {
		if lq.ClusterQueue != "" {
			wanted[lq.ClusterQueue] = true
		}
	}
	cqs, err := readClusterQueues(ctx, dc, k.Version, wanted, res)
	if err != nil {
		return nil, err
	}
	k.ClusterQueues = cqs
	return k, nil
}

func readLocalQueues(ctx context.Context, dc dynamic.Interface, version, queue string, namespaces []string) ([]report.LocalQueue, error) {
	var out []report.LocalQueue
	err := listPages(ctx, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", queue).String()
		l, err := dc.Resource(schema.GroupVersionResource{Group: KueueGroup, Version: version, Resource: ResourceLocalQueues}).
			Namespace(metav1.NamespaceAll).List(ctx, o)
		if err != nil {
			return "", fmt.Errorf("list %s localqueues: %w", version, err)
		}
		for i := range l.Items {
			u := &l.Items[i]
			// The server applies the selector; a fake or proxy that ignores it may not.
			if u.GetName() != queue || (len(namespaces) > 0 && !slices.Contains(namespaces, u.GetNamespace())) {
				continue
			}
			cq, _, _ := unstructured.NestedString(u.Object, "spec", "clusterQueue")
			out = append(out, report.LocalQueue{Namespace: u.GetNamespace(), Name: u.GetName(), ClusterQueue: cq,
				Pending: intField(u, "status", "pendingWorkloads"), Admitted: intField(u, "status", "admittedWorkloads")})
		}
		return l.GetContinue(), nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, err
}

// readClusterQueues lists the ClusterQueues and keeps the wanted ones; a wanted one the cluster lacks is Missing.
func readClusterQueues(ctx context.Context, dc dynamic.Interface, version string, wanted map[string]bool, res string) ([]report.ClusterQueue, error) {
	found := map[string]report.ClusterQueue{}
	err := listPages(ctx, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := dc.Resource(schema.GroupVersionResource{Group: KueueGroup, Version: version, Resource: ResourceClusterQueues}).List(ctx, o)
		if err != nil {
			return "", fmt.Errorf("list %s clusterqueues: %w", version, err)
		}
		for i := range l.Items {
			if u := &l.Items[i]; wanted[u.GetName()] {
				found[u.GetName()] = clusterQueueOf(u, res)
			}
		}
		return l.GetContinue(), nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]report.ClusterQueue, 0, len(wanted))
	for name := range wanted {
		cq, ok := found[name]
		if !ok {
			cq = report.ClusterQueue{Name: name, Missing: true}
		}
		out = append(out, cq)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// clusterQueueOf reads a ClusterQueue's quota of res (spec.resourceGroups[].flavors[].resources[]) and its use
// (status.flavorsUsage[].resources[]), summed over flavors.
func clusterQueueOf(u *unstructured.Unstructured, res string) report.ClusterQueue {
	q := report.ClusterQueue{Name: u.GetName(), Pending: intField(u, "status", "pendingWorkloads"),
		Reserving: intField(u, "status", "reservingWorkloads"), Admitted: intField(u, "status", "admittedWorkloads")}
	q.Cohort, _, _ = unstructured.NestedString(u.Object, "spec", "cohortName")
	if q.Cohort == "" {
		q.Cohort, _, _ = unstructured.NestedString(u.Object, "spec", "cohort") // v1beta1's name for it
	}
	var limit int64
	unlimited := false
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourceGroups")
	for _, g := range maps(groups) {
		flavors, _, _ := unstructured.NestedSlice(g, "flavors")
		for _, f := range maps(flavors) {
			r := resourceEntry(f, res)
			if r == nil {
				continue
			}
			name, _, _ := unstructured.NestedString(f, "name")
			q.Covered = true
			q.Flavors = append(q.Flavors, name)
			q.Nominal += quantity(r["nominalQuota"])
			if b, ok := r["borrowingLimit"]; ok && b != nil {
				limit += quantity(b)
			} else {
				unlimited = true
			}
		}
	}
	if q.Cohort != "" && !unlimited {
		q.BorrowingLimit = &limit
	}
	usage, _, _ := unstructured.NestedSlice(u.Object, "status", "flavorsUsage")
	for _, f := range maps(usage) {
		if r := resourceEntry(f, res); r != nil {
			q.Used += quantity(r["total"])
			q.Borrowed += quantity(r["borrowed"])
		}
	}
	return q
}

// resourceEntry finds the entry of res in a flavor's resources list.
func resourceEntry(flavor map[string]any, res string) map[string]any {
	list, _, _ := unstructured.NestedSlice(flavor, "resources")
	for _, r := range maps(list) {
		if name, _, _ := unstructured.NestedString(r, "name"); name == res {
			return r
		}
	}
	return nil
}

func maps(list []any) []map[string]any {
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// quantity reads a resource quantity as Kueue's CRD stores it (int-or-string: 8, "8", "500m"), rounded up to a whole
// unit; anything else counts as zero, since the API server has already validated the field.
func quantity(v any) int64 {
	switch x := v.(type) {
	case string:
		q, err := resource.ParseQuantity(x)
		if err != nil {
			return 0
		}
		return q.Value()
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return resource.NewMilliQuantity(int64(x*1000), resource.DecimalSI).Value()
	}
	return 0
}

// intField reads an integer status field; absent (Kueue has not written its status yet) is zero.
func intField(u *unstructured.Unstructured, path ...string) int64 {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if !found || err != nil {
		return 0
	}
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return int64(x)
	}
	return 0
}
