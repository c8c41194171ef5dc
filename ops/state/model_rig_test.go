package state_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// The world and the faults of the model-based test (model_test.go): a fake operation whose writes change a world
// the test reads, a go-redis hook that loses answers or kills a replica's connection, and an in-memory execution
// queue the test delivers from, one entry at a time.

// modelConfig is the policy under test. Rules, in order: people need no approval in ml-dev; ml-q needs two leads;
// ml-x needs one senior (lead2), who may approve their own request below high risk; everything else needs one
// lead, reminds at 20m, escalates to managers at 40m, lets alice (on call) break glass. Plans over a budget need
// two leads instead (never a grant, never break-glass). Everyone on c1 shares $250 a month; the agent also has
// $200 a day.
const modelConfig = `
slack: {channels: [C0OPS], approvalsChannel: C0APPROVE}
clusters: [{name: c1, namespaces: [ml, ml-x, ml-q, ml-dev]}]
agents: [{name: ops-agent, slackUser: U0AGENT, operations: ["*"]}]
approvals:
  groups:
    leads: {users: [U0LEAD1, U0LEAD2]}
    seniors: {users: [U0LEAD2]}
    managers: {users: [U0MGR]}
    oncall: {users: [U0ALICE]}
  rules:
    - {namespace: [ml-dev], initiator: human, required: 0}
    - {namespace: [ml-q], approvers: leads, required: 2, expiresAfter: 2h}
    - {namespace: [ml-x], approvers: seniors, required: 1, allowSelfApproval: true, expiresAfter: 1h,
       overBudget: {approvers: leads, required: 2}}
    - {approvers: leads, required: 1, expiresAfter: 1h, remindAfter: 20m, escalateAfter: 40m, escalateTo: managers,
       breakGlass: oncall, overBudget: {approvers: leads, required: 2}}
budgets:
  - {name: c1-monthly, cluster: c1, window: month, limits: {cost: 250}}
  - {name: agent-daily, agent: ops-agent, window: day, limits: {cost: 200}}
`

var (
	modelMgr = ops.Initiator{Kind: ops.Human, ID: "U0MGR", Name: "mgr"}
	modelEve = ops.Initiator{Kind: ops.Human, ID: "U0EVE", Name: "eve"}
)

// modelDirectory: everyone the model knows is in the channels; there are no Slack user groups.
type modelDirectory struct{}

func (modelDirectory) UserGroupMembers(context.Context, string) ([]string, error) { return nil, nil }
func (modelDirectory) ChannelMembers(context.Context, string) ([]string, error) {
	return []string{"U0ALICE", "U0BOB", "U0LEAD1", "U0LEAD2", "U0MGR", "U0EVE"}, nil
}

// crashPoint is where a replica dies in an execution it was asked to crash.
type crashPoint int

const (
	noCrash         crashPoint = iota
	crashBeforeSend            // in Write, after the lock check, before the change reaches the world
	crashAfterSend             // in Write, after the change reached the world, before its answer is recorded
	crashInAwait               // in Await, after the accepted write was recorded
)

func (c crashPoint) String() string {
	return [...]string{"none", "before sending the write", "after sending the write", "while awaiting"}[c]
}

// worldWrite is one write that reached the world: the request, the plan hash it carried, the replica that sent it,
// and whether it changed anything.
type worldWrite struct {
	ID, Hash, Replica string
	Group             string
	From, To          int
	Effective         bool
}

// worldOp is the model's operation "test-scale": it scales a node group of the world from what it observes to the
// request's count, at $40 per node-hour for 2 hours ($80 per node added). Its plan diffs against the world's
// count (the observed state the hash covers), so a change of the world makes an approved plan stale; its writes
// change the world and are all recorded. It executes in recorded steps (Write, then Await), reads the world back
// after an interruption (Observe), and says how to put back what it replaced (Undo, for Revert).
type worldOp struct {
	mu     sync.Mutex
	counts map[string]int
	writes []worldWrite
	// crash is, per replica name, where that replica dies in its next execution; die is called there (it cuts the
	// replica's connection) before the goroutine ends.
	crash   map[string]crashPoint
	crashed map[string]bool
	die     func(replica string)
}

const worldPrice = 40 // $ per node-hour

func newWorldOp() *worldOp {
	return &worldOp{counts: map[string]int{"g1": 2, "g2": 2, "g3": 2}, crash: map[string]crashPoint{}, crashed: map[string]bool{}}
}

func (o *worldOp) Spec() ops.Spec {
	return ops.Spec{Name: "test-scale", Domain: "capacity", Summary: "scale a node group of the model's world", Mutates: true,
		Params: []ops.ParamSpec{
			{Name: "group", Kind: ops.KindString, Required: true, Help: "node group"},
			{Name: "count", Kind: ops.KindInt, Required: true, Help: "nodes"},
		}}
}

func (o *worldOp) Validate(context.Context, *ops.Request) error { return nil }

func (o *worldOp) count(g string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[g]
}

func (o *worldOp) setCount(g string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[g] = n
}

func observedOf(g string, n int) string { return fmt.Sprintf("%s: %d nodes", g, n) }

func (o *worldOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	g := req.Params.String("group")
	to := int(req.Params.IntOr("count", 0))
	from := o.count(g)
	p := &ops.Plan{Summary: fmt.Sprintf("scale %s from %d to %d", g, from, to), Observed: observedOf(g, from),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "NodeGroup", Name: g,
			Fields: []ops.FieldChange{{Path: "desiredSize", From: fmt.Sprint(from), To: fmt.Sprint(to)}}}},
		Undo: &ops.Undo{Operation: "test-scale", Params: ops.Params{"group": g, "count": int64(from)},
			Restores: fmt.Sprintf("%d nodes in %s", from, g)}}
	p.Cost.AddHourly("node", float64(to-from), worldPrice, "node-hour")
	if to > from {
		p.Cost.Total, p.Cost.TotalBasis = p.Cost.HourlyDelta*2, "for 2 hours"
	}
	if to < from {
		p.Risk.Add(ops.RiskHigh, "scales %s down", g)
	}
	return p, nil
}

func (o *worldOp) Recheck(_ context.Context, req *ops.Request, _ *ops.Plan) (string, error) {
	g := req.Params.String("group")
	return observedOf(g, o.count(g)), nil
}

func (o *worldOp) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return ops.ExecuteSteps(ctx, o, req, plan, x)
}

// dieIfAsked ends the calling goroutine, as the death of its process would, when replica is to crash at p: its
// connection is cut first, so what the engine's deferred calls send goes nowhere.
func (o *worldOp) dieIfAsked(replica string, p crashPoint) {
	o.mu.Lock()
	at := o.crash[replica]
	if at == p {
		o.crashed[replica] = true
		delete(o.crash, replica)
	}
	o.mu.Unlock()
	if at == p {
		o.die(replica)
		runtime.Goexit()
	}
}

// Write checks the lock, as every real write does, then sets the group's count: the one change that reaches the
// world, recorded with the plan hash it carried.
func (o *worldOp) Write(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) ([]byte, error) {
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	o.dieIfAsked(x.Replica, crashBeforeSend)
	g := req.Params.String("group")
	to := int(req.Params.IntOr("count", 0))
	o.mu.Lock()
	from := o.counts[g]
	o.counts[g] = to
	o.writes = append(o.writes, worldWrite{ID: req.ID, Hash: plan.Hash, Replica: x.Replica, Group: g, From: from, To: to, Effective: from != to})
	o.mu.Unlock()
	o.dieIfAsked(x.Replica, crashAfterSend)
	return fmt.Appendf(nil, `{"group":%q,"count":%d}`, g, to), nil
}

func (o *worldOp) Await(_ context.Context, req *ops.Request, _ *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	o.dieIfAsked(x.Replica, crashInAwait)
	return &ops.Result{Summary: "scaled: " + string(written)}, nil
}

func (o *worldOp) Observe(_ context.Context, req *ops.Request) (*ops.Result, error) {
	g := req.Params.String("group")
	return &ops.Result{Summary: observedOf(g, o.count(g))}, nil
}

// takeWrites returns the writes recorded since the last call.
func (o *worldOp) takeWrites() []worldWrite {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.writes
	o.writes = nil
	return out
}

func (o *worldOp) arm(replica string, p crashPoint) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p == noCrash {
		delete(o.crash, replica)
		return
	}
	o.crash[replica] = p
}

// died reports (once) whether replica died in an execution.
func (o *worldOp) died(replica string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.crashed[replica]
	delete(o.crashed, replica)
	return d
}

// errLostAnswer is what a command whose answer the network lost returns; errDeadReplica is what every command of
// a replica that died returns.
var (
	errLostAnswer  = errors.New("model: read tcp: connection reset by peer (the answer was lost after Redis ran the command)")
	errDeadReplica = errors.New("model: the replica's process is gone")
)

// faultHook is a go-redis hook on one replica's client: it loses the answer to the n-th command from when it is
// armed (the command runs in Redis; the caller gets a connection error), and fails every command once the replica
// is dead.
type faultHook struct {
	mu     sync.Mutex
	dead   bool
	loseIn int // commands to let through before losing one answer; -1: none
	lost   string
}

func newFaultHook() *faultHook { return &faultHook{loseIn: -1} }

func (h *faultHook) arm(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loseIn, h.lost = n, ""
}

// disarm stops losing answers and says which command's answer was lost, if one was.
func (h *faultHook) disarm() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loseIn = -1
	return h.lost
}

func (h *faultHook) kill() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dead = true
}

// next says whether the replica is dead, and whether this command's answer is to be lost.
func (h *faultHook) next(what string) (dead, lose bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead {
		return true, false
	}
	if h.loseIn < 0 || strings.HasPrefix(what, "hello") || strings.HasPrefix(what, "client") || strings.HasPrefix(what, "pipeline client") {
		// Setting up a new connection is not counted: when the pool makes one is not the test's to choose.
		return false, false
	}
	if h.loseIn == 0 {
		h.loseIn, h.lost = -1, what
		return false, true
	}
	h.loseIn--
	return false, false
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		dead, lose := h.next(cmdName(cmd))
		if dead {
			cmd.SetErr(errDeadReplica)
			return errDeadReplica
		}
		err := next(ctx, cmd)
		if lose {
			cmd.SetErr(errLostAnswer)
			return errLostAnswer
		}
		return err
	}
}

func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		what := "pipeline"
		if len(cmds) > 0 {
			what = "pipeline " + cmdName(cmds[0])
		}
		dead, lose := h.next(what)
		if dead {
			for _, c := range cmds {
				c.SetErr(errDeadReplica)
			}
			return errDeadReplica
		}
		err := next(ctx, cmds)
		if lose {
			for _, c := range cmds {
				c.SetErr(errLostAnswer)
			}
			return errLostAnswer
		}
		return err
	}
}

// cmdName names a command for the log: EVALSHA with the script's first key, else the command and its first key.
func cmdName(cmd redis.Cmder) string {
	args := cmd.Args()
	name := cmd.Name()
	switch {
	case (name == "evalsha" || name == "eval") && len(args) > 3:
		return fmt.Sprintf("%s %v", name, args[3])
	case len(args) > 1:
		return fmt.Sprintf("%s %v", name, args[1])
	}
	return name
}

// modelQueue is the execution queue both replicas share: approving enqueues, and the test delivers one entry at a
// time to the replica it chooses (an executor), so what runs when is the test's choice.
type modelQueue struct {
	mu  sync.Mutex
	ids []string
}

func (q *modelQueue) Enqueue(_ context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids = append(q.ids, id)
	return nil
}

// pending lists the queued request ids, each once, sorted.
func (q *modelQueue) pending() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, id := range q.ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// take removes every entry of id (the executor that runs it is done with it, whatever the outcome: the sweep puts
// back what is left approved or executing with a free lease).
func (q *modelQueue) take(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.ids[:0]
	for _, x := range q.ids {
		if x != id {
			out = append(out, x)
		}
	}
	q.ids = out
}

// The engine delivers from the queue only in RunExecutors, which the model does not run.
func (q *modelQueue) Next(context.Context, string, time.Duration) (*engine.Delivery, error) {
	return nil, nil
}
func (q *modelQueue) Touch(context.Context, string, *engine.Delivery) error { return nil }
func (q *modelQueue) Done(context.Context, *engine.Delivery) error          { return nil }
