package scenarios

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/leftover"
)

// The control plane and the bot binary are shared by every scenario: starting the plane takes seconds and
// building the bot much longer. Each scenario gets its own Slack, AWS, Redis and replicas (harness.Start).
var (
	plane  *controlplane.ControlPlane
	botBin string
)

// TestMain builds the bot, starts the control plane, runs the scenarios, stops everything and fails the run if
// any process or port of the plane or of a bot replica is left behind. A missing binary or a failed start fails
// the run: this tier never skips.
func TestMain(m *testing.M) {
	os.Exit(leftover.Around(m, setUp,
		leftover.ControlPlane(controlplane.Leftovers),
		leftover.Check{What: "bot leftovers after the run", Find: harness.Leftovers}))
}

// setUp builds the bot into a temporary directory and starts the shared control plane; its stop undoes both.
func setUp() (func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "hyperops-e2e-bot-")
	if err != nil {
		return nil, fmt.Errorf("e2e: temp dir: %w", err)
	}
	if botBin, err = harness.BuildBot(ctx, dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("e2e: %w", err)
	}
	if plane, err = controlplane.Start(ctx, controlplane.Options{WithCRDs: true}); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("e2e: start the control plane: %w", err)
	}
	return func() error {
		defer os.RemoveAll(dir)
		return plane.Stop()
	}, nil
}

// world starts a scenario's world over the shared plane.
func world(t *testing.T, opts harness.Options) *harness.World {
	t.Helper()
	return harness.Start(t, plane, botBin, opts)
}

// must fails the test with the replicas' logs when err is set.
func must(t *testing.T, w *harness.World, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Logs())
	}
}
