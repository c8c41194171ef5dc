package state_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// Issue 32 point 5, on a real redis-server: two people pressing Revert at once, and an agent's revert_request
// while a person's revert of its request is under way.

const revertRaceConfig = `
slack: {channels: [C0OPS]}
clusters: [{name: ml-prod-eks, namespaces: [ml]}]
agents: [{name: ops-agent, slackUser: U0AGENT, operations: ["*"]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
  rules:
    - {approvers: leads, required: 1}
`

var revertAgent = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}

// revertDial sets dial name to a value; its plan says how to put the old value back (Plan.Undo).
type revertDial struct {
	mu  sync.Mutex
	val map[string]int64
}

func (d *revertDial) Spec() ops.Spec {
	return ops.Spec{Name: "set-dial", Domain: "test", Summary: "set a dial", Mutates: true,
		Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "dial"},
			{Name: "to", Kind: ops.KindInt, Required: true, Help: "value"}},
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Namespace: r.Target.Namespace, Kind: "dial", Name: r.Params.String("name")}
		}}
}

func (d *revertDial) Validate(context.Context, *ops.Request) error { return nil }

func (d *revertDial) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	name, to := req.Params.String("name"), req.Params.IntOr("to", 0)
	from := d.val[name]
	return &ops.Plan{Summary: fmt.Sprintf("set %s from %d to %d", name, from, to), Observed: fmt.Sprint(from),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Dial", Name: name,
			Fields: []ops.FieldChange{{Path: "value", From: fmt.Sprint(from), To: fmt.Sprint(to)}}}},
		Undo: &ops.Undo{Operation: "set-dial", Params: ops.Params{"name": name, "to": from}, Restores: fmt.Sprintf("the value %d", from)}}, nil
}

func (d *revertDial) Execute(_ context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.val[req.Params.String("name")] = req.Params.IntOr("to", 0)
	return &ops.Result{Summary: "set"}, nil
}

// revertStore is the real store, with Get of one id held until as many callers have read it (or a second passed):
// so that callers asking at once all read the request before any of them has asked for its revert.
type revertStore struct {
	*state.Store
	hold    string
	waiting *atomic.Int64
	callers int64
	release chan struct{}
	once    *sync.Once
}

func (s revertStore) Get(ctx context.Context, id string) (*ops.Record, error) {
	rec, err := s.Store.Get(ctx, id)
	if id == s.hold && s.release != nil {
		if s.waiting.Add(1) == s.callers {
			s.once.Do(func() { close(s.release) })
		}
		select {
		case <-s.release:
		case <-time.After(time.Second):
		}
	}
	return rec, err
}

type revertRig struct {
	engines []*engine.Engine
	dial    *revertDial
	stores  []*revertStore
}

// revertEngines are two replicas over one redis-server with the real approvals policy.
func revertEngines(t *testing.T) revertRig {
	t.Helper()
	cfg, err := config.Parse([]byte(revertRaceConfig), "revert.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC))
	r := revertRig{dial: &revertDial{val: map[string]int64{}}}
	for _, replica := range []string{"r1", "r2"} {
		catalog := ops.NewCatalog()
		catalog.Register(r.dial)
		s := &revertStore{Store: state.New(dial(t, srv.URL()), state.Options{KeyPrefix: "revert", Clock: clock})}
		r.stores = append(r.stores, s)
		r.engines = append(r.engines, engine.New(catalog, s, s.Store, approvals.New(cfg, glassDirectory{}, clock),
			engine.Options{Replica: replica, Clock: clock}))
	}
	return r
}

// holdGets makes the next reads of id, on every replica, wait until callers have read it.
func (r revertRig) holdGets(id string, callers int64) {
	waiting, release, once := &atomic.Int64{}, make(chan struct{}), &sync.Once{}
	for _, s := range r.stores {
		s.hold, s.waiting, s.callers, s.release, s.once = id, waiting, callers, release, once
	}
}

// succeeded asks for dial name set to 1 as who and has lead1 approve it: it runs and succeeds.
func (r revertRig) succeeded(t *testing.T, id string, who ops.Initiator) *ops.Record {
	t.Helper()
	req := ops.Request{ID: id, Operation: "set-dial", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml"},
		Params: ops.Params{"name": id, "to": int64(1)}, Initiator: who}
	rec, err := r.engines[0].Submit(ctxT(t), req)
	if err != nil || rec.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("submit %s: %v, %+v", id, err, rec)
	}
	if rec, err = r.engines[0].Approve(ctxT(t), rec.ID(), lead1, rec.Approval.PlanHash); err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
	if rec, err = r.engines[0].Get(ctxT(t), rec.ID()); err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("%s is %+v (%v), want succeeded", id, rec, err)
	}
	return rec
}

// reverts lists the requests that revert id.
func (r revertRig) reverts(t *testing.T, id string) []string {
	t.Helper()
	recs, err := r.engines[0].List(ctxT(t), engine.ListQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs {
		if rec.Request.Reverts == id {
			out = append(out, rec.ID()+" by "+rec.Request.Initiator.ID)
		}
	}
	return out
}

// Two people press Revert on the same request at once, one on each replica (the Slack handler asks with no request
// id of its own: engine.RevertRequestID): one revert request is made, and both are answered with it.
func TestRevertPressedTwiceAtOnceAsksOnce(t *testing.T) {
	r := revertEngines(t)
	orig := r.succeeded(t, "dial-1", alice)
	r.holdGets(orig.ID(), 2)
	var wg sync.WaitGroup
	got := make([]*ops.Record, 2)
	errs := make([]error, 2)
	for i, who := range []ops.Initiator{alice, lead2} {
		wg.Go(func() {
			got[i], errs[i] = r.engines[i].Revert(ctxT(t), orig.ID(), ops.Request{Initiator: who, Origin: "revert"})
		})
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] == nil {
			t.Fatalf("revert %d: %+v, %v", i, got[i], errs[i])
		}
	}
	if list := r.reverts(t, orig.ID()); len(list) != 1 || got[0].ID() != got[1].ID() {
		t.Errorf("two Reverts at once made %d revert requests %v (answered %s and %s), want one, answered to both",
			len(list), list, got[0].ID(), got[1].ID())
	}
	if cur, err := r.engines[0].Get(ctxT(t), orig.ID()); err != nil || cur.RevertedBy != got[0].ID() {
		t.Errorf("%s is reverted by %q (%v), want %s", orig.ID(), cur.RevertedBy, err, got[0].ID())
	}
}

// An agent's revert_request (the agent's own request id) while a person's revert of the same request is under way
// never answers with the person's request: an agent sees only its own requests. It is refused, naming nothing of
// the other request, and makes no second revert; once the person's revert ends without a change, the agent's ask
// makes its own.
func TestRevertAnAgentIsNeverAnsweredWithAPersonsRevert(t *testing.T) {
	r := revertEngines(t)
	orig := r.succeeded(t, "dial-2", revertAgent)
	theirs, err := r.engines[0].Revert(ctxT(t), orig.ID(), ops.Request{Initiator: lead2, Origin: "revert"})
	if err != nil || theirs.Phase != ops.PhaseAwaitingApproval || theirs.Request.Initiator.ID != lead2.ID {
		t.Fatalf("lead2's revert: %+v, %v", theirs, err)
	}
	got, err := r.engines[1].Revert(ctxT(t), orig.ID(), ops.Request{ID: "dial-2-back", Initiator: revertAgent, Origin: "mcp"})
	if got != nil && got.Request.Initiator.ID != revertAgent.ID {
		t.Fatalf("the agent's revert_request was answered with %s, asked by %s (%v)", got.ID(), got.Request.Initiator.ID, err)
	}
	if err == nil || got != nil {
		t.Fatalf("the agent's revert_request while lead2's revert is under way: %+v, %v; want a refusal", got, err)
	}
	if ue := ops.AsError(err); ue.Code != ops.CodeLocked || ue.Next == "" || containsAny(ue.Error(), theirs.ID(), lead2.ID, lead2.Name) {
		t.Errorf("the refusal %v: want E_LOCKED with a next step, naming neither the other revert nor who asked it", err)
	}
	if list := r.reverts(t, orig.ID()); len(list) != 1 {
		t.Errorf("revert requests %v, want only lead2's", list)
	}
	// The agent's own revert, asked again under its id, is its own: answered as it stands.
	if _, err := r.engines[0].Cancel(ctxT(t), theirs.ID(), lead2); err != nil {
		t.Fatalf("lead2 cancels their revert: %v", err)
	}
	mine, err := r.engines[1].Revert(ctxT(t), orig.ID(), ops.Request{ID: "dial-2-back", Initiator: revertAgent, Origin: "mcp"})
	if err != nil || mine.ID() != "dial-2-back" || mine.Request.Initiator.ID != revertAgent.ID {
		t.Fatalf("the agent's revert once lead2's was cancelled: %+v, %v", mine, err)
	}
	again, err := r.engines[0].Revert(ctxT(t), orig.ID(), ops.Request{ID: "dial-2-back", Initiator: revertAgent, Origin: "mcp"})
	if err != nil || again.ID() != mine.ID() {
		t.Errorf("the agent's revert asked again: %+v, %v; want %s as it stands", again, err, mine.ID())
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
