package bot

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hyperops/hyperops/ops"
)

// stepOp is an in-test operation with resumable steps, as the AWS and Kubernetes ones have: Write sends the one
// change (recorded before Await begins), Await observes it until done. The test decides what each step does.
type stepOp struct {
	spec   ops.Spec
	plans  atomic.Int64 // Plan calls
	writes atomic.Int64 // Write calls
	awaits atomic.Int64 // Await calls begun
	done   atomic.Int64 // Await calls returned
	// plan, write and await, when set, run at the start of the step; an error fails it.
	plan  func(ctx context.Context, req *ops.Request) error
	write func(ctx context.Context, req *ops.Request) error
	await func(ctx context.Context, req *ops.Request) error
}

var (
	_ ops.Operation = (*stepOp)(nil)
	_ ops.Steps     = (*stepOp)(nil)
)

// newStepOp returns an operation "<verb>-<noun>" with the slash form "<noun> <verb> name=" (plus extra
// parameters), locked per name, low risk, so a person's request runs without approval.
func newStepOp(name string, extra ...ops.ParamSpec) *stepOp {
	verb, noun, _ := strings.Cut(name, "-")
	params := append([]ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "name"}}, extra...)
	return &stepOp{spec: ops.Spec{Name: name, Domain: "test", Topic: noun, Verb: verb, Summary: "test operation " + name, Mutates: true,
		Baseline: ops.RiskLow, Params: params,
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Namespace: r.Target.Namespace, Kind: name, Name: r.Params.String("name")}
		}}}
}

func (s *stepOp) Spec() ops.Spec                               { return s.spec }
func (s *stepOp) Validate(context.Context, *ops.Request) error { return nil }

func (s *stepOp) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	s.plans.Add(1)
	if s.plan != nil {
		if err := s.plan(ctx, req); err != nil {
			return nil, err
		}
	}
	name := req.Params.String("name")
	return &ops.Plan{Summary: s.spec.Name + " " + name, Observed: "v1", ServerValidated: true,
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Gadget", Name: name,
			Fields: []ops.FieldChange{{Path: "spec.generation", From: "1", To: "2"}}}}}, nil
}

func (s *stepOp) Write(ctx context.Context, req *ops.Request, _ *ops.Plan, x ops.Execution) ([]byte, error) {
	s.writes.Add(1)
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	if s.write != nil {
		if err := s.write(ctx, req); err != nil {
			return nil, err
		}
	}
	return []byte(fmt.Sprintf(`{"name":%q,"generation":2}`, req.Params.String("name"))), nil
}

func (s *stepOp) Await(ctx context.Context, req *ops.Request, _ *ops.Plan, written []byte, _ ops.Execution) (*ops.Result, error) {
	s.awaits.Add(1)
	defer s.done.Add(1)
	if s.await != nil {
		if err := s.await(ctx, req); err != nil {
			return nil, err
		}
	}
	return &ops.Result{Summary: s.spec.Name + " done", Details: []ops.Detail{{Label: "written", Value: string(written)}}}, nil
}

// Execute is the two steps in one, for callers that do not resume.
func (s *stepOp) Execute(ctx context.Context, req *ops.Request, p *ops.Plan, x ops.Execution) (*ops.Result, error) {
	w, err := s.Write(ctx, req, p, x)
	if err != nil {
		return nil, err
	}
	return s.Await(ctx, req, p, w, x)
}

// wholeOp is stepOp without steps: the engine runs its Execute as one write.
type wholeOp struct{ s *stepOp }

func (w wholeOp) Spec() ops.Spec                                       { return w.s.Spec() }
func (w wholeOp) Validate(ctx context.Context, req *ops.Request) error { return w.s.Validate(ctx, req) }
func (w wholeOp) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	return w.s.Plan(ctx, req)
}
func (w wholeOp) Execute(ctx context.Context, req *ops.Request, p *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return w.s.Execute(ctx, req, p, x)
}
