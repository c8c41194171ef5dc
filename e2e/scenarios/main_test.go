package scenarios

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/controlplane"
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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "hyperops-e2e-bot-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if botBin, err = harness.BuildBot(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	plane, err = controlplane.Start(ctx, controlplane.Options{WithCRDs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start the control plane:", err)
		return 1
	}
	code := m.Run()
	if err := plane.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stop the control plane:", err)
		code = 1
	}
	if err := controlplane.Leftovers(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: control-plane leftovers after the run:\n%v\n", err)
		code = 1
	}
	if err := harness.Leftovers(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: bot leftovers after the run:\n%v\n", err)
		code = 1
	}
	return code
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
