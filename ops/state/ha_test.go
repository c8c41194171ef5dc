package state_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/config/endpoint"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// Issue 14, item 6: the store on a Sentinel group and on a Redis Cluster, through the client the bot builds from
// its configuration. Requests go through; a failover in the middle of a request ends it once (succeeded, or
// E_STATE_UNAVAILABLE), never executed twice; afterwards the same client works on. The Sentinel group is failed
// over with SENTINEL FAILOVER, whose window (the old master takes writes until it is turned into a replica) lost
// acknowledged writes, and so executed requests twice, before writes waited for a replica; the Cluster loses a
// master to kill -9.

// haOp is an in-test mutating operation that counts its executions per request and can hold an execution at a
// gate while the test fails Redis over.
type haOp struct {
	mu      sync.Mutex
	execs   map[string]int
	hold    map[string]chan struct{} // request id → closed when its execution may finish
	started chan string
}

func newHAOp() *haOp {
	return &haOp{execs: map[string]int{}, hold: map[string]chan struct{}{}, started: make(chan string, 64)}
}

func (o *haOp) Spec() ops.Spec {
	return ops.Spec{Name: "test-ha", Domain: "test", Summary: "change a test object", Mutates: true,
		Params: []ops.ParamSpec{{Name: "object", Kind: ops.KindString, Required: true, Help: "object"}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Kind: "object", Name: r.Params.String("object")}
		}}
}

func (o *haOp) Validate(context.Context, *ops.Request) error { return nil }

func (o *haOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	return &ops.Plan{Summary: "change " + req.Params.String("object"), Observed: "unchanged",
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Object", Name: req.Params.String("object")}}}, nil
}

func (o *haOp) Execute(_ context.Context, req *ops.Request, _ *ops.Plan, x ops.Execution) (*ops.Result, error) {
	o.mu.Lock()
	o.execs[req.ID]++
	gate := o.hold[req.ID]
	o.mu.Unlock()
	if gate != nil {
		o.started <- req.ID
		<-gate
	}
	return &ops.Result{Summary: fmt.Sprintf("changed with fence %d", x.Fence)}, nil
}

func (o *haOp) Observe(context.Context, *ops.Request) (*ops.Result, error) {
	return &ops.Result{Summary: "unchanged"}, nil
}

func (o *haOp) holdNext(id string) chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	g := make(chan struct{})
	o.hold[id] = g
	return g
}

func (o *haOp) executions(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.execs[id]
}

func haRequest(id string) ops.Request {
	return ops.Request{ID: id, Operation: "test-ha", Target: ops.Target{Cluster: "c1", Namespace: "ml"},
		Params: ops.Params{"object": id}, Initiator: requester}
}

// haEngine is an engine over a store on rdb with haOp registered and no approval needed.
func haEngine(rdb redis.UniversalClient, prefix string, op *haOp) (*engine.Engine, *state.Store) {
	catalog := ops.NewCatalog()
	catalog.Register(op)
	s := state.New(rdb, state.Options{KeyPrefix: prefix})
	return engine.New(catalog, s, s, quorumPolicy{0}, engine.Options{Replica: "ha", LockTTL: 5 * time.Second}), s
}

// run submits req and, when the engine only queued it, executes it: the outcome either way.
func run(ctx context.Context, e *engine.Engine, req ops.Request) (*ops.Record, error) {
	rec, err := e.Submit(ctx, req)
	if err == nil && rec.Phase == ops.PhaseApproved {
		rec, err = e.Execute(ctx, rec.ID())
	}
	return rec, err
}

// mustSucceed runs a request that must go through, executed exactly once.
func mustSucceed(t *testing.T, e *engine.Engine, op *haOp, id string) {
	t.Helper()
	rec, err := run(ctxT(t), e, haRequest(id))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("%s: %v, %v; want succeeded", id, rec, err)
	}
	if n := op.executions(id); n != 1 {
		t.Fatalf("%s executed %d times, want once", id, n)
	}
}

// midRequestFailover holds a request inside its execution, fails Redis over, lets it finish, and checks the
// outcome: succeeded and executed once, or E_STATE_UNAVAILABLE and executed at most once; asking again to execute
// it does not execute it again. Other requests submitted while the failover runs obey the same rule. Then new work
// goes through on the same client.
func midRequestFailover(t *testing.T, e *engine.Engine, op *haOp, name string, failover func() string, rejoin func()) {
	t.Helper()
	ctx := ctxT(t)
	held := name + "-held"
	gate := op.holdNext(held)
	type outcome struct {
		rec *ops.Record
		err error
	}
	heldDone := make(chan outcome, 1)
	go func() {
		rec, err := run(ctx, e, haRequest(held))
		heldDone <- outcome{rec, err}
	}()
	select {
	case got := <-op.started:
		if got != held {
			t.Fatalf("execution of %s started, want %s", got, held)
		}
	case o := <-heldDone:
		t.Fatalf("%s ended before executing: %v, %v", held, phaseOf(o.rec), o.err)
	}

	// Requests one after another while the failover runs, until it is over.
	over := make(chan struct{})
	results := map[string]outcome{}
	var wg sync.WaitGroup
	wg.Go(func() {
		pace := time.NewTicker(5 * time.Millisecond) // a request fails fast while Redis is away: do not spin
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-over:
				return
			case <-pace.C:
			}
			id := fmt.Sprintf("%s-during-%d", name, i)
			rec, err := run(ctx, e, haRequest(id))
			results[id] = outcome{rec, err}
		}
	})
	newMaster := failover()
	close(over)
	wg.Wait()
	close(gate)
	results[held] = <-heldDone
	t.Logf("%s: new master %s; %d requests sent during the failover", name, newMaster, len(results)-1)

	unavailable := 0
	for id, o := range results {
		n := op.executions(id)
		switch {
		case o.err == nil && o.rec.Phase == ops.PhaseSucceeded && n == 1:
		case code(o.err) == ops.CodeStateUnavailable && n <= 1:
			unavailable++
		default:
			t.Errorf("%s: phase %v, error %v, executed %d times; want succeeded once, or E_STATE_UNAVAILABLE",
				id, phaseOf(o.rec), o.err, n)
		}
	}
	t.Logf("%s: %d of %d requests E_STATE_UNAVAILABLE; the one held mid-execution: %s %v", name, unavailable,
		len(results), phaseOf(results[held].rec), code(results[held].err))

	// Writes wait for a replica: once the old master is back as one (restarted if killed), work goes on, on the
	// same client, and no request is executed a second time.
	rejoin()
	ctx = ctxT(t) // the failover may have used up the first context's time on a loaded machine
	for id := range results {
		// E_NOT_FOUND: its creation was the write that failed, so there is nothing to execute. E_STATE_UNAVAILABLE:
		// a write was not acknowledged by the replica in time, so nothing ran.
		if _, err := e.Execute(ctx, id); err != nil && code(err) != ops.CodeNotFound && code(err) != ops.CodeStateUnavailable {
			t.Errorf("%s: Execute again: %v", id, err)
		}
		if n := op.executions(id); n > 1 {
			t.Errorf("%s executed %d times after asking again, want at most once", id, n)
		}
	}
	resumed(t, e, op, name+"-after")
}

// resumed sends one request until it succeeds — the same id each time, so at most one execution — and checks it
// executed exactly once. A first attempt may still meet the replica catching up (E_STATE_UNAVAILABLE).
func resumed(t *testing.T, e *engine.Engine, op *haOp, id string) {
	t.Helper()
	// Its own context: ctxT's 30 s would end the attempts before the minute they may take on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	attempts := 0
	var last error
	seen := map[string]int{}
	deadline := time.Now().Add(time.Minute)
	for {
		attempts++
		rec, err := run(ctx, e, haRequest(id))
		if err != nil && code(err) != ops.CodeStateUnavailable {
			t.Fatalf("%s: %v, want success or E_STATE_UNAVAILABLE", id, err)
		}
		if err == nil && rec.Phase == ops.PhaseSucceeded {
			break
		}
		last = err
		if err != nil {
			seen[err.Error()]++
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not succeed within a minute (%d attempts); the last: phase %s, %v; errors seen: %v", id, attempts, phaseOf(rec), last, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := op.executions(id); n != 1 {
		t.Fatalf("%s executed %d times over %d attempts, want once", id, n, attempts)
	}
	if attempts > 1 {
		t.Logf("%s succeeded at attempt %d", id, attempts)
	}
}

func phaseOf(rec *ops.Record) ops.Phase {
	if rec == nil {
		return ""
	}
	return rec.Phase
}

// dialHA connects as the bot does for a Sentinel group or a Cluster: every write waits for one replica.
func dialHA(t *testing.T, e endpoint.Endpoint) redis.UniversalClient {
	t.Helper()
	// The replica's acknowledgement is waited for as long as the configuration allows: these tests check the
	// topology and failovers, and on a loaded machine a replica in sync may answer WAIT after the default 500 ms
	// (replicas_test checks what a write not acknowledged in time does).
	e.WaitReplicas, e.WaitTimeout = 1, 2*time.Second
	c, err := state.DialEndpoint(ctxT(t), e)
	if err != nil {
		t.Fatalf("dial %s: %v", e, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func parse(t *testing.T, url string) endpoint.Endpoint {
	t.Helper()
	e, err := endpoint.Parse(url)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return e
}

func TestSentinel(t *testing.T) {
	t.Parallel() // its own servers; runs beside TestCluster
	g := redistest.StartSentinel(t)
	rdb := dialHA(t, parse(t, g.URL()))
	op := newHAOp()
	e, s := haEngine(rdb, "ha-sentinel", op)

	t.Run("every script", func(t *testing.T) { exerciseStore(t, s) })
	t.Run("streams", func(t *testing.T) { exerciseStreams(t, rdb, "ha-sentinel") })
	t.Run("requests go through", func(t *testing.T) { mustSucceed(t, e, op, "sentinel-first") })
	t.Run("from fields", func(t *testing.T) {
		c := dialHA(t, endpoint.Endpoint{Kind: endpoint.Sentinel, MasterName: redistest.MasterName, Addrs: g.SentinelAddrs()})
		e2, _ := haEngine(c, "ha-sentinel", op)
		mustSucceed(t, e2, op, "sentinel-fields")
	})
	t.Run("changes followed across a failover", func(t *testing.T) {
		changesFollowedAcross(t, rdb, "ha-sentinel", func() { g.Failover(t) }, func() { g.Rejoin(t) })
	})
	t.Run("SENTINEL FAILOVER mid-request", func(t *testing.T) {
		old := g.MasterAddr(t)
		midRequestFailover(t, e, op, "sentinel-failover", func() string {
			now := g.Failover(t)
			if now == old {
				t.Errorf("the master is still %s", old)
			}
			return now
		}, func() { g.Rejoin(t) })
	})
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, 1)
	rdb := dialHA(t, parse(t, c.URL()))
	op := newHAOp()
	const prefix = "ha-cluster"
	e, s := haEngine(rdb, prefix, op)
	slotKey := "{" + prefix + "}:req:x" // any key of the store: they all share the prefix's slot

	t.Run("every script", func(t *testing.T) { exerciseStore(t, s) })
	t.Run("streams", func(t *testing.T) { exerciseStreams(t, rdb, prefix) })
	t.Run("requests go through", func(t *testing.T) { mustSucceed(t, e, op, "cluster-first") })
	t.Run("from fields, one seed", func(t *testing.T) {
		// ElastiCache gives one configuration endpoint; the client learns the other nodes from it.
		seed, _ := c.MasterOf(t, "{other}:x")
		cc := dialHA(t, endpoint.Endpoint{Kind: endpoint.Cluster, Addrs: []string{seed}})
		e2, _ := haEngine(cc, prefix, op)
		mustSucceed(t, e2, op, "cluster-fields")
	})
	t.Run("changes followed across a failover", func(t *testing.T) {
		changesFollowedAcross(t, rdb, prefix, func() { c.KillMaster(t, slotKey) }, func() { c.Rejoin(t) })
	})
	t.Run("master killed mid-request", func(t *testing.T) {
		midRequestFailover(t, e, op, "cluster-kill", func() string { return c.KillMaster(t, slotKey) }, func() { c.Rejoin(t) })
	})
}

// exerciseStore calls every store method that runs a script or touches several keys, checking the answers, so
// that a script refused by the topology (CROSSSLOT, a key outside KEYS on another node) fails here.
func exerciseStore(t *testing.T, s *state.Store) {
	ctx := ctxT(t)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	rec := record("script-1", ops.PhaseReceived, "U1", time.Now())
	stored, created, err := s.Create(ctx, rec)
	must("Create", err)
	if !created || stored.Version != 1 {
		t.Fatalf("Create = %+v, %v", stored, created)
	}
	next := stored.Clone()
	next.Phase = ops.PhasePlanned
	must("Update", s.Update(ctx, next, 1, audit.Event{RequestID: "script-1", To: ops.PhasePlanned}))
	if err := s.Update(ctx, next, 1, audit.Event{RequestID: "script-1"}); err == nil {
		t.Fatalf("a second Update expecting version 1 was accepted")
	}
	got, err := s.Get(ctx, "script-1")
	must("Get", err)
	if got.Phase != ops.PhasePlanned {
		t.Fatalf("Get phase %s, want planned", got.Phase)
	}
	list, err := s.List(ctx, engine.ListQuery{Limit: 10})
	must("List", err)
	if len(list) != 1 || list[0].ID() != "script-1" {
		t.Fatalf("List = %v", list)
	}
	audit, err := s.Audit(ctx, 10)
	must("Audit", err)
	if len(audit) == 0 {
		t.Fatalf("no audit events")
	}

	scope := ops.LockScope{Cluster: "c1", Kind: "capacity", Name: "gpu"}
	l, err := s.Acquire(ctx, scope, "a", time.Minute)
	must("Acquire", err)
	if _, err := s.Acquire(ctx, scope, "b", time.Minute); err == nil {
		t.Fatalf("a held lock was acquired again")
	}
	must("Renew", s.Renew(ctx, l, time.Minute))
	if h, ok, err := s.Holder(ctx, scope); err != nil || !ok || h != "a" {
		t.Fatalf("Holder = %q, %v, %v", h, ok, err)
	}
	must("Release", s.Release(ctx, l))
	l2, err := s.Acquire(ctx, scope, "b", time.Minute)
	must("Acquire after release", err)
	if l2.Fence <= l.Fence {
		t.Fatalf("fence %d after %d: want it to grow", l2.Fence, l.Fence)
	}

	ok, err := s.AcquireLease(ctx, "sweeper", "a", time.Minute)
	must("AcquireLease", err)
	if !ok {
		t.Fatalf("AcquireLease refused a free lease")
	}
	must("RenewLease", s.RenewLease(ctx, "sweeper", "a", time.Minute))
	if h, ok, err := s.LeaseHolder(ctx, "sweeper"); err != nil || !ok || h != "a" {
		t.Fatalf("LeaseHolder = %q, %v, %v", h, ok, err)
	}
	must("ReleaseLease", s.ReleaseLease(ctx, "sweeper", "a"))

	obj := ops.ObjectRef{Cluster: "c1", Namespace: "ml", Kind: "Job", Name: "train"}
	must("Subscribe", s.Subscribe(ctx, obj, ops.WatchSubscription{ID: "script-1", Channel: "C1"}))
	if subs, err := s.Subscriptions(ctx, obj); err != nil || len(subs) != 1 {
		t.Fatalf("Subscriptions = %v, %v", subs, err)
	}
	if objs, err := s.WatchedObjects(ctx, "c1"); err != nil || len(objs) != 1 {
		t.Fatalf("WatchedObjects = %v, %v", objs, err)
	}
	if n, err := s.WatchedCount(ctx, "c1"); err != nil || n != 1 {
		t.Fatalf("WatchedCount = %d, %v", n, err)
	}
	if told, err := s.Tell(ctx, obj, "", "Running"); err != nil || !told {
		t.Fatalf("Tell = %v, %v", told, err)
	}
	if last, err := s.LastTold(ctx, obj); err != nil || last != "Running" {
		t.Fatalf("LastTold = %q, %v", last, err)
	}
	must("Unsubscribe", s.Unsubscribe(ctx, obj, "script-1"))
	if n, err := s.WatchedCount(ctx, "c1"); err != nil || n != 0 {
		t.Fatalf("WatchedCount after Unsubscribe = %d, %v", n, err)
	}

	if first, err := s.Seen(ctx, "event", "E1"); err != nil || !first {
		t.Fatalf("Seen = %v, %v", first, err)
	}
	if first, err := s.ClaimTick(ctx, "daily", time.Now()); err != nil || !first {
		t.Fatalf("ClaimTick = %v, %v", first, err)
	}
	for i := range 3 {
		must("AddSample", s.AddSample(ctx, "gpus", time.Now().Add(time.Duration(i)*time.Second), []byte{byte(i)}, 2))
	}
	if samples, err := s.Samples(ctx, "gpus"); err != nil || len(samples) != 2 {
		t.Fatalf("Samples = %v, %v", samples, err)
	}
	must("CacheSet", s.CacheSet(ctx, "price", []byte("1.5"), time.Minute))
	if v, ok, err := s.CacheGet(ctx, "price"); err != nil || !ok || string(v) != "1.5" {
		t.Fatalf("CacheGet = %q, %v, %v", v, ok, err)
	}
	must("Ping", s.Ping(ctx))

	// The execution queue and the outbox: streams read through consumer groups.
	q := s.Queue()
	must("Enqueue", q.Enqueue(ctx, "script-1"))
	d, err := q.Next(ctx, "a", 100*time.Millisecond)
	must("Queue.Next", err)
	if d == nil || d.RequestID != "script-1" {
		t.Fatalf("Queue.Next = %+v, want script-1", d)
	}
	must("Touch", q.Touch(ctx, "a", d))
	must("Queue.Done", q.Done(ctx, d))
	if n, err := q.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("Pending after Done = %d, %v", n, err)
	}
	out := s.Outbox()
	told, err := out.Next(ctx, "a", 100*time.Millisecond, 10)
	must("Outbox.Next", err)
	if len(told) != 2 { // the creation and the update above
		t.Fatalf("Outbox.Next = %d entries, want 2", len(told))
	}
	must("Outbox.Done", out.Done(ctx, told...))
	must("SetTold", out.SetTold(ctx, "script-1", 2))
	if n, err := out.Told(ctx, "script-1"); err != nil || n != 2 {
		t.Fatalf("Told = %d, %v", n, err)
	}
}

// exerciseStreams runs the stream commands of an execution queue and an outbox under the store's hash tag:
// a consumer group read, an acknowledgement, a claim of a message another consumer left pending, and a script
// that appends to two streams at once.
func exerciseStreams(t *testing.T, rdb redis.UniversalClient, prefix string) {
	ctx := ctxT(t)
	queue, outbox := "{"+prefix+"}:queue", "{"+prefix+"}:outbox"
	if err := rdb.XGroupCreateMkStream(ctx, queue, "executors", "0").Err(); err != nil {
		t.Fatalf("XGROUP CREATE: %v", err)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: queue, Values: map[string]any{"request": id}}).Err(); err != nil {
			t.Fatalf("XADD: %v", err)
		}
	}
	read, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "executors", Consumer: "a", Streams: []string{queue, ">"},
		Count: 2}).Result()
	if err != nil || len(read) != 1 || len(read[0].Messages) != 2 {
		t.Fatalf("XREADGROUP = %v, %v", read, err)
	}
	msgs := read[0].Messages
	if n, err := rdb.XAck(ctx, queue, "executors", msgs[0].ID).Result(); err != nil || n != 1 {
		t.Fatalf("XACK = %d, %v", n, err)
	}
	claimed, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: queue, Group: "executors", Consumer: "b",
		Start: "0", Count: 10}).Result()
	if err != nil || len(claimed) != 1 || claimed[0].ID != msgs[1].ID {
		t.Fatalf("XAUTOCLAIM = %v, %v; want the unacknowledged %s", claimed, err, msgs[1].ID)
	}
	both := redis.NewScript(`
redis.call('XADD', KEYS[1], '*', 'request', ARGV[1])
redis.call('XADD', KEYS[2], '*', 'tell', ARGV[1])
return redis.call('XLEN', KEYS[2])`)
	if n, err := both.Run(ctx, rdb, []string{queue, outbox}, "r3").Int64(); err != nil || n != 1 {
		t.Fatalf("script over two streams = %d, %v", n, err)
	}
	if got, err := rdb.XRange(ctx, outbox, "-", "+").Result(); err != nil || len(got) != 1 ||
		!slices.Contains([]any{"r3"}, got[0].Values["tell"]) {
		t.Fatalf("XRANGE outbox = %v, %v", got, err)
	}
}

// A creator can hear an error although its record landed (a write no replica acknowledged in time is reported as
// not done, yet stands on the master). Resending the same id must carry the request on, not answer "received" for
// good: the resend plans it, under the planning lock, and it executes once. A second resend finds it done.
func TestResendPlansARequestItsCreatorLeftReceived(t *testing.T) {
	eachBackend(t, state.Options{KeyPrefix: "left-received"}, func(t *testing.T, s *state.Store, rdb redis.UniversalClient) {
		op := newHAOp()
		catalog := ops.NewCatalog()
		catalog.Register(op)
		e := engine.New(catalog, s, s, quorumPolicy{0}, engine.Options{Replica: "ha", LockTTL: 5 * time.Second})
		ctx := ctxT(t)
		req := haRequest("left-1")
		now := time.Now().Add(-time.Minute) // left a minute ago: its creator is not planning it
		left := &ops.Record{Request: req, Fingerprint: req.Fingerprint(), Phase: ops.PhaseReceived, Version: 1,
			Owner: req.Initiator, CreatedAt: now, UpdatedAt: now, History: []ops.Transition{{To: ops.PhaseReceived, At: now, By: req.Initiator}}}
		if _, created, err := s.Create(ctx, left); err != nil || !created {
			t.Fatalf("store the left record: %v, %v", created, err)
		}
		rec, err := run(ctx, e, req)
		if err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("resend: phase %s, %v; want it planned and executed (succeeded)", phaseOf(rec), err)
		}
		if rec, err = run(ctx, e, req); err != nil || rec.Phase != ops.PhaseSucceeded {
			t.Fatalf("second resend: phase %s, %v; want the succeeded record", phaseOf(rec), err)
		}
		if n := op.executions("left-1"); n != 1 {
			t.Fatalf("executed %d times, want once", n)
		}
	})
}

// changesFollowedAcross checks that the change feed (Pub/Sub over the same client) follows the topology: after the
// failover it tells a change stored on the new master by its id, not only by the resync every restart brings.
func changesFollowedAcross(t *testing.T, rdb redis.UniversalClient, prefix string, failover, rejoin func()) {
	ctx := ctxT(t)
	s := state.New(rdb, state.Options{KeyPrefix: prefix})
	feed := engine.NewFeed(s, nil)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	seen := make(chan string, 256)
	defer feed.Listen(func(id string) {
		select {
		case seen <- id:
		default:
		}
	})()
	go feed.Run(runCtx)
	waitID := func(want map[string]bool, what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case id := <-seen:
				if want[id] {
					return
				}
			case <-deadline:
				t.Fatalf("the feed never told %s", what)
			}
		}
	}
	waitID(map[string]bool{"": true}, "its start (a resync)")
	if _, _, err := s.Create(ctx, record("before-failover", ops.PhaseReceived, "U1", time.Now())); err != nil {
		t.Fatal(err)
	}
	waitID(map[string]bool{"before-failover": true}, "a change stored before the failover")
	failover()
	defer func() {
		rejoin()
		// The next subtest starts from a healthy store: wait until a write is acknowledged by a replica again.
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; ; i++ {
			_, _, err := s.Create(ctx, record(fmt.Sprintf("after-rejoin-%d", i), ops.PhaseReceived, "U1", time.Now()))
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the store did not recover after the rejoin: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	// A change stored before the feed follows the new master is missed by Pub/Sub (the resync covers it): store
	// new ones until one is told by its id.
	stored := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		id := fmt.Sprintf("after-failover-%d", i)
		// Without its replica (killed or promoted), the new master stores the change but cannot have it
		// acknowledged (redis.waitReplicas): the write still took effect, and is told.
		_, _, _ = s.Create(ctx, record(id, ops.PhaseReceived, "U1", time.Now()))
		stored[id] = true
		select {
		case got := <-seen:
			if stored[got] {
				return
			}
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			break
		}
	}
	waitID(stored, "a change stored after the failover")
}
