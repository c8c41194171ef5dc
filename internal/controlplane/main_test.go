package controlplane

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine leaks, or if any process or port the package
// started is still alive once every test is done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(leftoverCheck{m})
}

type leftoverCheck struct{ m *testing.M }

func (c leftoverCheck) Run() int {
	code := c.m.Run()
	if err := Leftovers(); err != nil {
		fmt.Fprintf(os.Stderr, "control-plane leftovers after the run:\n%v\n", err)
		return 1
	}
	return code
}
