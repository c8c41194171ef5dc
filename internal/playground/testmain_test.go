package playground

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/hyperops/hyperops/internal/controlplane"
)

// TestMain fails the run if a goroutine leaks, or if a control-plane process or port outlived its playground.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(leftoverCheck{m})
}

type leftoverCheck struct{ m *testing.M }

func (c leftoverCheck) Run() int {
	code := c.m.Run()
	if err := controlplane.Leftovers(); err != nil {
		fmt.Fprintf(os.Stderr, "control-plane leftovers after the run:\n%v\n", err)
		return 1
	}
	return code
}
