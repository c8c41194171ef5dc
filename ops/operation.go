package ops

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hyperops/hyperops/config"
)

// LockScope is the typed key of a lock: what an execution must hold alone (docs/architecture.md).
type LockScope struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name,omitempty"`
}

// String renders the scope as cluster[/namespace]/kind[/name].
func (s LockScope) String() string {
	parts := []string{s.Cluster}
	for _, p := range []string{s.Namespace, s.Kind, s.Name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}

// IsZero reports an empty scope (no lock needed).
func (s LockScope) IsZero() bool { return s == LockScope{} }

// Spec describes an operation of the catalog.
type Spec struct {
	Name   string `json:"name"`
	Domain string `json:"domain"`
	// Topic and Verb place the operation in a surface's grammar ("train" "submit"); each surface renders them in
	// its own way (the Slack handlers as "<configured command> train submit name= …").
	Topic   string `json:"topic"`
	Verb    string `json:"verb,omitempty"`
	Summary string `json:"summary"`
	Mutates bool   `json:"mutates"`
	// Baseline is the risk every plan of this operation starts at.
	Baseline Level       `json:"baseline"`
	Params   []ParamSpec `json:"params,omitempty"`
	// Lock returns the scope an execution must hold; nil means no lock.
	Lock func(Request) LockScope `json:"-"`
	// Budget names the time budget of an execution (BudgetKubernetes when empty): how long it may take, from the
	// configuration, never the Slack interaction's.
	Budget Budget `json:"budget,omitempty"`

	// What the surfaces say of the operation, each in its own terms; none of them knows an operation by name.

	// Headline says in one line what a request does where ("Train {{.Name}} on {{.Target}} — …"); nil says the
	// operation's name in words with the object and the target (SayHeadline).
	Headline *Template `json:"-"`
	// Confirm, when set, is what an approver must type to approve: the changes that cannot be undone ask for the
	// name of what they destroy, so nobody approves the wrong one from a glance.
	Confirm *Confirmation `json:"-"`
	// Destructive marks operations that may remove things (delete, stop, scale down or to zero), the ones the
	// risk rules call destructive; a mutation that only adds, even a risky one, is not destructive.
	Destructive bool `json:"destructive,omitempty"`
	// ClusterWide marks operations that act on, or read, a cluster as a whole (its capacity, its creation, its
	// status across namespaces) rather than inside the request's namespace: an agent scoped to namespaces may read
	// them but not run the mutating ones, which reach past its namespaces.
	ClusterWide bool `json:"clusterWide,omitempty"`
	// Revert says what reverting a succeeded request of the operation would do, for people deciding whether to
	// ask for it; "" for read-only operations, which change nothing.
	Revert string `json:"revert,omitempty"`
}

// ReadOnly reports operations that change nothing: they execute at once, without a plan or an approval.
func (s Spec) ReadOnly() bool { return !s.Mutates }

// Confirmation is the typed-name confirmation of a destructive approval: the approver types the value of Param.
type Confirmation struct {
	// Param is the parameter whose value the approver types ("name").
	Param string
	// Label is what that value is called: the input's label and the prompt "Type the <label> to confirm".
	Label string
	// Title and Submit label the confirmation and its button ("Delete storage", "Delete data").
	Title, Submit string
	// Warning says what approving does, after "Approving request <id> ": "deletes the claim {{.Name}} …".
	Warning *Template
}

// Typed is the value an approver of rec must type.
func (c Confirmation) Typed(rec *Record) string { return rec.Request.Params.String(c.Param) }

// Budget names a class of execution time budget.
type Budget string

// The budgets (configured under execution.budgets; defaults in DefaultBudgets).
const (
	BudgetKubernetes Budget = "kubernetes"
	BudgetCapacity   Budget = "capacity"
	BudgetBootstrap  Budget = "bootstrap"
)

// DefaultBudgets are the budgets when the engine is given none: the configuration's defaults for
// execution.budgets.
var DefaultBudgets = map[Budget]time.Duration{
	BudgetKubernetes: config.DefaultKubernetesBudget.Std(),
	BudgetCapacity:   config.DefaultCapacityBudget.Std(),
	BudgetBootstrap:  config.DefaultBootstrapBudget.Std(),
}

// Execution is what the engine hands an executing operation.
type Execution struct {
	// RequestID is the request being executed.
	RequestID string
	// Fence is the lock's fencing number: larger than any earlier holder's of the same scope. Writes carry it
	// (a Kubernetes annotation that never goes down, EKS's clientRequestToken).
	Fence   int64
	Replica string
	// Guard re-checks, in one step against the state store, that this execution still holds its lock; call it
	// right before every write. Nil (read-only operations) means nothing to check.
	Guard func(ctx context.Context) error
	// WriteStarted is when the write was sent (the engine's clock), zero before it; an observation reads what AWS
	// reports after it.
	WriteStarted time.Time
	// Marks are the marks the execution recorded with its progress notes so far (progress.Marked), as the attempt
	// found them when it began: a resumed Await goes on after them.
	Marks map[string]string
}

// Mark is the mark last recorded under key (progress.Marked) before this attempt began, or "".
func (x Execution) Mark(key string) string { return x.Marks[key] }

// Check runs the guard, if any.
func (x Execution) Check(ctx context.Context) error {
	if x.Guard == nil {
		return nil
	}
	return x.Guard(ctx)
}

// Steps is implemented by operations whose execution resumes on another replica: Write makes the one change and
// returns what it wrote, which the engine records before Await begins; Await observes until the change is done.
// A replica resuming a request whose write is recorded calls only Await, so a write is never sent twice.
// Operations without Steps run Execute as one write whose outcome is unknown if the replica dies.
type Steps interface {
	Write(ctx context.Context, req *Request, plan *Plan, x Execution) (written []byte, err error)
	Await(ctx context.Context, req *Request, plan *Plan, written []byte, x Execution) (*Result, error)
}

// StepOperation is an operation that executes in resumable steps.
type StepOperation interface {
	Operation
	Steps
}

// ExecuteSteps runs a StepOperation in one go, Write then Await, planning first when plan is nil (so running it
// again once the change is made writes nothing). It is the Execute of such operations, for callers that do not
// record steps.
func ExecuteSteps(ctx context.Context, op StepOperation, req *Request, plan *Plan, x Execution) (*Result, error) {
	if plan == nil {
		p, err := op.Plan(ctx, req)
		if err != nil {
			return nil, err
		}
		plan = p
	}
	written, err := op.Write(ctx, req, plan, x)
	if err != nil {
		return nil, err
	}
	return op.Await(ctx, req, plan, written, x)
}

// Rechecker is implemented by operations that can re-read just the observed state a plan's hash covers, without
// building the plan again: the engine compares it with Plan.Observed right before executing.
type Rechecker interface {
	Recheck(ctx context.Context, req *Request, plan *Plan) (observed string, err error)
}

// Operation is one entry of the catalog. Validate checks guardrails without changing anything; Plan reads the
// observed state and returns the diff, cost and operation-specific risk (the engine adds the shared rules and the
// hash); Execute makes the change and must be idempotent: running it twice for the same request is harmless.
// Read-only operations are executed straight away and their Plan is not called.
type Operation interface {
	Spec() Spec
	Validate(ctx context.Context, req *Request) error
	Plan(ctx context.Context, req *Request) (*Plan, error)
	Execute(ctx context.Context, req *Request, plan *Plan, x Execution) (*Result, error)
}

// Observer is implemented by operations that can tell what really happened after an interrupted execution.
type Observer interface {
	Observe(ctx context.Context, req *Request) (*Result, error)
}

// Catalog is the set of registered operations, by name.
type Catalog struct {
	mu  sync.RWMutex
	ops map[string]Operation
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog { return &Catalog{ops: map[string]Operation{}} }

// Register adds operations; a duplicate name is a programming error and panics.
func (c *Catalog) Register(ops ...Operation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range ops {
		name := op.Spec().Name
		if _, dup := c.ops[name]; dup {
			panic(fmt.Sprintf("ops: operation %q registered twice", name))
		}
		c.ops[name] = op
	}
}

// Lookup finds an operation; the error is E_UNKNOWN_OPERATION with the closest name suggested.
func (c *Catalog) Lookup(name string) (Operation, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if op, ok := c.ops[name]; ok {
		return op, nil
	}
	return nil, Unknown(CodeUnknownOperation, "operation", "known operations", name, c.namesLocked(), "unknown operation %q", name)
}

// Spec is the spec of a registered operation.
func (c *Catalog) Spec(name string) (Spec, bool) {
	c.mu.RLock()
	op, ok := c.ops[name]
	c.mu.RUnlock()
	if !ok {
		return Spec{}, false
	}
	return op.Spec(), true
}

// Names lists the registered operation names, sorted.
func (c *Catalog) Names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.namesLocked()
}

func (c *Catalog) namesLocked() []string {
	out := make([]string, 0, len(c.ops))
	for n := range c.ops {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Specs lists the specs of all operations, sorted by name.
func (c *Catalog) Specs() []Spec {
	names := c.Names()
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Spec, 0, len(names))
	for _, n := range names {
		out = append(out, c.ops[n].Spec())
	}
	return out
}
