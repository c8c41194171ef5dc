package charts

import (
	"testing"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/leftover"
)

// TestMain fails the run if a goroutine leaks or a control-plane process or port outlives the tests.
func TestMain(m *testing.M) { leftover.Main(m, leftover.ControlPlane(controlplane.Leftovers)) }
