package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// The confirmation modal of an approval that asks for a typed name (ops.Spec.Confirm): the approver types it.
// The ids keep the names they had when deleting storage was the only such approval, so open modals still submit.
const (
	ConfirmCallback = "hp_confirm_delete"
	confirmBlock    = "claim"
	confirmAction   = "claim_name"
)

// confirmMeta is the modal's private metadata: which request, what must be typed, and where the button was.
type confirmMeta struct {
	RequestID string `json:"id"`
	// PlanHash is the plan the approver was shown when they clicked Approve.
	PlanHash string `json:"plan,omitempty"`
	Typed    string `json:"claim"`
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
}

// requestActions are the buttons of a request's message.
var requestActions = []string{ActionDetails, ActionApprove, ActionDeny, ActionCancel, ActionStop, ActionTakeOver, ActionResume, ActionRevert,
	ActionBreakGlass, ActionAcknowledgeGlass, ActionGrant}

// Interaction handles an acked interaction: request buttons and the typed-name confirmation modal. Who may not
// use HyperOps is refused first, whatever they clicked. A modal's submission is not asked again: modals open only
// for who was admitted and may see the request, and what they submit is a vote the engine checks (CheckVoter).
func (h *Handler) Interaction(ctx context.Context, cb slack.InteractionCallback) error {
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		if cb.View.Type == slack.VTHomeTab && h.homes != nil {
			h.homes.Clicked(cb.User.ID)
		}
		if err := h.admit(ctx, h.initiator(cb.User.ID, cb.User.Name), false); err != nil {
			return h.tellClicker(ctx, cb.Channel.ID, cb.User.ID, ErrorMessage(err))
		}
		for _, a := range cb.ActionCallback.BlockActions {
			if err := h.button(ctx, cb, a); err != nil {
				return err
			}
		}
		return nil
	case slack.InteractionTypeViewSubmission:
		switch cb.View.CallbackID {
		case ConfirmCallback:
			return h.confirmed(ctx, cb)
		case DenyCallback:
			return h.denySubmitted(ctx, cb)
		case BreakGlassCallback:
			return h.glassSubmitted(ctx, cb)
		case GrantCallback:
			return h.grantSubmitted(ctx, cb)
		}
	}
	return nil
}

func (h *Handler) button(ctx context.Context, cb slack.InteractionCallback, a *slack.BlockAction) error {
	value, action := a.Value, a.ActionID
	if action == ActionMore {
		action, value, _ = strings.Cut(a.SelectedOption.Value, ":")
	}
	id, planHash := ButtonTarget(value)
	voter := h.initiator(cb.User.ID, cb.User.Name)
	channel, ts := cb.Channel.ID, cb.Container.MessageTs
	if ts == "" {
		ts = cb.Message.Timestamp
	}
	if action == ActionRevokeGrant {
		return h.revokeGrant(ctx, value, voter, channel)
	}
	if action == ActionHomePage && h.homes != nil {
		h.homes.page(ctx, voter.ID, cb.View.PrivateMetadata, value)
		return nil
	}
	if !slices.Contains(requestActions, action) {
		return nil
	}
	// Every button shows or changes a request: only who may see it gets further, so nobody opens a modal with its
	// details, or learns who owns it, from a copied button.
	rec, err := h.visible(ctx, id, voter)
	if err != nil {
		return h.tellClicker(ctx, channel, voter.ID, ErrorMessage(err))
	}
	switch action {
	case ActionDetails:
		return h.poster.OpenView(ctx, cb.TriggerID, DetailsModal(h.catalog, rec))
	case ActionApprove:
		if c := specOf(h.catalog, rec).Confirm; c != nil && rec.Phase == ops.PhaseAwaitingApproval {
			return h.openConfirm(ctx, cb.TriggerID, rec, *c, planHash, channel, ts)
		}
		rec, err = h.engine.Approve(ctx, id, voter, planHash)
	case ActionDeny:
		if rec.Phase == ops.PhaseAwaitingApproval {
			return h.openDeny(ctx, cb.TriggerID, rec, channel, ts)
		}
		rec, err = h.engine.Deny(ctx, id, voter) // tells the clicker why it cannot be denied any more
	case ActionCancel:
		rec, err = h.engine.Cancel(ctx, id, voter)
	case ActionStop:
		rec, err = h.engine.Stop(ctx, id, voter)
	case ActionTakeOver:
		rec, err = h.engine.TakeOver(ctx, id, voter)
	case ActionResume:
		rec, err = h.engine.Resume(ctx, id, voter)
	case ActionRevert:
		return h.revert(ctx, rec.ID(), voter, channel)
	case ActionBreakGlass:
		return h.breakGlassClicked(ctx, cb.TriggerID, rec, voter, channel, ts)
	case ActionAcknowledgeGlass:
		return h.acknowledgeGlass(ctx, rec.ID(), voter, channel)
	case ActionGrant:
		return h.grantClicked(ctx, cb.TriggerID, rec, voter, channel, ts)
	}
	return h.answerClick(ctx, rec, err, channel, ts, voter.ID)
}

// answerClick refreshes the clicked message (so an expired request loses its buttons even when nothing was stored
// by this click) and tells the clicker why a click was refused, privately. A click that stored a change on the
// request's own plan message leaves the refresh to the outbox, which updates that message for every stored change:
// waiting here for chat.update's tier (50 a minute) would hold a Slack worker that the next click needs.
func (h *Handler) answerClick(ctx context.Context, rec *ops.Record, err error, channel, ts, user string) error {
	if rec != nil && rec.Version > 0 && ts != "" && (err != nil || !h.isPlanMessage(ctx, rec.ID(), channel, ts)) {
		m := RequestMessage(h.catalog, rec, toldStates(ctx, h.cfg.Workloads, rec, nil)).Msg
		if uerr := h.poster.Update(ctx, channel, ts, m); uerr != nil {
			h.fail(fmt.Errorf("refresh the message of %s: %w", rec.ID(), uerr))
		}
	}
	if err != nil {
		return h.tellClicker(ctx, channel, user, ErrorMessage(err))
	}
	return nil
}

// tellClicker answers the person who clicked, privately: in the channel of the message they clicked, or, for a
// click in their App Home tab (a view: no channel), at the top of their Home.
func (h *Handler) tellClicker(ctx context.Context, channel, user string, m Msg) error {
	if channel != "" {
		return h.poster.Ephemeral(ctx, channel, user, m)
	}
	if h.homes != nil {
		h.homes.Notice(user, m.Text)
	}
	return nil
}

// isPlanMessage reports whether channel/ts is a plan message of request id, one the outbox keeps up to date. When
// the references cannot be read it says no, so the caller refreshes the message itself.
func (h *Handler) isPlanMessage(ctx context.Context, id, channel, ts string) bool {
	refs, err := h.refs.List(ctx, id)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(refs, func(r MessageRef) bool {
		return r.Kind == RefPlan && r.Channel == channel && r.TS == ts
	})
}

func (h *Handler) openConfirm(ctx context.Context, trigger string, rec *ops.Record, c ops.Confirmation, planHash, channel, ts string) error {
	meta, _ := json.Marshal(confirmMeta{RequestID: rec.ID(), PlanHash: planHash, Typed: c.Typed(rec), Channel: channel, TS: ts})
	return h.poster.OpenView(ctx, trigger, ConfirmModal(rec, c, string(meta)))
}

// ConfirmModal renders the modal in which an approver types what c asks for (the name of what the request
// destroys) to approve it.
func ConfirmModal(rec *ops.Record, c ops.Confirmation, privateMetadata string) slack.ModalViewRequest {
	input := slack.NewPlainTextInputBlockElement(plain(c.Label), confirmAction)
	warning := ""
	if c.Warning != nil {
		warning = " " + c.Warning.Render(rec, mrkdwnWords{})
	}
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: ConfirmCallback, PrivateMetadata: privateMetadata,
		Title: plain(c.Title), Submit: plain(c.Submit), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			section(fmt.Sprintf(":rotating_light: Approving request %s%s.", code(rec.ID()), warning)),
			slack.NewInputBlock(confirmBlock, plain("Type the "+c.Label+" to confirm"), nil, input),
		}},
	}
}

// ValidateSubmission checks a view submission without any I/O, so its answer can ride on the ack: nil accepts it,
// otherwise Slack shows the errors in the modal.
func ValidateSubmission(cb slack.InteractionCallback) *slack.ViewSubmissionResponse {
	if cb.Type == slack.InteractionTypeViewSubmission && cb.View.CallbackID == BreakGlassCallback && glassReason(cb) == "" {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{glassBlock: "say why it cannot wait: every approver reads it"})
	}
	if cb.Type == slack.InteractionTypeViewSubmission && cb.View.CallbackID == GrantCallback {
		return validateGrantForm(cb)
	}
	if cb.Type != slack.InteractionTypeViewSubmission || cb.View.CallbackID != ConfirmCallback {
		return nil
	}
	var meta confirmMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{confirmBlock: "this form is damaged; click Approve again"})
	}
	if typed := strings.TrimSpace(cb.View.State.Values[confirmBlock][confirmAction].Value); typed != meta.Typed {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{confirmBlock: fmt.Sprintf("type %s exactly to delete it", meta.Typed)})
	}
	return nil
}

func (h *Handler) confirmed(ctx context.Context, cb slack.InteractionCallback) error {
	return h.submitOutsideModal(ctx, cb)
}

// confirmSubmission reads the typed-name confirmation (checked already by ValidateSubmission): the approval, on the
// plan the approver was shown, is refused under the typed name.
func (h *Handler) confirmSubmission(cb slack.InteractionCallback) (submission, error) {
	var meta confirmMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		return submission{}, fmt.Errorf("read the confirmation form: %w", err)
	}
	voter := h.initiator(cb.User.ID, cb.User.Name)
	return submission{block: confirmBlock, channel: meta.Channel, ts: meta.TS, decide: func(ctx context.Context) (*ops.Record, error) {
		return h.engine.Approve(ctx, meta.RequestID, voter, meta.PlanHash)
	}}, nil
}
