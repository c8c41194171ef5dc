package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
)

// Choice is a user picking an option of an overflow menu on a message.
type Choice struct {
	User      string
	Channel   string
	MessageTS string
	ActionID  string
	BlockID   string // optional: which block, when several have the action
	Value     string // the option's value
}

// ChooseOverflow delivers a block_actions interaction for an overflow option that is on the message now, with
// selected_option as Slack sends it; an option that is not there gives ErrNotFound.
func (s *Server) ChooseOverflow(ctx context.Context, c Choice) (Delivery, error) {
	s.mu.Lock()
	ch, m := s.liveMessageLocked(c.Channel, c.MessageTS)
	if m == nil {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("choosing %s of %s on %s/%s: message: %w", c.Value, c.ActionID, c.Channel, c.MessageTS, ErrNotFound)
	}
	action, blockID, ok := findOverflowOption(m.Blocks, c.ActionID, c.BlockID, c.Value)
	if !ok {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("choosing %s of %s on %s/%s: option: %w", c.Value, c.ActionID, c.Channel, c.MessageTS, ErrNotFound)
	}
	return s.deliverBlockActionLocked(ctx, ch, m, c.User, action, blockID)
}

// findOverflowOption finds an overflow menu by action_id (in actions blocks and section accessories) and the
// option with value; it returns the action as block_actions carries it.
func findOverflowOption(blocksJSON json.RawMessage, actionID, wantBlock, value string) (map[string]any, string, bool) {
	return findAction(blocksJSON, wantBlock, func(el map[string]any) map[string]any {
		if el["type"] != "overflow" || el["action_id"] != actionID {
			return nil
		}
		opts, _ := el["options"].([]any)
		for _, o := range opts {
			opt, _ := o.(map[string]any)
			if opt["value"] == value {
				return map[string]any{"action_id": actionID, "type": "overflow", "selected_option": opt}
			}
		}
		return nil
	})
}
