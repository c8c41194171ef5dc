package handlers

import (
	"context"
	"fmt"

	"github.com/hyperops/hyperops/ops"
)

// Changed implements ops.Notifier: it posts the request's plan message on its first transition (when this process
// submitted it), updates every plan message in place, replies in threads for the transitions that matter, answers
// agents in their DM thread, and mirrors the transition to the audit channel.
func (h *Handler) Changed(ctx context.Context, rec *ops.Record, t ops.Transition) {
	refs, err := h.refs.List(ctx, rec.ID())
	if err != nil {
		h.fail(fmt.Errorf("list the messages of %s: %w", rec.ID(), err))
	}
	justPosted := false
	if !hasKind(refs, RefPlan) {
		if ref, ok := h.postFirst(ctx, rec); ok {
			refs = append(refs, ref)
			justPosted = true
		}
	}
	for _, ref := range refs {
		switch ref.Kind {
		case RefPlan:
			h.updatePlan(ctx, rec, t, ref, justPosted)
		case RefAgent:
			if Tells(t) && !h.heldBack(rec, ref) {
				m := AgentReply(AgentBody(rec, rec.ID(), nil))
				m.ThreadTS = ref.ThreadTS
				if _, err := h.poster.Post(ctx, ref.Channel, m); err != nil {
					h.fail(fmt.Errorf("reply to agent about %s: %w", rec.ID(), err))
				}
			}
		}
	}
	if h.cfg.AuditChannel != "" {
		if _, err := h.poster.Post(ctx, h.cfg.AuditChannel, AuditLine(rec, t)); err != nil {
			h.fail(fmt.Errorf("mirror %s to the audit channel: %w", rec.ID(), err))
		}
	}
}

func (h *Handler) updatePlan(ctx context.Context, rec *ops.Record, t ops.Transition, ref MessageRef, justPosted bool) {
	r := PlanMessage(rec)
	if !justPosted {
		if err := h.poster.Update(ctx, ref.Channel, ref.TS, r.Msg); err != nil {
			h.fail(fmt.Errorf("update the message of %s: %w", rec.ID(), err))
		}
	}
	if reply, ok := TransitionReply(rec, t); ok && !justPosted {
		reply.ThreadTS = ref.TS
		if _, err := h.poster.Post(ctx, ref.Channel, reply); err != nil {
			h.fail(fmt.Errorf("reply about %s: %w", rec.ID(), err))
		}
	}
	// Long texts go to the thread once: the plan's when it is first shown, the result's when it arrives.
	var files []File
	switch {
	case justPosted || (t.From == ops.PhasePlanned && rec.Plan != nil):
		files = planFiles(r.Files)
	case rec.Result != nil && (t.To == ops.PhaseSucceeded || t.To == ops.PhaseFailed || t.To == ops.PhaseInterrupted):
		files = resultFiles(r.Files)
	}
	if err := h.upload(ctx, ref.Channel, ref.TS, files); err != nil {
		h.fail(err)
	}
}

func planFiles(fs []File) []File {
	var out []File
	for _, f := range fs {
		if !isOutput(f) {
			out = append(out, f)
		}
	}
	return out
}

func resultFiles(fs []File) []File {
	var out []File
	for _, f := range fs {
		if isOutput(f) {
			out = append(out, f)
		}
	}
	return out
}

func isOutput(f File) bool { return len(f.Name) > 11 && f.Name[len(f.Name)-11:] == "-output.txt" }

// postFirst posts the plan message of a request this process is submitting, and remembers it.
func (h *Handler) postFirst(ctx context.Context, rec *ops.Record) (MessageRef, bool) {
	v, ok := h.pending.Load(rec.ID())
	if !ok {
		return MessageRef{}, false
	}
	p := v.(*pendingPost)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.posted || (p.onlyWhenAwaiting && rec.Phase != ops.PhaseAwaitingApproval) {
		return MessageRef{}, false
	}
	r := PlanMessage(rec)
	r.Msg.ThreadTS = p.threadTS
	ts, err := h.poster.Post(ctx, p.channel, r.Msg)
	if err != nil {
		h.fail(fmt.Errorf("post the plan of %s: %w", rec.ID(), err))
		return MessageRef{}, false
	}
	p.posted = true
	ref := MessageRef{Kind: RefPlan, Channel: p.channel, TS: ts, ThreadTS: p.threadTS}
	if err := h.refs.Add(ctx, rec.ID(), ref); err != nil {
		h.fail(fmt.Errorf("remember the message of %s: %w", rec.ID(), err))
	}
	if err := h.upload(ctx, p.channel, ts, planFiles(r.Files)); err != nil {
		h.fail(err)
	}
	return ref, true
}

// Progress implements ops.ProgressNotifier: a step of a running execution is told in the request's threads.
func (h *Handler) Progress(ctx context.Context, rec *ops.Record, msg string) {
	refs, err := h.refs.List(ctx, rec.ID())
	if err != nil {
		h.fail(fmt.Errorf("list the messages of %s: %w", rec.ID(), err))
		return
	}
	for _, ref := range refs {
		m := ProgressReply(rec, msg)
		m.ThreadTS = ref.TS
		if ref.Kind == RefAgent {
			m.ThreadTS = ref.ThreadTS
		}
		if _, err := h.poster.Post(ctx, ref.Channel, m); err != nil {
			h.fail(fmt.Errorf("tell progress of %s: %w", rec.ID(), err))
		}
	}
}

func hasKind(refs []MessageRef, k RefKind) bool {
	for _, r := range refs {
		if r.Kind == k {
			return true
		}
	}
	return false
}

func (h *Handler) fail(err error) {
	if h.cfg.OnError != nil && err != nil {
		h.cfg.OnError(err)
	}
}
