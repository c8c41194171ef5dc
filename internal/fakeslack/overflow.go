package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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
	ch := s.channels[c.Channel]
	var m *Message
	if ch != nil {
		m = ch.byTS[c.MessageTS]
	}
	if m == nil || m.Deleted {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("choosing %s of %s on %s/%s: message: %w", c.Value, c.ActionID, c.Channel, c.MessageTS, ErrNotFound)
	}
	action, blockID, ok := findOverflowOption(m.Blocks, c.ActionID, c.BlockID, c.Value)
	if !ok {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("choosing %s of %s on %s/%s: option: %w", c.Value, c.ActionID, c.Channel, c.MessageTS, ErrNotFound)
	}
	now := s.clock.Now()
	action["block_id"] = blockID
	action["action_ts"] = strconv.FormatInt(now.Unix(), 10) + "." + fmt.Sprintf("%06d", now.Nanosecond()/1000)
	trig := s.newTriggerLocked(c.User)
	hook := s.newResponseURLLocked(c.Channel, c.User, m.TS)
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": ch.id, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": s.userRefLocked(c.User), "api_app_id": s.opts.AppID,
		"token": "verification-token", "container": container, "trigger_id": trig,
		"team":       map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamDomain},
		"enterprise": nil, "is_enterprise_install": false,
		"channel": map[string]any{"id": ch.id, "name": s.channelNameLocked(ch.id)},
		"message": s.messageJSON(ch, m, true), "state": map[string]any{"values": map[string]any{}},
		"response_url": hook, "actions": []any{action},
	})
	s.mu.Unlock()
	return s.deliver(ctx, envSpec{
		envID: newEnvelopeID(), typ: "interactive", payload: payload, channel: c.Channel, user: c.User,
		trigger: trig, responseURL: hook,
	}, "")
}

// findOverflowOption finds an overflow menu by action_id (in actions blocks and section accessories) and the
// option with value; it returns the action as block_actions carries it.
func findOverflowOption(blocksJSON json.RawMessage, actionID, wantBlock, value string) (map[string]any, string, bool) {
	var blocks []map[string]any
	if json.Unmarshal(blocksJSON, &blocks) != nil {
		return nil, "", false
	}
	for _, b := range blocks {
		blockID, _ := b["block_id"].(string)
		if wantBlock != "" && blockID != wantBlock {
			continue
		}
		var elems []any
		if es, ok := b["elements"].([]any); ok && b["type"] == "actions" {
			elems = es
		}
		if acc, ok := b["accessory"].(map[string]any); ok {
			elems = append(elems, acc)
		}
		for _, e := range elems {
			el, _ := e.(map[string]any)
			if el["type"] != "overflow" || el["action_id"] != actionID {
				continue
			}
			opts, _ := el["options"].([]any)
			for _, o := range opts {
				opt, _ := o.(map[string]any)
				if opt["value"] == value {
					return map[string]any{"action_id": actionID, "type": "overflow", "selected_option": opt}, blockID, true
				}
			}
		}
	}
	return nil, "", false
}
