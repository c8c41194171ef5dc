package schedule

import (
	"testing"

	"github.com/hyperops/hyperops/internal/leftover"
)

func TestMain(m *testing.M) { leftover.Main(m) }
