package scenarios

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
)

// Issue 21: a node HyperPod marks faulty (its instance Failure with a reason, its Kubernetes node labelled
// UnschedulablePendingReplacement and cordoned) appears as faulty, with the reason, in `/hp status` and in the
// capacity report.
func TestFaultyNodeInStatusAndReport(t *testing.T) {
	w := world(t, harness.Options{GPUNodes: 2})
	ctx := t.Context()
	hp, ok := w.AWS.HyperPodCluster(harness.HyperPod)
	if !ok || len(hp.InstanceGroups) == 0 || len(hp.InstanceGroups[0].Nodes) != 2 {
		t.Fatalf("fake HyperPod cluster = %+v", hp)
	}
	faulty := hp.InstanceGroups[0].Nodes[0]
	const reason = "GPU 3 reported Xid 79, fallen off the bus"
	if err := w.AWS.MarkNodeFaulty(harness.HyperPod, faulty.InstanceID, reason); err != nil {
		t.Fatal(err)
	}
	if err := w.Nodes.Err(); err != nil {
		t.Fatalf("mirroring the health into the API server: %v", err)
	}
	n, err := plane.Client().CoreV1().Nodes().Get(ctx, string(faulty.Name), metav1.GetOptions{})
	must(t, w, err)
	if h := n.Labels[fakeaws.LabelNodeHealth]; h != fakeaws.HealthPendingReplacement || !n.Spec.Unschedulable {
		t.Fatalf("node %s: health label %q, unschedulable %v; want %s and cordoned", n.Name, h, n.Spec.Unschedulable, fakeaws.HealthPendingReplacement)
	}

	_, err = w.Slash(ctx, harness.Alice, harness.OpsChannel, "status")
	must(t, w, err)
	_, err = w.WaitText(ctx, time.Minute, harness.OpsChannel, harness.Cluster, "1 node(s) not healthy", "1 healthy, 1 faulty",
		string(faulty.Name)+" faulty: "+reason+" (UnschedulablePendingReplacement, Failure)")
	must(t, w, err)

	_, err = w.Slash(ctx, harness.Alice, harness.OpsChannel, "report capacity cluster="+harness.Cluster)
	must(t, w, err)
	report, err := w.WaitMessage(ctx, 2*time.Minute, harness.OpsChannel, func(m fakeslack.Message) bool {
		return m.ThreadTS == "" && strings.HasPrefix(m.Text, "Capacity report: "+harness.Cluster)
	})
	must(t, w, err)
	text := harness.MessageText(report)
	for _, want := range []string{"1 healthy, 1 faulty", string(faulty.Name), "*faulty*: " + reason, "(UnschedulablePendingReplacement, Failure)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
}
