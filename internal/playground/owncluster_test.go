package playground

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/internal/planetest"
)

// TestOwnCluster runs the playground against "your" cluster through -kubeconfig (here a separate local control
// plane): a dry run is planned against that API server, and the playground adds no nodes to it (capacity changes
// stay in the fake AWS).
func TestOwnCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	plane := planetest.Start(t, ctx, controlplane.Options{})
	pg := startPlaygroundWith(t, Options{Kubeconfig: plane.Kubeconfig()})
	if pg.Plane != nil || !strings.Contains(pg.Mode(), plane.Kubeconfig()) {
		t.Fatalf("mode %q, plane %v: want the given kubeconfig and no control plane of the playground's", pg.Mode(), pg.Plane)
	}
	if a := pg.send(ctx, request{As: "engineer", Channel: OpsChannel, Text: Steps[0].Text}); !a.OK {
		t.Fatal(a.Error)
	}
	if _, err := pg.Slack.WaitFor(ctx, func(s fakeslack.Snapshot) bool {
		for _, m := range s.Messages[OpsChannel] {
			if text := m.Text + string(m.Blocks); strings.Contains(text, "submit-training-job") && strings.Contains(text, "validated by a server-side dry run") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no dry-run plan validated by the given cluster: %v", err)
	}
	nodes, err := plane.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("the playground added %d nodes to the given cluster; it must leave its nodes alone", len(nodes.Items))
	}
}
