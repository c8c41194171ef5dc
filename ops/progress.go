package ops

import (
	"context"
	"fmt"
)

// ProgressNotifier is implemented by notifiers that also want the steps an execution reports while it runs (for
// example "2/4 nodes InService"), so the request's thread can tell them.
type ProgressNotifier interface {
	Progress(ctx context.Context, rec *Record, msg string)
}

type progressKey struct{}

// WithProgress returns a context whose Progress calls reach f.
func WithProgress(ctx context.Context, f func(msg string)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// Progress reports a step of a running execution; it does nothing when nobody listens.
func Progress(ctx context.Context, format string, args ...any) {
	if f, ok := ctx.Value(progressKey{}).(func(string)); ok && f != nil {
		f(fmt.Sprintf(format, args...))
	}
}
