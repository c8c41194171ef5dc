package handlers

import (
	"context"
	"errors"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// A modal's submission is answered in the modal when the engine refuses it: the ack of a view_submission may carry
// response_action "errors", which keeps the modal open with the refusal under an input, so the person sees why
// where they typed, and may change it and submit again. The runtime waits for the engine's verdict up to a deadline
// within Slack's three seconds (the ack function says whether it was still in time); past it the modal has closed
// and the refusal is told privately, as a click's is.

// maxModalError is how much of a refusal the modal shows under an input.
const maxModalError = 500

// submission is what a modal's submit asks of the engine: decide stores it (or refuses it); block is the input a
// refusal is shown under (fields names the input of a refused field, where the form has one); channel and ts are
// the message the modal was opened from; done runs after an accepted submit (the grant's private note).
type submission struct {
	block       string
	fields      map[string]string
	channel, ts string
	decide      func(ctx context.Context) (*ops.Record, error)
	done        func(ctx context.Context) error
}

// Submit handles a modal's submission (a view_submission) and answers it through ack: what the form itself refuses
// (ValidateSubmission) and what the engine refuses come back as the modal's errors; an accepted submit closes it
// (ack(nil)). ack reports whether its answer still reached the modal; when it did not (the runtime closed it at its
// deadline), a refusal is told privately in the channel of the message, as before. A submission of another modal is
// acked at once and handled as an interaction.
func (h *Handler) Submit(ctx context.Context, cb slack.InteractionCallback, ack func(*slack.ViewSubmissionResponse) bool) error {
	if resp := ValidateSubmission(cb); resp != nil {
		ack(resp)
		return nil
	}
	s, ok, err := h.submission(cb)
	if err != nil {
		ack(nil)
		return err
	}
	if !ok {
		ack(nil)
		return h.Interaction(ctx, cb)
	}
	return h.submitted(ctx, cb, s, ack)
}

// submitted asks the engine, answers the modal, and tells the clicker what the modal could not.
func (h *Handler) submitted(ctx context.Context, cb slack.InteractionCallback, s submission, ack func(*slack.ViewSubmissionResponse) bool) error {
	rec, err := s.decide(ctx)
	if err != nil && ack(modalRefusal(s, err)) {
		return nil
	}
	ack(nil)
	if err := h.answerClick(ctx, rec, err, s.channel, s.ts, cb.User.ID); err != nil {
		return err
	}
	if err == nil && s.done != nil {
		return s.done(ctx)
	}
	return nil
}

// submitOutsideModal handles a submission whose modal cannot be answered any more (Interaction, called without an
// ack): refusals are told privately.
func (h *Handler) submitOutsideModal(ctx context.Context, cb slack.InteractionCallback) error {
	if ValidateSubmission(cb) != nil {
		return nil // refused in the ack; the modal stays open
	}
	s, ok, err := h.submission(cb)
	if err != nil || !ok {
		return err
	}
	return h.submitted(ctx, cb, s, func(*slack.ViewSubmissionResponse) bool { return false })
}

// submission reads the submitted modal's form; ok is false for a modal that has no engine decision to wait for.
func (h *Handler) submission(cb slack.InteractionCallback) (submission, bool, error) {
	if cb.Type != slack.InteractionTypeViewSubmission {
		return submission{}, false, nil
	}
	switch cb.View.CallbackID {
	case ConfirmCallback:
		s, err := h.confirmSubmission(cb)
		return s, err == nil, err
	case DenyCallback:
		s, err := h.denySubmission(cb)
		return s, err == nil, err
	case BreakGlassCallback:
		s, err := h.glassSubmission(cb)
		return s, err == nil, err
	case GrantCallback:
		s, err := h.grantSubmission(cb)
		return s, err == nil, err
	}
	return submission{}, false, nil
}

// modalRefusal is the ack that shows err in the modal: each problem under the input of its field when the form has
// one, else under s.block, with its code, what is wrong and the next step, in plain text (Slack shows errors
// unformatted: nothing a person typed can mention anyone there).
func modalRefusal(s submission, err error) *slack.ViewSubmissionResponse {
	var errs ops.Errors
	if !errors.As(err, &errs) {
		errs = ops.Errors{ops.AsError(err)}
	}
	byBlock := map[string][]string{}
	var order []string
	for _, e := range errs {
		b := s.fields[e.Field]
		if b == "" {
			b = s.block
		}
		if _, ok := byBlock[b]; !ok {
			order = append(order, b)
		}
		byBlock[b] = append(byBlock[b], oneLine(e.Error()))
	}
	out := map[string]string{}
	for _, b := range order {
		out[b] = clip(strings.Join(byBlock[b], " · "), maxModalError)
	}
	return slack.NewErrorsViewSubmissionResponse(out)
}
