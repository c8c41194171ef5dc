package ops

import (
	"context"
	"fmt"
)

type progressKey struct{}

// progressSink is where an execution's Progress and ProgressMarked calls go.
type progressSink struct {
	note func(msg string)
	// marked records a note with a mark under key in one step; nil where nobody records marks.
	marked func(msg, key, mark string)
	// final keeps a note for the outcome that follows; nil where nobody records outcomes.
	final func(msg string)
}

// WithProgress returns a context whose Progress calls reach f (and ProgressMarked's notes, without their marks).
func WithProgress(ctx context.Context, f func(msg string)) context.Context {
	return context.WithValue(ctx, progressKey{}, progressSink{note: f})
}

// WithMarkedProgress is WithProgress for the engine, which records ProgressMarked's marks with their notes and
// ProgressFinal's notes with the outcome.
func WithMarkedProgress(ctx context.Context, note func(msg string), marked func(msg, key, mark string), final func(msg string)) context.Context {
	return context.WithValue(ctx, progressKey{}, progressSink{note: note, marked: marked, final: final})
}

// Progress reports a step of a running execution; it does nothing when nobody listens.
func Progress(ctx context.Context, format string, args ...any) {
	if s, ok := ctx.Value(progressKey{}).(progressSink); ok && s.note != nil {
		s.note(fmt.Sprintf(format, args...))
	}
}

// ProgressFinal reports the status that ends a wait ("update Successful, 4/4 nodes Ready"). The engine stores it
// with the outcome that follows, in the same change, so the request's thread tells both in one reply instead of
// two a second apart: a channel where twenty changes end together has room for one post a second. A Progress
// call after it records it first, in order. Where nobody records outcomes it is Progress.
func ProgressFinal(ctx context.Context, format string, args ...any) {
	s, ok := ctx.Value(progressKey{}).(progressSink)
	switch {
	case !ok:
	case s.final != nil:
		s.final(fmt.Sprintf(format, args...))
	case s.note != nil:
		s.note(fmt.Sprintf(format, args...))
	}
}

// ProgressMarked reports a step like Progress and records mark under key with it, in the same stored change: an
// Await resumed on another replica finds the mark in Execution.Mark(key) and goes on after what it says was told
// (the last cluster event told, say), so nothing is told twice across a hand-over.
func ProgressMarked(ctx context.Context, key, mark string, format string, args ...any) {
	s, ok := ctx.Value(progressKey{}).(progressSink)
	switch {
	case !ok:
	case s.marked != nil:
		s.marked(fmt.Sprintf(format, args...), key, mark)
	case s.note != nil:
		s.note(fmt.Sprintf(format, args...))
	}
}
