package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// gatedOp is the real scale-capacity operation whose Write, for one request, waits at a gate before it goes on:
// the moment between the engine taking the lock and the write reaching AWS, where a lock can be lost.
type gatedOp struct {
	ops.Operation
	request string
	entered chan ops.Execution // gets the gated request's Execution when its Write begins
	gate    chan struct{}
}

func (g *gatedOp) Write(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) ([]byte, error) {
	if req.ID == g.request {
		g.entered <- x
		<-g.gate
	}
	return g.Operation.(ops.Steps).Write(ctx, req, plan, x)
}

func (g *gatedOp) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	return g.Operation.(ops.Steps).Await(ctx, req, plan, written, x)
}

func (g *gatedOp) Recheck(ctx context.Context, req *ops.Request, plan *ops.Plan) (string, error) {
	return g.Operation.(ops.Rechecker).Recheck(ctx, req, plan)
}

func (g *gatedOp) Observe(ctx context.Context, req *ops.Request) (*ops.Result, error) {
	return g.Operation.(ops.Observer).Observe(ctx, req)
}

// storeAndClient is the real Redis store with its client, so a test can delete a lock's key as an expiry or an
// operator would.
func storeAndClient(t *testing.T) (*state.Store, redis.UniversalClient, string) {
	t.Helper()
	url, prefix := redistest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb, err := state.Dial(ctx, url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return state.New(rdb, state.Options{KeyPrefix: prefix}), rdb, prefix
}

// lockKey is where ops/state keeps a scope's lock ({prefix}:lock:<scope>); the test checks it deleted one key.
func lockKey(prefix string, scope ops.LockScope) string {
	return "{" + prefix + "}:lock:" + scope.String()
}

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
			store, rdb, prefix := storeAndClient(t)
			scale, err := f.catalog.Lookup(OpScaleCapacity)
			must(t, err)
			g := &gatedOp{Operation: scale, request: "scale-a", entered: make(chan ops.Execution, 1), gate: make(chan struct{})}
			catalog := ops.NewCatalog()
			catalog.Register(g)
			e := ops.NewEngine(catalog, store, store, nil, ops.EngineOptions{Replica: "r1", LockTTL: 10 * time.Second})
			ctx := ctxT(t)
			scope := ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: tc.group}

			type outcome struct {
				rec *ops.Record
				err error
			}
			aDone := make(chan outcome, 1)
			go func() {
				rec, err := e.Submit(ctx, scaleRequest("scale-a", testCluster, tc.group, tc.a))
				aDone <- outcome{rec, err}
			}()
			var xa ops.Execution
			select {
			case xa = <-g.entered:
			case <-ctx.Done():
				t.Fatal("A's write never began")
			}
			if holder, held, err := store.Holder(ctx, scope); err != nil || !held || holder != "scale-a" {
				t.Fatalf("before the loss %s is held by %q (%v, %v), want scale-a", scope, holder, held, err)
			}
			// The lock is lost: its key goes, and B takes the scope with the next fence.
			if n, err := rdb.Del(ctx, lockKey(prefix, scope)).Result(); err != nil || n != 1 {
				t.Fatalf("delete the lock key: %d keys, %v", n, err)
			}
			lb, err := store.Acquire(ctx, scope, "scale-b", 10*time.Second)
			must(t, err)
			if lb.Fence != xa.Fence+1 {
				t.Fatalf("B's fence %d, want A's %d + 1", lb.Fence, xa.Fence)
			}
			close(g.gate)
			a := <-aDone
			ue := asOpsError(t, a.err)
			if ue.Code != ops.CodeLocked || !strings.Contains(ue.Message, scope.String()) || ue.Next == "" {
				t.Fatalf("A's error %+v, want E_LOCKED naming %s with a next step", ue, scope)
			}
			if a.rec == nil || a.rec.Phase != ops.PhaseFailed || a.rec.Fence != xa.Fence {
				t.Fatalf("A's record %+v, want failed at fence %d", a.rec, xa.Fence)
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
