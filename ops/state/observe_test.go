package state_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// Waiting costs no slot (issue 21): an execution whose write is recorded accepted gives its worker and cluster
// slots back while it observes, against a real redis-server. The limits bound writes, not waits.

// longOp is a change in two recorded steps whose wait is long: each Await waits at least wait, and until all
// of the n changes are observed at once (so the test proves they overlap rather than timing them), or, on the
// replicas in hold, until its context ends (a replica that crashes or stops mid-wait).
type longOp struct {
	groupOp
	n    int
	wait time.Duration
	hold map[string]bool

	mu       sync.Mutex
	writes   map[string]int // request → writes sent
	awaits   map[string]int // replica → awaits begun
	inflight int
	most     int
	all      chan struct{} // closed once n awaits are in flight together
}

func newLongOp(n int, wait time.Duration) *longOp {
	return &longOp{groupOp: groupOp{name: "test-long", kind: "long", summary: "scale a test group, which takes long",
		verb: "scale", observed: "as before"}, n: n, wait: wait, hold: map[string]bool{}, writes: map[string]int{}, awaits: map[string]int{}, all: make(chan struct{})}
}

// allObserved says whether n awaits have been in flight together.
func (o *longOp) allObserved() bool {
	select {
	case <-o.all:
		return true
	default:
		return false
	}
}

func (o *longOp) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return ops.ExecuteSteps(ctx, o, req, plan, x)
}

func (o *longOp) Write(ctx context.Context, _ *ops.Request, _ *ops.Plan, x ops.Execution) ([]byte, error) {
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.writes[x.RequestID]++
	o.mu.Unlock()
	return []byte(`{"sent":true}`), nil
}

func (o *longOp) Await(ctx context.Context, _ *ops.Request, _ *ops.Plan, _ []byte, x ops.Execution) (*ops.Result, error) {
	o.mu.Lock()
	o.awaits[x.Replica]++
	o.inflight++
	o.most = max(o.most, o.inflight)
	// Once: after a replica dies, its awaits end while another's resume the same requests, and the count reaches
	// n again.
	if o.inflight == o.n && !o.allObserved() {
		close(o.all)
	}
	hold := o.hold[x.Replica]
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.inflight--
		o.mu.Unlock()
	}()
	if hold {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	t := time.NewTimer(o.wait)
	defer t.Stop()
	select {
	case <-o.all:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &ops.Result{Summary: "scaled"}, nil
}

func (o *longOp) Observe(context.Context, *ops.Request) (*ops.Result, error) {
	return &ops.Result{Summary: "half scaled"}, nil
}

func (o *longOp) counts() (writes map[string]int, awaits map[string]int, most int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, a := map[string]int{}, map[string]int{}
	for k, v := range o.writes {
		w[k] = v
	}
	for k, v := range o.awaits {
		a[k] = v
	}
	return w, a, o.most
}

// longReplica is one replica over url: its own store and engine, executors with two workers and one execution
// per cluster. ClaimIdle is short, so a crashed replica's pending entries are claimed by the other.
func longReplica(t *testing.T, url, name string, op *longOp) (*engine.Engine, *state.Store) {
	catalog := ops.NewCatalog()
	catalog.Register(op)
	s := state.New(dial(t, url), state.Options{KeyPrefix: "long", ClaimIdle: 2 * time.Second})
	return engine.New(catalog, s, s, quorumPolicy{0}, engine.Options{Replica: name, LockTTL: 900 * time.Millisecond, Queue: s.Queue()}), s
}

func runLongExecutors(e *engine.Engine) (stop func()) {
	return inBackground(context.Background(), func(ctx context.Context) {
		_ = e.RunExecutors(ctx, engine.ExecutorOptions{Workers: 2, PerCluster: 1, Poll: 50 * time.Millisecond})
	})
}

func longRequest(i int) ops.Request {
	return ops.Request{ID: fmt.Sprintf("long-%02d", i), Operation: "test-long", Target: ops.Target{Cluster: "c1"},
		Params: ops.Params{"group": fmt.Sprintf("g%02d", i)}, Initiator: requester}
}

// submitLong submits the n changes gap apart (each is approved and queued at once: the policy needs no vote).
func submitLong(t *testing.T, ctx context.Context, e *engine.Engine, n int, gap time.Duration) {
	t.Helper()
	for i := range n {
		if rec, err := e.Submit(ctx, longRequest(i)); err != nil || rec.Phase != ops.PhaseApproved {
			t.Fatalf("Submit %d: %+v, %v; want approved and queued", i, rec, err)
		}
		time.Sleep(gap) // the gap between two approvals, as people click them
	}
}

// With Workers=2 and PerCluster=1, ten long changes on one cluster, each waiting longer than the gap between
// them, are all observed at once after their writes and all end succeeded; each was written once.
func TestWaitingHoldsNoSlot(t *testing.T) {
	const n, gap, wait = 10, 100 * time.Millisecond, 2 * time.Second
	srv := redistest.Start(t)
	op := newLongOp(n, wait)
	e, _ := longReplica(t, srv.URL(), "solo", op)
	ctx := ctxT(t)
	stop := runLongExecutors(e)
	defer stop()
	began := time.Now()
	submitLong(t, ctx, e, n, gap)
	opstest.Eventually(t, 30*time.Second, "all ten changes to be observed at once", op.allObserved)
	if got := e.Observing(); got < 1 {
		t.Errorf("Observing() = %d while ten changes wait, want them counted", got)
	}
	for i := range n {
		rec := waitPhase(t, ctx, e, longRequest(i).ID, ops.PhaseSucceeded)
		if rec.Execution.Handovers != 0 {
			t.Errorf("%s handed over %d times, want 0", rec.ID(), rec.Execution.Handovers)
		}
	}
	t.Logf("ten changes %s apart, each waiting %s, on 2 workers and 1 slot per cluster: all done %s after the first approval",
		gap, wait, time.Since(began).Round(10*time.Millisecond))
	writes, _, most := op.counts()
	if most != n {
		t.Errorf("at most %d changes were observed at once, want all %d", most, n)
	}
	for i := range n {
		if id := longRequest(i).ID; writes[id] != 1 {
			t.Errorf("%s was written %d times, want once", id, writes[id])
		}
	}
	opstest.Eventually(t, 10*time.Second, "no execution to be observing once all ended", func() bool { return e.Observing() == 0 })
}

// A replica that crashes, or stops (SIGTERM), while ten of its changes only wait: the other replica resumes every
// observation from the recorded steps and none is written a second time.
func TestObservationsResumeAfterCrashOrStop(t *testing.T) {
	for _, how := range []string{"crash", "stop"} {
		t.Run(how, func(t *testing.T) {
			const n = 10
			srv := redistest.Start(t)
			proxy, err := faultproxy.NewTCP(srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = proxy.Close() })
			op := newLongOp(n, 0)
			op.hold["a"] = true
			a, _ := longReplica(t, "redis://"+proxy.Addr(), "a", op)
			b, sb := longReplica(t, srv.URL(), "b", op)
			ctx := ctxT(t)

			stopA := runLongExecutors(a)
			submitLong(t, ctx, a, n, 0)
			opstest.Eventually(t, 30*time.Second, "a to observe all ten changes at once", op.allObserved)
			if how == "crash" {
				proxy.Cut() // a can no longer renew its leases nor touch its entries: as if it died
				defer stopA()
			} else {
				stopA() // hands every observation over at once
			}
			stopB := runLongExecutors(b)
			defer stopB()
			for i := range n {
				id := longRequest(i).ID
				var rec *ops.Record
				opstest.Eventually(t, 30*time.Second, id+" to be resumed on b and succeed", func() bool {
					if _, err := b.Sweep(ctx); err != nil {
						t.Fatalf("Sweep: %v", err)
					}
					rec, err = sb.Get(ctx, id)
					return err == nil && rec.Phase == ops.PhaseSucceeded
				})
				if rec.Replica != "b" || rec.Execution.Handovers != 1 {
					t.Errorf("%s ended on %q after %d hand-overs, want b after 1", id, rec.Replica, rec.Execution.Handovers)
				}
			}
			writes, awaits, _ := op.counts()
			for i := range n {
				if id := longRequest(i).ID; writes[id] != 1 {
					t.Errorf("%s was written %d times, want once", id, writes[id])
				}
			}
			if awaits["a"] != n || awaits["b"] != n {
				t.Errorf("awaits %v, want %d on a then %d on b", awaits, n, n)
			}
		})
	}
}
