package playground

import (
	"testing"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/leftover"
)

// TestMain fails the run if a goroutine leaks, or if a control-plane process or port outlived its playground.
func TestMain(m *testing.M) { leftover.Main(m, leftover.ControlPlane(controlplane.Leftovers)) }
