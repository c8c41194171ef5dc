package aws

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// A loses its lock while its write is on the way (the key deleted, B acquiring it with a larger fence): A's write
// is refused by its guard before anything reaches AWS and A ends failed with E_LOCKED; B's write goes through.
func TestLostLockStaleHolderWriteRefused(t *testing.T) {
	cases := []struct {
		name, group string
		update      string // the fake's operation that would change the group
		from, a, b  int
		size        func(f *fixture) int
	}{
		{"HyperPod UpdateCluster", "gpu", fakeaws.OpSageMakerUpdateCluster, 2, 4, 5, func(f *fixture) int {
			hp, _ := f.srv.HyperPodCluster("ml-hp")
			return hp.InstanceGroups[0].Count
		}},
		{"EKS UpdateNodegroupConfig", "cpu", fakeaws.OpEKSUpdateNodegroupConfig, 2, 3, 4, func(f *fixture) int {
			ng, _ := f.srv.Nodegroup("ml-eks", "cpu")
			return ng.DesiredSize
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			rs := opstest.NewRedisStore(t)
			store := rs.Store
			scale, err := f.catalog.Lookup(OpScaleCapacity)
			must(t, err)
			g, gate := opstest.GateWrite(scale, "scale-a")
			catalog := ops.NewCatalog()
			catalog.Register(g)
			e := engine.New(catalog, store, store, nil, engine.Options{Replica: "r1", LockTTL: 10 * time.Second})
			ctx := ctxT(t)
			scope := ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: tc.group}

			xa, aDone := opstest.SubmitToGate(ctx, t, e, gate, scaleRequest("scale-a", testCluster, tc.group, tc.a))
			if holder, held, err := store.Holder(ctx, scope); err != nil || !held || holder != "scale-a" {
				t.Fatalf("before the loss %s is held by %q (%v, %v), want scale-a", scope, holder, held, err)
			}
			// The lock is lost: its key goes, and B takes the scope with the next fence.
			lb := rs.StealLock(ctx, t, scope, "scale-b", xa.Fence)
			gate.Open()
			a := <-aDone
			ue := asOpsError(t, a.Err)
			if ue.Code != ops.CodeLocked || !strings.Contains(ue.Message, scope.String()) || ue.Next == "" {
				t.Fatalf("A's error %+v, want E_LOCKED naming %s with a next step", ue, scope)
			}
			if a.Rec == nil || a.Rec.Phase != ops.PhaseFailed || a.Rec.Fence != xa.Fence {
				t.Fatalf("A's record %+v, want failed at fence %d", a.Rec, xa.Fence)
			}
			if n := f.srv.Calls(tc.update); n != 0 {
				t.Fatalf("%s reached AWS %d times from the stale holder", tc.update, n)
			}
			if got := tc.size(f); got != tc.from {
				t.Fatalf("group %s has %d instances after the refused write, want %d", tc.group, got, tc.from)
			}
			// A's failure released only its own lock: B still holds the scope.
			if holder, held, err := store.Holder(ctx, scope); err != nil || !held || holder != "scale-b" {
				t.Fatalf("after A failed %s is held by %q (%v, %v), want scale-b", scope, holder, held, err)
			}

			// B, the holder of the larger fence, executes as its lock's owner and its write goes through.
			rec, err := e.Submit(ctx, scaleRequest("scale-b", testCluster, tc.group, tc.b))
			if err != nil || rec.Phase != ops.PhaseSucceeded || rec.Fence != lb.Fence {
				t.Fatalf("B: %v, record %+v; want succeeded at fence %d", err, rec, lb.Fence)
			}
			if n := f.srv.Calls(tc.update); n != 1 {
				t.Fatalf("%s reached AWS %d times, want B's one", tc.update, n)
			}
			if got := tc.size(f); got != tc.b {
				t.Fatalf("group %s has %d instances, want B's %d", tc.group, got, tc.b)
			}
		})
	}
}
