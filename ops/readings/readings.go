package readings

import (
	"context"
	"sync"
)

type readingsKey struct{}

// readings are what an operation read from outside while one request was being validated and planned.
type readings struct {
	mu   sync.Mutex
	byID map[string]any
}

// With returns a context under which Once keeps what it reads: the engine validates and plans a new
// request under one, so the plan diffs against the state its guardrails were checked on, read once (a HyperPod scale
// describes its cluster once before approval, not once for Validate and again for Plan). It is never used for an
// execution: an execution, and the re-check before its write, must see the world as it is now.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, readingsKey{}, &readings{byID: map[string]any{}})
}

// Without returns a context under which Once reads again: the engine ends its readings with the plan.
func Without(ctx context.Context) context.Context {
	if _, ok := ctx.Value(readingsKey{}).(*readings); !ok {
		return ctx
	}
	return context.WithValue(ctx, readingsKey{}, (*readings)(nil))
}

// Once returns what read returns, or, under With, what an earlier call with the same key returned: key
// names what is read (the API call and its target). A failed read is not kept, so a later call tries again.
func Once[T any](ctx context.Context, key string, read func() (T, error)) (T, error) {
	r, _ := ctx.Value(readingsKey{}).(*readings)
	if r == nil {
		return read()
	}
	r.mu.Lock()
	if v, ok := r.byID[key].(T); ok {
		r.mu.Unlock()
		return v, nil
	}
	r.mu.Unlock()
	v, err := read()
	if err != nil {
		return v, err
	}
	r.mu.Lock()
	r.byID[key] = v
	r.mu.Unlock()
	return v, nil
}
