package handlers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// Only who may use HyperOps is remembered as a Home viewer: anybody in the workspace can open the app's Home, and
// every change of every request is resolved against each remembered viewer for days (issue 32 point 2). A
// stranger who opens it is shown why they may not use HyperOps, once per opening, and is not kept up to date; a
// member of a command channel (who sees no request yet) and a lead are.
func TestHomeRemembersOnlyWhoMayUseHyperOps(t *testing.T) {
	f, homes, v, pub := homeFixture(t)
	ctx := context.Background()
	strangers := make([]string, 50)
	for i := range strangers {
		strangers[i] = fmt.Sprintf("U0STRANGER%02d", i)
		homes.Opened(ctx, strangers[i])
	}
	homes.Opened(ctx, homeBystander)
	homes.Opened(ctx, homeLead)
	homes.Flush(ctx)
	viewers, err := v.HomeViewers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{homeBystander, homeLead}; !slices.Equal(viewers, want) {
		t.Errorf("the Homes remember %d viewers %v, want only %v", len(viewers), viewers[:min(len(viewers), 5)], want)
	}
	if s := pub.text(strangers[0]); !strings.Contains(s, "E_NOT_AUTHORIZED") || strings.Contains(s, "req-r") {
		t.Errorf("the stranger's Home, when opened: %s", s)
	}
	touched := 0
	homes.opts.OnChange = func(n int) { touched += n }
	before := pub.total()
	homes.Changed(ctx, f.r(t), ops.PhasePlanned)
	homes.Flush(ctx)
	if pub.count[strangers[0]] != 1 || touched > 2 {
		t.Errorf("a change touched %d Homes and republished the stranger's %d times (%d publishes in all, %d before)",
			touched, pub.count[strangers[0]], pub.total(), before)
	}
}
