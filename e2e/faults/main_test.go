package faults

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hyperops/hyperops/internal/controlplane"
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
	goleak.VerifyTestMain(planeRun{m})
}

type planeRun struct{ m *testing.M }

func (r planeRun) Run() int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	plane, err = controlplane.Start(ctx, controlplane.Options{WithCRDs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: start the control plane:", err)
		return 1
	}
	code := r.m.Run()
	if err := plane.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "faults: stop the control plane:", err)
		code = 1
	}
	if err := controlplane.Leftovers(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: control-plane leftovers after the run:\n%v\n", err)
		code = 1
	}
	return code
}
