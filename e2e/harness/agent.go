package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hyperops/hyperops/internal/fakeslack"
)

// AgentReply is the machine-readable part of the bot's answer to an agent, read from the reply's message
// metadata (event_type hyperops_request).
type AgentReply struct {
	RequestID string         `json:"requestId"`
	Phase     string         `json:"phase"`
	Plan      map[string]any `json:"plan"`
	Errors    []struct {
		Code    string `json:"code"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
	Message fakeslack.Message `json:"-"`
}

// HasCode reports whether the reply carries an error with that code.
func (r AgentReply) HasCode(code string) bool {
	for _, e := range r.Errors {
		if e.Code == code {
			return true
		}
	}
	return false
}

// WaitAgentReply waits for a bot reply in the thread of the agent's DM message dm whose metadata satisfies match.
func (w *World) WaitAgentReply(ctx context.Context, timeout time.Duration, dm fakeslack.Message, match func(AgentReply) bool) (AgentReply, error) {
	var got AgentReply
	_, err := w.WaitMessage(ctx, timeout, AgentDM, func(m fakeslack.Message) bool {
		if m.ThreadTS != dm.TS || m.TS == dm.TS || m.Metadata == nil || m.Metadata.EventType != "hyperops_request" {
			return false
		}
		var r AgentReply
		if json.Unmarshal(m.Metadata.EventPayload, &r) != nil {
			return false
		}
		r.Message = m
		if match(r) {
			got = r
			return true
		}
		return false
	})
	if err != nil {
		return got, fmt.Errorf("no matching agent reply to %s: %w", dm.TS, err)
	}
	return got, nil
}

// ApproveDeletion approves a delete-storage request as user: it clicks Approve on the message, which opens the
// confirmation modal, and submits the claim name typed in it.
func (w *World) ApproveDeletion(ctx context.Context, user, channel, ts, claim string) error {
	if _, err := w.Click(ctx, user, channel, ts, "hp_approve"); err != nil {
		return err
	}
	var view fakeslack.View
	wctx, cancel := context.WithTimeout(ctx, Patience)
	defer cancel()
	snap, err := w.Slack.WaitFor(wctx, func(s fakeslack.Snapshot) bool {
		for _, v := range s.Views {
			if v.User == user && !v.Closed && v.CallbackID == "hp_confirm_delete" {
				view = v
				return true
			}
		}
		return false
	})
	if err != nil {
		var seen []string
		for _, v := range snap.Views {
			seen = append(seen, fmt.Sprintf("%s for %s (closed %v)", v.CallbackID, v.User, v.Closed))
		}
		return fmt.Errorf("no confirmation modal opened for %s: %w; views: %v", user, err, seen)
	}
	d, err := w.Slack.SubmitView(ctx, fakeslack.Submission{ViewID: view.ID, User: user,
		Values: map[string]map[string]any{"claim": {"claim_name": fakeslack.TextValue(claim)}}})
	if err != nil {
		return fmt.Errorf("submit the confirmation modal: %w", err)
	}
	if _, err := d.Ack(ctx); err != nil {
		return fmt.Errorf("submit the confirmation modal: ack: %w", err)
	}
	return nil
}
