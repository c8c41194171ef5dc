package opstest

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// HookedOp is a real operation with steps whose Write and Verify first run a hook of the test's: how a test
// holds a write at the moment a lock can be lost, or makes the world fail from the moment a read-back begins.
// The wrapped operation must implement ops.Steps, ops.Rechecker, ops.Observer and ops.Verifier; HookedOp passes
// those through and nothing else.
type HookedOp struct {
	ops.Operation
	// BeforeWrite, when set, runs before every Write.
	BeforeWrite func(req *ops.Request, x ops.Execution)
	// BeforeVerify, when set, runs before every Verify.
	BeforeVerify func(req *ops.Request)
}

// Write runs BeforeWrite, then the wrapped Write.
func (h *HookedOp) Write(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) ([]byte, error) {
	if h.BeforeWrite != nil {
		h.BeforeWrite(req, x)
	}
	return h.Operation.(ops.Steps).Write(ctx, req, plan, x)
}

// Await is the wrapped operation's.
func (h *HookedOp) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	return h.Operation.(ops.Steps).Await(ctx, req, plan, written, x)
}

// Recheck is the wrapped operation's.
func (h *HookedOp) Recheck(ctx context.Context, req *ops.Request, plan *ops.Plan) (string, error) {
	return h.Operation.(ops.Rechecker).Recheck(ctx, req, plan)
}

// Observe is the wrapped operation's.
func (h *HookedOp) Observe(ctx context.Context, req *ops.Request) (*ops.Result, error) {
	return h.Operation.(ops.Observer).Observe(ctx, req)
}

// Verify runs BeforeVerify, then the wrapped Verify.
func (h *HookedOp) Verify(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (ops.Verdict, []byte, error) {
	if h.BeforeVerify != nil {
		h.BeforeVerify(req)
	}
	return h.Operation.(ops.Verifier).Verify(ctx, req, plan, x)
}

// Gate holds the Write of one request of a HookedOp until it is opened: the moment between the engine taking
// the lock and the write reaching the world, where a lock can be lost.
type Gate struct {
	entered chan ops.Execution
	open    chan struct{}
}

// GateWrite wraps op so that the Write of the request with id request waits at the returned gate.
func GateWrite(op ops.Operation, request string) (*HookedOp, *Gate) {
	g := &Gate{entered: make(chan ops.Execution, 1), open: make(chan struct{})}
	return &HookedOp{Operation: op, BeforeWrite: func(req *ops.Request, x ops.Execution) {
		if req.ID == request {
			g.entered <- x
			<-g.open
		}
	}}, g
}

// Entered gets the gated request's Execution when its Write begins.
func (g *Gate) Entered() <-chan ops.Execution { return g.entered }

// Open lets the gated Write go on.
func (g *Gate) Open() { close(g.open) }

// Submitted is what an Engine.Submit of a gated request returned.
type Submitted struct {
	Rec *ops.Record
	Err error
}

// SubmitToGate submits req on e in a goroutine and returns when its Write reaches the gate: the Execution the
// write carries, and a channel that gets Submit's answer once the test opens the gate. It fails the test when the
// write never begins.
func SubmitToGate(ctx context.Context, t testing.TB, e *engine.Engine, g *Gate, req ops.Request) (ops.Execution, <-chan Submitted) {
	t.Helper()
	done := make(chan Submitted, 1)
	go func() {
		rec, err := e.Submit(ctx, req)
		done <- Submitted{rec, err}
	}()
	select {
	case x := <-g.Entered():
		return x, done
	case <-ctx.Done():
		t.Fatalf("the write of %s never began", req.ID)
		return ops.Execution{}, nil
	}
}
