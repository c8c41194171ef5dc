// Package planetest is the test kit for tests that run against a real local control plane (internal/controlplane):
// it starts one for the test and stops it at the end, and adds nodes that are ready before it returns.
package planetest

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// Start starts a control plane with opts for the test, stops it when the test ends, and fails the test at once
// when it cannot start.
func Start(t testing.TB, ctx context.Context, opts controlplane.Options) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start the control plane (make e2e-tools builds it): %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	return cp
}

// AddReadyNodes adds the nodes to the control plane and waits until each is ready, failing the test at once on
// any error.
func AddReadyNodes(t testing.TB, ctx context.Context, cp *controlplane.ControlPlane, nodes ...controlplane.NodeSpec) {
	t.Helper()
	for _, n := range nodes {
		if _, err := cp.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.WaitNodeReady(ctx, n.Name); err != nil {
			t.Fatal(err)
		}
	}
}
