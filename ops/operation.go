package ops

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
)

// LockScope is the typed key of a lock: what an execution must hold alone (DESIGN.md, catalog "lock scope").
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
	Name    string `json:"name"`
	Domain  string `json:"domain"`
	Slash   string `json:"slash"`
	Summary string `json:"summary"`
	Mutates bool   `json:"mutates"`
	// Baseline is the risk every plan of this operation starts at.
	Baseline Level       `json:"baseline"`
	Params   []ParamSpec `json:"params,omitempty"`
	// Lock returns the scope an execution must hold; nil means no lock.
	Lock func(Request) LockScope `json:"-"`
}

// Execution is what the engine hands an executing operation.
type Execution struct {
	// Fence is the lock's fencing number: larger than any earlier holder's of the same scope.
	Fence   int64
	Replica string
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
	names := c.namesLocked()
	next := "known operations: " + strings.Join(names, ", ")
	if s := Closest(name, names); s != "" {
		next = "did you mean " + s + "? " + next
	}
	return nil, Errorf(CodeUnknownOperation, "operation", next, "unknown operation %q", name)
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

// MatchOperation reports whether an operation name matches a glob such as "get-*".
func MatchOperation(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}
