package state_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// The resume cases of issue 11 against a real redis-server: a write recorded accepted is only observed by the
// replica that resumes it, a write whose outcome is unknown is never sent again, and a replica that stops hands
// its observations over at once.

// stepOp is an in-test operation in two recorded steps (ops.Steps). What each replica's Write and Await do is set
// before the test starts: go through, wait at a gate before the lock check, hang ignoring their context (a replica
// that died mid-step), or block until their context ends (a replica that stops).
type stepOp struct {
	groupOp
	beforeCheck map[string]chan struct{} // replica → Write waits for it to close before its lock check
	hangWrite   map[string]chan struct{} // replica → Write, once sent, waits for it to close, ignoring its context
	hangAwait   map[string]chan struct{} // replica → Await waits for it to close, ignoring its context
	blockAwait  map[string]bool          // replica → Await returns only when its context ends
	entered     chan string              // gets "write@replica" or "await@replica" as each step begins

	mu     sync.Mutex
	calls  []string // "write@replica" (sent), "await@replica" in order
	awaitW []string // what each Await was given as written
}

func newStepOp() *stepOp {
	return &stepOp{groupOp: groupOp{name: "test-step", kind: "step", summary: "change a test group in two steps",
		verb: "change", observed: "group: as before"}, beforeCheck: map[string]chan struct{}{}, hangWrite: map[string]chan struct{}{}, hangAwait: map[string]chan struct{}{}, blockAwait: map[string]bool{},
		entered: make(chan string, 16)}
}

// groupOp is what the in-test operations on a group share: a mutating spec that locks the group under kind, a
// Validate that accepts every request, a plan that updates the group, and a re-check that finds the group as the
// plan observed it. Each operation adds its own steps.
type groupOp struct {
	name, kind, summary string // the spec's name, lock kind and summary
	verb                string // the plan's summary is verb and the group
	observed            string // what Plan and Recheck observe
}

func (g groupOp) Spec() ops.Spec {
	return ops.Spec{Name: g.name, Domain: "test", Summary: g.summary, Mutates: true,
		Params: []ops.ParamSpec{{Name: "group", Kind: ops.KindString, Required: true, Help: "group"}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Kind: g.kind, Name: r.Params.String("group")}
		}}
}

func (g groupOp) Validate(context.Context, *ops.Request) error { return nil }

func (g groupOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	return &ops.Plan{Summary: g.verb + " " + req.Params.String("group"), Observed: g.observed,
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Group", Name: req.Params.String("group")}}}, nil
}

func (g groupOp) Recheck(context.Context, *ops.Request, *ops.Plan) (string, error) {
	return g.observed, nil
}

func (o *stepOp) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return ops.ExecuteSteps(ctx, o, req, plan, x)
}

// Write checks the lock right before sending, as every real write does; a write that passed it counts as sent.
func (o *stepOp) Write(ctx context.Context, _ *ops.Request, _ *ops.Plan, x ops.Execution) ([]byte, error) {
	o.entered <- "write@" + x.Replica
	if g := o.beforeCheck[x.Replica]; g != nil {
		<-g
	}
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.calls = append(o.calls, "write@"+x.Replica)
	n := len(o.calls)
	o.mu.Unlock()
	if g := o.hangWrite[x.Replica]; g != nil {
		<-g
	}
	return fmt.Appendf(nil, `{"update":"u-%d","fence":%d}`, n, x.Fence), nil
}

func (o *stepOp) Await(ctx context.Context, _ *ops.Request, _ *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	o.mu.Lock()
	o.calls = append(o.calls, "await@"+x.Replica)
	o.awaitW = append(o.awaitW, string(written))
	o.mu.Unlock()
	o.entered <- "await@" + x.Replica
	if g := o.hangAwait[x.Replica]; g != nil {
		<-g
	}
	if o.blockAwait[x.Replica] {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &ops.Result{Summary: "done after " + string(written)}, nil
}

func (o *stepOp) Observe(context.Context, *ops.Request) (*ops.Result, error) {
	return &ops.Result{Summary: "group: half changed"}, nil
}

// count is how many calls were step@replica ("write", "" counts every replica).
func (o *stepOp) count(step, replica string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.calls {
		s, r, _ := strings.Cut(c, "@")
		if s == step && (replica == "" || r == replica) {
			n++
		}
	}
	return n
}

// waitEntered waits until step@replica begins.
func (o *stepOp) waitEntered(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	waitFor(t, ctx, o.entered, want, want+" never began")
}

// replicas are engines over one real redis-server, each with its own connection; with queue they take work from
// the shared execution queue. An entry left pending with a consumer is never claimed by another within a test
// (ClaimIdle is an hour), so a request is resumed only if it was really handed over.
type replicas struct {
	srv *redistest.Server
	op  *stepOp
}

func (r *replicas) store(t *testing.T) *state.Store {
	return state.New(dial(t, r.srv.URL()), state.Options{KeyPrefix: "resume", ClaimIdle: time.Hour})
}

func (r *replicas) engine(t *testing.T, name string, queue bool) *engine.Engine {
	catalog := ops.NewCatalog()
	catalog.Register(r.op)
	s := r.store(t)
	opts := engine.Options{Replica: name, LockTTL: 600 * time.Millisecond}
	if queue {
		opts.Queue = s.Queue()
	}
	return engine.New(catalog, s, s, quorumPolicy{0}, opts)
}

// runExecutors runs e's executors until the returned stop is called; stop waits for them to return.
func runExecutors(e *engine.Engine) (stop func()) {
	return inBackground(context.Background(), func(ctx context.Context) {
		_ = e.RunExecutors(ctx, engine.ExecutorOptions{Workers: 2, Poll: 50 * time.Millisecond})
	})
}

// submitDying submits req on e, a replica about to die, in the background: die cancels the submission's context,
// and finished gets the error Submit returned.
func submitDying(ctx context.Context, e *engine.Engine, req ops.Request) (die func(), finished <-chan error) {
	ctx, die = context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() {
		_, err := e.Submit(ctx, req)
		errs <- err
	}()
	return die, errs
}

// dyingInStep starts the replicas dying and survivor on one redis-server and has dying submit stepRequest(id); it
// returns once dying's step ("write" or "await") began, where dying hangs, ignoring its context, until hung is
// closed. die cancels dying's submission; finished gets the error its Submit returned.
func dyingInStep(t *testing.T, ctx context.Context, step, id string) (r *replicas, survivor *engine.Engine, hung chan struct{}, die func(), finished <-chan error) {
	t.Helper()
	r = &replicas{srv: redistest.Start(t), op: newStepOp()}
	hung = make(chan struct{})
	hangs := r.op.hangAwait
	if step == "write" {
		hangs = r.op.hangWrite
	}
	hangs["dying"] = hung
	dying := r.engine(t, "dying", false)
	survivor = r.engine(t, "survivor", true)
	die, finished = submitDying(ctx, dying, stepRequest(id))
	r.op.waitEntered(t, ctx, step+"@dying")
	return r, survivor, hung, die, finished
}

func stepRequest(id string) ops.Request {
	return ops.Request{ID: id, Operation: "test-step", Target: ops.Target{Cluster: "c1"}, Params: ops.Params{"group": "g1"},
		Initiator: requester}
}

// leaseScope is the execution lease of a request (ops keeps it under the execution kind of cluster "_").
func leaseScope(id string) ops.LockScope {
	return ops.LockScope{Cluster: "_", Kind: "execution", Name: id}
}

// requeueOrphan sweeps until the orphaned execution of id is back on the queue (its lease lapsed).
func requeueOrphan(t *testing.T, ctx context.Context, e *engine.Engine, q *state.Queue) {
	t.Helper()
	opstest.Eventually(t, 10*time.Second, "a sweep to put the orphaned execution back on the queue", func() bool {
		if _, err := e.Sweep(ctx); err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		n, err := q.Pending(ctx)
		return err == nil && n > 0
	})
}

func waitPhase(t *testing.T, ctx context.Context, e *engine.Engine, id string, phase ops.Phase) *ops.Record {
	t.Helper()
	var rec *ops.Record
	opstest.Eventually(t, 20*time.Second, "request "+id+" to be "+string(phase), func() bool {
		var err error
		rec, err = e.Get(ctx, id)
		return err == nil && rec.Phase == phase
	})
	return rec
}

// A replica died after its write was recorded accepted: another replica resumes the request by observing only.
func TestResumeRecordedWriteAwaitsOnly(t *testing.T) {
	ctx := ctxT(t)
	r, survivor, hung, die, finished := dyingInStep(t, ctx, "await", "resume-1")
	rec, err := survivor.Get(ctx, "resume-1")
	if err != nil || rec.Phase != ops.PhaseExecuting || rec.Execution.WriteAccepted.IsZero() || len(rec.Execution.Written) == 0 {
		t.Fatalf("before the replica dies: %+v, %v; want executing with the write recorded accepted", rec, err)
	}
	written := string(rec.Execution.Written)
	die() // its lease is no longer renewed; its Await hangs on

	q := r.store(t).Queue()
	requeueOrphan(t, ctx, survivor, q)
	stop := runExecutors(survivor)
	final := waitPhase(t, ctx, survivor, "resume-1", ops.PhaseSucceeded)
	stop()
	if n := r.op.count("write", "survivor"); n != 0 {
		t.Errorf("the resuming replica wrote %d times, want 0", n)
	}
	if n := r.op.count("write", ""); n != 1 {
		t.Errorf("%d writes in total, want 1", n)
	}
	if n := r.op.count("await", "survivor"); n != 1 {
		t.Errorf("the resuming replica awaited %d times, want 1", n)
	}
	if final.Result == nil || final.Result.Summary != "done after "+written || final.Replica != "survivor" || final.Execution.Handovers != 1 {
		t.Errorf("final record: result %+v on %q with %d hand-overs; want the recorded write %s observed on survivor, one hand-over",
			final.Result, final.Replica, final.Execution.Handovers, written)
	}
	if !hasNote(final, "resumed (left by dying)") {
		t.Errorf("history %v does not record the resumption", notes(final))
	}

	close(hung) // the dead replica's Await finally returns: its late result must not overwrite anything
	if err := <-finished; err == nil {
		t.Errorf("the dead replica's Submit reported success for a request another replica finished")
	}
	after, err := survivor.Get(ctx, "resume-1")
	if err != nil || after.Version != final.Version {
		t.Errorf("the dead replica's late result changed the record: version %d → %d (%v)", final.Version, after.Version, err)
	}
}

// A replica died after sending its write but before recording the answer: the request ends interrupted with what
// the Observer found, people may take it over and stop it, and the write is never sent again.
func TestResumeUnknownWriteInterrupts(t *testing.T) {
	ctx := ctxT(t)
	r, survivor, hung, die, finished := dyingInStep(t, ctx, "write", "unknown-1")
	rec, err := survivor.Get(ctx, "unknown-1")
	if err != nil || rec.Phase != ops.PhaseExecuting || rec.Execution.WriteStarted.IsZero() || !rec.Execution.WriteAccepted.IsZero() {
		t.Fatalf("before the replica dies: %+v, %v; want executing with the write started, not accepted", rec, err)
	}
	die()

	q := r.store(t).Queue()
	requeueOrphan(t, ctx, survivor, q)
	stop := runExecutors(survivor)
	interrupted := waitPhase(t, ctx, survivor, "unknown-1", ops.PhaseInterrupted)
	stop()
	if interrupted.Result == nil || interrupted.Result.Summary != "group: half changed" {
		t.Errorf("interrupted with result %+v, want what the Observer found", interrupted.Result)
	}
	if last := interrupted.History[len(interrupted.History)-1]; !strings.Contains(last.Note, "found: group: half changed") {
		t.Errorf("the interruption's note %q does not tell what was found", last.Note)
	}
	if len(interrupted.Errors) == 0 {
		t.Fatal("no error recorded on the interruption")
	}
	if ue := interrupted.Errors[len(interrupted.Errors)-1]; !strings.Contains(ue.Next, "Take over") || !strings.Contains(ue.Next, "Stop") {
		t.Errorf("next step %q does not offer Take over and Stop", ue.Next)
	}
	if n := r.op.count("write", ""); n != 1 {
		t.Errorf("%d writes, want only the dead replica's one", n)
	}
	if n := r.op.count("await", ""); n != 0 {
		t.Errorf("%d awaits of a write whose outcome is unknown, want 0", n)
	}

	// Nobody knows what the write did: its scope stays locked (well past the 600 ms lock TTL) until a person decides.
	scope := ops.LockScope{Cluster: "c1", Kind: "step", Name: "g1"}
	locks := r.store(t)
	if holder, held, err := locks.Holder(ctx, scope); err != nil || !held || holder != "unknown-1" {
		t.Fatalf("after the interruption %s is held by %q (%v, %v), want unknown-1 until Stop or Take over", scope, holder, held, err)
	}
	taken, err := survivor.TakeOver(ctx, "unknown-1", lead1)
	if err != nil || taken.Owner.ID != lead1.ID || taken.Phase != ops.PhaseInterrupted {
		t.Fatalf("Take over: %+v, %v", taken, err)
	}
	stopped, err := survivor.Stop(ctx, "unknown-1", lead1)
	if err != nil || stopped.Phase != ops.PhaseCancelled {
		t.Fatalf("Stop: %+v, %v", stopped, err)
	}
	if _, held, err := locks.Holder(ctx, scope); err != nil || held {
		t.Errorf("after Stop %s is still held (%v)", scope, err)
	}

	close(hung) // the dead replica's write returns at last: recording it must not revive the request
	if err := <-finished; err == nil {
		t.Errorf("the dead replica's Submit reported success for a request that was interrupted")
	}
	final, err := survivor.Get(ctx, "unknown-1")
	if err != nil || final.Phase != ops.PhaseCancelled || r.op.count("write", "") != 1 {
		t.Errorf("final %v with %d writes (%v); want cancelled after one write", final.Phase, r.op.count("write", ""), err)
	}
}

// A replica stopped (SIGTERM) while it observes hands the request over at once, and another replica finishes it
// without writing again.
func TestStoppedReplicaHandsOver(t *testing.T) {
	r := &replicas{srv: redistest.Start(t), op: newStepOp()}
	r.op.blockAwait["a"] = true
	a, b := r.engine(t, "a", true), r.engine(t, "b", true)
	ctx := ctxT(t)

	stopA := runExecutors(a)
	rec, err := a.Submit(ctx, stepRequest("handover-1"))
	if err != nil || rec.Phase != ops.PhaseApproved {
		t.Fatalf("Submit: %+v, %v; want approved and queued", rec, err)
	}
	r.op.waitEntered(t, ctx, "await@a")
	stopA() // returns once a's executions are handed over
	handed, err := b.Get(ctx, "handover-1")
	if err != nil || handed.Phase != ops.PhaseExecuting || !hasNote(handed, "handed over: this replica is stopping") {
		t.Fatalf("after a stopped: %+v, %v; want executing and handed over", handed, err)
	}
	if holder, held, err := r.store(t).Holder(ctx, leaseScope("handover-1")); err != nil || held {
		t.Fatalf("the execution lease is still held by %q (%v): a hand-over frees it at once", holder, err)
	}

	stopB := runExecutors(b)
	final := waitPhase(t, ctx, b, "handover-1", ops.PhaseSucceeded)
	stopB()
	if final.Execution.Handovers != 1 || final.Replica != "b" {
		t.Errorf("final record on %q with %d hand-overs, want b and 1", final.Replica, final.Execution.Handovers)
	}
	if n := r.op.count("write", ""); n != 1 {
		t.Errorf("%d writes in total, want 1", n)
	}
	if n := r.op.count("await", "b"); n != 1 {
		t.Errorf("b awaited %d times, want 1", n)
	}
	r.op.mu.Lock()
	defer r.op.mu.Unlock()
	if len(r.op.awaitW) != 2 || r.op.awaitW[0] != r.op.awaitW[1] {
		t.Errorf("the awaits were given %q; want both the one recorded write", r.op.awaitW)
	}
}

func hasNote(rec *ops.Record, note string) bool {
	for _, h := range rec.History {
		if h.Note == note {
			return true
		}
	}
	return false
}

func notes(rec *ops.Record) []string {
	out := make([]string, 0, len(rec.History))
	for _, h := range rec.History {
		out = append(out, h.Note)
	}
	return out
}

// The scope lock is lost while the write waits at a gate (its key deleted, another holder taking the scope with a
// larger fence): the write is refused by its lock check, the request ends failed with E_LOCKED, nothing is sent and
// the new holder keeps the lock.
func TestStolenScopeLockRefusesWrite(t *testing.T) {
	r := &replicas{srv: redistest.Start(t), op: newStepOp()}
	gate := make(chan struct{})
	r.op.beforeCheck["r1"] = gate
	e := r.engine(t, "r1", false)
	s := r.store(t)
	ctx := ctxT(t)
	scope := ops.LockScope{Cluster: "c1", Kind: "step", Name: "g1"}

	type outcome struct {
		rec *ops.Record
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		rec, err := e.Submit(ctx, stepRequest("stolen-1"))
		done <- outcome{rec, err}
	}()
	r.op.waitEntered(t, ctx, "write@r1")
	rec, err := s.Get(ctx, "stolen-1")
	if err != nil || rec.Fence == 0 {
		t.Fatalf("the record of the execution: %+v, %v; want its fence", rec, err)
	}
	if holder, held, err := s.Holder(ctx, scope); err != nil || !held || holder != "stolen-1" {
		t.Fatalf("%s is held by %q (%v, %v), want stolen-1", scope, holder, held, err)
	}
	key := "{resume}:lock:" + scope.String() // where ops/state keeps it; the DEL below must remove exactly it
	if n, err := dial(t, r.srv.URL()).Del(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("delete %s: %d keys, %v", key, n, err)
	}
	thief, err := s.Acquire(ctx, scope, "another-request", 10*time.Second)
	if err != nil || thief.Fence != rec.Fence+1 {
		t.Fatalf("the second holder: %+v, %v; want fence %d", thief, err, rec.Fence+1)
	}
	close(gate)
	got := <-done
	if code(got.err) != ops.CodeLocked || !strings.Contains(got.err.Error(), scope.String()) {
		t.Fatalf("Submit: %v, want E_LOCKED naming %s", got.err, scope)
	}
	if got.rec == nil || got.rec.Phase != ops.PhaseFailed || len(got.rec.Errors) == 0 ||
		got.rec.Errors[len(got.rec.Errors)-1].Code != ops.CodeLocked || got.rec.Errors[len(got.rec.Errors)-1].Next == "" {
		t.Fatalf("record %+v, want failed with E_LOCKED and a next step", got.rec)
	}
	if n := r.op.count("write", ""); n != 0 {
		t.Fatalf("%d writes sent without the lock", n)
	}
	if holder, held, err := s.Holder(ctx, scope); err != nil || !held || holder != "another-request" {
		t.Fatalf("after the refusal %s is held by %q (%v, %v); the refused execution must not free the new holder's lock", scope, holder, held, err)
	}
}

// A request approved just as a replica stops is not stranded with it: whatever the stopping replica's last read of
// the queue takes goes back on the queue, and another replica executes it (ClaimIdle never comes within the test).
func TestRequestQueuedWhileReplicaStopsIsNotStranded(t *testing.T) {
	r := &replicas{srv: redistest.Start(t), op: newStepOp()}
	a, b := r.engine(t, "a", true), r.engine(t, "b", true)
	ctx := ctxT(t)

	runCtx, stopA := context.WithCancel(context.Background())
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		// A long poll: a's last read is still waiting on Redis when the request is queued.
		_ = a.RunExecutors(runCtx, engine.ExecutorOptions{Workers: 2, Poll: 2 * time.Second})
	}()
	rdb := dial(t, r.srv.URL())
	opstest.Eventually(t, 10*time.Second, "a's executors to read the queue", func() bool {
		gs, err := rdb.XInfoGroups(ctx, "{resume}:exec").Result() // the group exists once a's reader began
		return err == nil && len(gs) == 1
	})
	stopA()
	rec, err := b.Submit(ctx, stepRequest("late-1"))
	if err != nil || rec.Phase != ops.PhaseApproved {
		t.Fatalf("Submit: %+v, %v; want approved and queued", rec, err)
	}
	<-doneA
	stopB := runExecutors(b)
	final := waitPhase(t, ctx, b, "late-1", ops.PhaseSucceeded)
	stopB()
	if n := r.op.count("write", ""); n != 1 {
		t.Errorf("%d writes, want 1", n)
	}
	t.Logf("executed on %s after %d hand-overs", final.Replica, final.Execution.Handovers)
}

// outageStore is the store whose writes fail for a while once armed, as a Redis cut right after a write was sent.
type outageStore struct {
	*state.Store
	mu    sync.Mutex
	armed func(*ops.Record) bool
	fails int
}

func (s *outageStore) Update(ctx context.Context, rec *ops.Record, expect int64, ev audit.Event) error {
	s.mu.Lock()
	fail := s.fails > 0 && s.armed(rec)
	if fail {
		s.fails--
	}
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("record %s: dial tcp 127.0.0.1:6379: connect: connection refused", rec.ID())
	}
	return s.Store.Update(ctx, rec, expect, ev)
}

// A write whose answer came back while Redis was briefly unreachable is recorded once Redis answers again, by the
// replica that heard it, and the request succeeds: it is not left for a resume that can only read back or ask
// people (the fault matrix saw a healthy request interrupted by a five-second Redis cut).
func TestAcceptedWriteIsRecordedAfterABriefOutage(t *testing.T) {
	r := &replicas{srv: redistest.Start(t), op: newStepOp()}
	catalog := ops.NewCatalog()
	catalog.Register(r.op)
	s := &outageStore{Store: r.store(t), fails: 3, armed: func(rec *ops.Record) bool {
		return rec.Execution != nil && !rec.Execution.WriteAccepted.IsZero()
	}}
	e := engine.New(catalog, s, s, quorumPolicy{0}, engine.Options{Replica: "r1", LockTTL: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := e.Submit(ctx, stepRequest("outage-1"))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("submit: %v; record %+v", err, rec)
	}
	if n := r.op.count("write", ""); n != 1 {
		t.Fatalf("%d writes, want 1", n)
	}
}

// Redis ran the script recording «write started» but its answer was lost: the executor never sent the write, so
// nothing may be left interrupted or locked, and the change is sent exactly once.
func TestLostWriteStartedAnswerIsNotInterrupted(t *testing.T) {
	srv := redistest.Start(t)
	proxy, err := faultproxy.NewTCP(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	op := newStepOp()
	catalog := ops.NewCatalog()
	catalog.Register(op)
	s := state.New(dial(t, "redis://"+proxy.Addr()), state.Options{KeyPrefix: "resume", ClaimIdle: time.Hour})
	e := engine.New(catalog, s, s, quorumPolicy{0}, engine.Options{Replica: "flaky", LockTTL: 3 * time.Second, Queue: s.Queue()})
	ctx := ctxT(t)

	// The answer is lost and Redis stays unreachable for a moment, so the client's own retries fail too.
	dropped := proxy.CutAfterForward(faultproxy.Contains("lost-start-1", "sending the change"), 1)
	go func() {
		opstest.Eventually(t, 20*time.Second, "the answer to «write started» to be lost", func() bool { return dropped() > 0 })
		time.Sleep(time.Second) // longer than the client's own retries, shorter than the execution lease
		proxy.Restore()
	}()
	stop := runExecutors(e)
	defer stop()
	if _, err := e.Submit(ctx, stepRequest("lost-start-1")); err != nil {
		t.Logf("Submit: %v", err)
	}
	var rec *ops.Record
	opstest.Eventually(t, 20*time.Second, "lost-start-1 to end", func() bool {
		_, _ = e.Sweep(ctx) // puts the execution back on the queue once its lease lapsed
		rec, err = e.Get(ctx, "lost-start-1")
		return err == nil && (rec.Phase.Terminal() || rec.Phase == ops.PhaseInterrupted)
	})
	if dropped() != 1 {
		t.Fatalf("the answer to «write started» was dropped %d times, want 1", dropped())
	}
	if rec.Phase != ops.PhaseSucceeded {
		t.Errorf("ended %s (history %v), want succeeded: the write was never sent before the lost answer", rec.Phase, notes(rec))
	}
	if n := op.count("write", ""); n != 1 {
		t.Errorf("%d writes, want 1", n)
	}
	if !hasNote(rec, "fence 1; write withdrawn: never sent") {
		t.Errorf("history %v does not record that the write was withdrawn", notes(rec))
	}
}
