package bot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops/kube"
)

func gpuNode(name string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("48"), kube.ResourceGPU: resource.MustParse("4")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		kube.LabelHyperPodGroup: "gpu-workers", "node.kubernetes.io/instance-type": "ml.g5.12xlarge"}},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// reportsWithChart returns the capacity report messages of a channel that show an uploaded PNG chart as an image.
func reportsWithChart(s fakeslack.Snapshot, ch string) (reports, charts int) {
	for _, m := range topLevel(s, ch) {
		if !strings.Contains(m.Text, "Capacity report: "+clusterTst) {
			continue
		}
		reports++
		for _, f := range s.Files {
			if f.Completed && bytes.HasPrefix(f.Content, pngMagic) && strings.Contains(string(m.Blocks), `"slack_file":{"id":"`+f.ID+`"}`) {
				charts++
			}
		}
	}
	return reports, charts
}

// A scheduled report is posted once by two replicas sharing Redis, with its chart in the message; report capacity
// posts the same report on demand.
func TestReportsScheduledOnceAndOnDemand(t *testing.T) {
	fc := newFakeCluster(gpuNode("gpu-1"), gpuNode("gpu-2"))
	opts := harnessOptions{replica: "a", clusters: fc.clusters(t), edit: func(c *config.Config) {
		c.Reports = []config.Report{{Name: "daily-capacity", Schedule: "1 9 * * *", Timezone: "UTC", Channel: chOps, Clusters: []string{clusterTst}}}
	}}
	h := startWith(t, opts)
	h.launchSecond(opts)

	h.clock.Advance(61 * time.Second) // 09:01:01, within the grace of the 09:01 tick
	s := h.waitFor("the scheduled report and its chart", func(s fakeslack.Snapshot) bool {
		_, charts := reportsWithChart(s, chOps)
		return charts == 1
	})
	if reports, _ := reportsWithChart(s, chOps); reports != 1 {
		t.Fatalf("%d scheduled reports posted, want 1", reports)
	}
	if m := topLevel(s, chOps)[0]; !strings.Contains(string(m.Blocks), "daily-capacity") {
		t.Errorf("report message does not name its report: %s", m.Blocks)
	}

	h.slash(userAlice, chOps, "report capacity cluster="+clusterTst)
	s = h.waitFor("the on-demand report and its chart", func(s fakeslack.Snapshot) bool {
		_, charts := reportsWithChart(s, chOps)
		return charts == 2
	})
	if reports, _ := reportsWithChart(s, chOps); reports != 2 {
		t.Errorf("%d reports, want the scheduled one and the on-demand one", reports)
	}
	h.slash(userAlice, chOps, "report capacity cluster=nope")
	h.waitFor("unknown cluster refused", func(s fakeslack.Snapshot) bool { return ephemeralWith(s, userAlice, "unknown cluster") })
}
