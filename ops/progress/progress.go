package progress

import (
	"context"
	"fmt"
)

type progressKey struct{}

// progressSink is where an execution's Note and Marked calls go.
type progressSink struct {
	note func(msg string)
	// marked records a note with a mark under key in one step; nil where nobody records marks.
	marked func(msg, key, mark string)
	// final keeps a note for the outcome that follows; nil where nobody records outcomes.
	final func(msg string)
}

// With returns a context whose Note calls reach f (and Marked's notes, without their marks).
func With(ctx context.Context, f func(msg string)) context.Context {
	return context.WithValue(ctx, progressKey{}, progressSink{note: f})
}

// WithMarked is With for the engine, which records Marked's marks with their notes and
// Final's notes with the outcome.
func WithMarked(ctx context.Context, note func(msg string), marked func(msg, key, mark string), final func(msg string)) context.Context {
	return context.WithValue(ctx, progressKey{}, progressSink{note: note, marked: marked, final: final})
}

// Note reports a step of a running execution; it does nothing when nobody listens.
func Note(ctx context.Context, format string, args ...any) {
	if s, ok := ctx.Value(progressKey{}).(progressSink); ok && s.note != nil {
		s.note(fmt.Sprintf(format, args...))
	}
}

// Final reports the status that ends a wait ("update Successful, 4/4 nodes Ready"). The engine stores it
// with the outcome that follows, in the same change, so the request's thread tells both in one reply instead of
// two a second apart: a channel where twenty changes end together has room for one post a second. A Note
// call after it records it first, in order. Where nobody records outcomes it is Note.
func Final(ctx context.Context, format string, args ...any) {
	s, ok := ctx.Value(progressKey{}).(progressSink)
	switch {
	case !ok:
	case s.final != nil:
		s.final(fmt.Sprintf(format, args...))
	case s.note != nil:
		s.note(fmt.Sprintf(format, args...))
	}
}

// Marked reports a step like Note and records mark under key with it, in the same stored change: an
// Await resumed on another replica finds the mark in ops.Execution.Mark(key) and goes on after what it says was told
// (the last cluster event told, say), so nothing is told twice across a hand-over.
func Marked(ctx context.Context, key, mark string, format string, args ...any) {
	s, ok := ctx.Value(progressKey{}).(progressSink)
	switch {
	case !ok:
	case s.marked != nil:
		s.marked(fmt.Sprintf(format, args...), key, mark)
	case s.note != nil:
		s.note(fmt.Sprintf(format, args...))
	}
}
