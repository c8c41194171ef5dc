package faults

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/leftover"
)

// plane is the control plane every cell's world shares; each cell has its own objects in it.
var plane *controlplane.ControlPlane

// cellsAtOnce is how many cells run in parallel unless -parallel says otherwise: cells mostly wait (on
// transitions, retries, held requests), so more than the machine's cores fit.
const cellsAtOnce = 8

// TestMain starts the control plane, runs the matrix, and fails the run if a goroutine of an in-process bot, or
// a process or port of the plane, is left behind. A missing binary fails the run: this tier never skips.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", fmt.Sprint(cellsAtOnce))
	}
	leftover.MainAround(m, startPlane, leftover.ControlPlane(controlplane.Leftovers))
}

// startPlane starts the shared control plane and returns how to stop it.
func startPlane() (func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if plane, err = controlplane.Start(ctx, controlplane.Options{WithCRDs: true}); err != nil {
		return nil, fmt.Errorf("faults: start the control plane: %w", err)
	}
	return plane.Stop, nil
}
