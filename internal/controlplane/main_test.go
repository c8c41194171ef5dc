package controlplane

import (
	"testing"

	"github.com/hyperops/hyperops/internal/leftover"
)

// TestMain fails the run if a goroutine leaks, or if any process or port the package
// started is still alive once every test is done.
func TestMain(m *testing.M) { leftover.Main(m, leftover.ControlPlane(Leftovers)) }
