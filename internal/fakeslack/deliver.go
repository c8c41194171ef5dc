package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Delivery is an envelope handed to one Socket Mode connection.
type Delivery struct {
	EnvelopeID  string
	ConnID      string
	Type        string
	EventID     string // events_api only
	TriggerID   string // slash commands and interactions
	ResponseURL string // slash commands and block actions
	d           *delivery
}

// Ack waits for the envelope's ack. It returns ErrAckTimeout once Slack would have given up (AckTimeout).
func (d Delivery) Ack(ctx context.Context) (Ack, error) {
	if d.d == nil {
		return Ack{}, fmt.Errorf("waiting for ack: %w", ErrNotFound)
	}
	select {
	case <-d.d.done:
		if d.d.err != nil {
			return Ack{}, fmt.Errorf("envelope %s on %s: %w", d.EnvelopeID, d.ConnID, d.d.err)
		}
		return *d.d.ack, nil
	case <-ctx.Done():
		return Ack{}, fmt.Errorf("waiting for ack of %s: %w", d.EnvelopeID, ctx.Err())
	}
}

func (s *Server) deliver(ctx context.Context, sp envSpec, exclude string) (Delivery, error) {
	d, err := s.send(ctx, sp, exclude)
	if err != nil {
		return Delivery{}, err
	}
	return Delivery{
		EnvelopeID: sp.envID, ConnID: d.conn.id, Type: sp.typ, EventID: sp.eventID, TriggerID: sp.trigger,
		ResponseURL: sp.responseURL, d: d,
	}, nil
}

// SlashCommand is a slash command typed by a user.
type SlashCommand struct {
	Command string // default "/hp"
	Text    string
	User    string
	Channel string
}

// SlashCommand delivers a slash_commands envelope with a response_url and a trigger_id, as Slack does.
func (s *Server) SlashCommand(ctx context.Context, cmd SlashCommand) (Delivery, error) {
	if cmd.Command == "" {
		cmd.Command = "/hp"
	}
	s.mu.Lock()
	trig := s.newTriggerLocked(cmd.User)
	hook := s.newResponseURLLocked(cmd.Channel, cmd.User, "")
	payload, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": s.opts.TeamID, "team_domain": s.opts.TeamDomain,
		"channel_id": cmd.Channel, "channel_name": s.channelNameLocked(cmd.Channel), "user_id": cmd.User,
		"user_name": s.users[cmd.User].Name, "command": cmd.Command, "text": cmd.Text, "api_app_id": s.opts.AppID,
		"is_enterprise_install": "false", "response_url": hook, "trigger_id": trig,
	})
	s.mu.Unlock()
	return s.deliver(ctx, envSpec{
		envID: newEnvelopeID(), typ: "slash_commands", payload: payload, accepts: true,
		channel: cmd.Channel, user: cmd.User, trigger: trig, responseURL: hook,
	}, "")
}

func (s *Server) channelNameLocked(id string) string {
	if strings.HasPrefix(id, "D") {
		return "directmessage"
	}
	return strings.ToLower(id)
}

// Click is a user pressing a button on a message.
type Click struct {
	User      string
	Channel   string
	MessageTS string
	ActionID  string
	BlockID   string // optional: which block, when several have the action
}

// ClickButton delivers a block_actions interaction for a button that is on the message now; a button that
// is not there (never was, or was removed by an update) cannot be clicked and gives ErrNotFound.
func (s *Server) ClickButton(ctx context.Context, cl Click) (Delivery, error) {
	s.mu.Lock()
	ch, m := s.liveMessageLocked(cl.Channel, cl.MessageTS)
	if m == nil {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("clicking %s on %s/%s: message: %w", cl.ActionID, cl.Channel, cl.MessageTS, ErrNotFound)
	}
	action, blockID, ok := findButton(m.Blocks, cl.ActionID, cl.BlockID)
	if !ok {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("clicking %s on %s/%s: button: %w", cl.ActionID, cl.Channel, cl.MessageTS, ErrNotFound)
	}
	return s.deliverBlockActionLocked(ctx, ch, m, cl.User, action, blockID)
}

// liveMessageLocked finds the message ts of a channel that a person can act on, one that is there and not deleted;
// m is nil otherwise.
func (s *Server) liveMessageLocked(channelID, ts string) (ch *channel, m *Message) {
	ch = s.channels[channelID]
	if ch != nil {
		m = ch.byTS[ts]
	}
	if m == nil || m.Deleted {
		return ch, nil
	}
	return ch, m
}

// deliverBlockActionLocked delivers a block_actions interaction of user on message m of ch, carrying action (a
// button or an overflow choice, as Slack sends it) in block blockID. It is called with s.mu held and releases it.
func (s *Server) deliverBlockActionLocked(ctx context.Context, ch *channel, m *Message, user string, action map[string]any, blockID string) (Delivery, error) {
	s.stampActionLocked(action, blockID)
	trig := s.newTriggerLocked(user)
	hook := s.newResponseURLLocked(ch.id, user, m.TS)
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": ch.id, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": s.userRefLocked(user), "api_app_id": s.opts.AppID,
		"token": "verification-token", "container": container, "trigger_id": trig,
		"team":       map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamDomain},
		"enterprise": nil, "is_enterprise_install": false,
		"channel": map[string]any{"id": ch.id, "name": s.channelNameLocked(ch.id)},
		"message": s.messageJSON(ch, m, true), "state": map[string]any{"values": map[string]any{}},
		"response_url": hook, "actions": []any{action},
	})
	s.mu.Unlock()
	return s.deliver(ctx, envSpec{
		envID: newEnvelopeID(), typ: "interactive", payload: payload, channel: ch.id, user: user,
		trigger: trig, responseURL: hook,
	}, "")
}

// stampActionLocked adds to an action what Slack adds to every one it delivers in block_actions, from a message or
// a view alike: the block it is in, and when it was taken (action_ts, seconds and microseconds).
func (s *Server) stampActionLocked(action map[string]any, blockID string) {
	now := s.clock.Now()
	action["block_id"] = blockID
	action["action_ts"] = strconv.FormatInt(now.Unix(), 10) + "." + fmt.Sprintf("%06d", now.Nanosecond()/1000)
}

func (s *Server) userRefLocked(id string) map[string]any {
	u := s.users[id]
	return map[string]any{"id": id, "username": u.Name, "name": u.Name, "team_id": s.opts.TeamID}
}

// findButton finds a button by action_id in actions blocks and section accessories, or else an overflow menu
// option whose value is actionID or starts with actionID+":" (choosing it, as a person would); it returns the
// action as block_actions carries it.
func findButton(blocksJSON json.RawMessage, actionID, wantBlock string) (map[string]any, string, bool) {
	return findAction(blocksJSON, wantBlock, func(el map[string]any) map[string]any {
		if opt := overflowOption(el, actionID); opt != nil {
			return map[string]any{"action_id": el["action_id"], "type": "overflow", "selected_option": opt}
		}
		if el["type"] != "button" || el["action_id"] != actionID {
			return nil
		}
		action := map[string]any{"action_id": actionID, "type": "button", "text": el["text"]}
		for _, k := range []string{"value", "style"} {
			if v, ok := el[k]; ok {
				action[k] = v
			}
		}
		return action
	})
}

// findAction walks the interactive elements of blocksJSON (those of actions blocks, and section accessories), in
// the block wantBlock when it is not empty, and returns the first action that choose makes of one, with its
// block's id. Clicking a button and choosing an overflow option look for an element the same way, so they share it.
func findAction(blocksJSON json.RawMessage, wantBlock string, choose func(el map[string]any) map[string]any) (map[string]any, string, bool) {
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
			if action := choose(el); action != nil {
				return action, blockID, true
			}
		}
	}
	return nil, "", false
}

func overflowOption(el map[string]any, choice string) map[string]any {
	if el["type"] != "overflow" {
		return nil
	}
	opts, _ := el["options"].([]any)
	for _, o := range opts {
		om, _ := o.(map[string]any)
		if v, _ := om["value"].(string); v == choice || strings.HasPrefix(v, choice+":") {
			return om
		}
	}
	return nil
}

// Interaction delivers an interactive envelope with a payload of the caller's making.
func (s *Server) Interaction(ctx context.Context, payload any) (Delivery, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return Delivery{}, fmt.Errorf("encoding interaction: %w", err)
	}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	return s.deliver(ctx, envSpec{
		envID: newEnvelopeID(), typ: "interactive", payload: raw, accepts: head.Type == "view_submission",
	}, "")
}

// Submission is a user submitting an open modal.
type Submission struct {
	ViewID string
	User   string // default: who opened it
	// Values are the input states: block_id → action_id → element state, e.g. TextValue("x").
	Values map[string]map[string]any
}

// TextValue is a plain_text_input's state in a view submission.
func TextValue(v string) map[string]any {
	return map[string]any{"type": "plain_text_input", "value": v}
}

// SubmitView delivers a view_submission for an open view. When the ack carries no response_action (or
// "clear") the view is closed, as in Slack.
func (s *Server) SubmitView(ctx context.Context, sub Submission) (Delivery, error) {
	s.mu.Lock()
	v := s.views[sub.ViewID]
	if v == nil || v.Closed {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("submitting view %s: %w", sub.ViewID, ErrNotFound)
	}
	if sub.User == "" {
		sub.User = v.User
	}
	state := map[string]any{}
	for b, acts := range sub.Values {
		state[b] = acts
	}
	trig := s.newTriggerLocked(sub.User)
	payload, _ := json.Marshal(map[string]any{
		"type": "view_submission", "team": map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamDomain},
		"user": s.userRefLocked(sub.User), "api_app_id": s.opts.AppID, "token": "verification-token",
		"trigger_id": trig, "view": s.viewJSON(v, state), "response_urls": []any{},
		"is_enterprise_install": false, "enterprise": nil,
	})
	s.mu.Unlock()
	return s.deliver(ctx, envSpec{
		envID: newEnvelopeID(), typ: "interactive", payload: payload, accepts: true, user: sub.User,
		viewID: v.ID, trigger: trig,
	}, "")
}

// Event delivers an events_api envelope wrapping inner (the "event" object) in an event_callback.
func (s *Server) Event(ctx context.Context, inner map[string]any) (Delivery, error) {
	s.mu.Lock()
	sp := s.eventSpecLocked(inner)
	s.mu.Unlock()
	return s.deliver(ctx, sp, "")
}

func (s *Server) eventSpecLocked(inner map[string]any) envSpec {
	eventID := randomID("Ev0", 9)
	payload, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": s.opts.TeamID, "api_app_id": s.opts.AppID, "event": inner,
		"type": "event_callback", "event_id": eventID, "event_time": s.clock.Now().Unix(),
		"authorizations": []any{map[string]any{
			"enterprise_id": nil, "team_id": s.opts.TeamID, "user_id": s.opts.BotUserID, "is_bot": true,
			"is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false, "event_context": randomHex(40),
	})
	return envSpec{envID: newEnvelopeID(), typ: "events_api", payload: payload, eventID: eventID}
}

// Post is a message a person (or another bot, with BotID) writes in a conversation.
type Post struct {
	Channel  string
	User     string
	BotID    string
	Text     string
	ThreadTS string
}

// PostMessage stores a message written by a user or another bot and, if the app subscribes to message
// events for that kind of conversation (message.im, message.channels), delivers the event.
func (s *Server) PostMessage(ctx context.Context, p Post) (Message, Delivery, error) {
	s.mu.Lock()
	ch := s.channels[p.Channel]
	if ch == nil {
		s.mu.Unlock()
		return Message{}, Delivery{}, fmt.Errorf("posting in %s: %w", p.Channel, ErrNotFound)
	}
	m := &Message{Channel: ch.id, TS: s.nextTSLocked(), User: p.User, BotID: p.BotID, Text: p.Text, PostedAt: s.clock.Now()}
	ch.thread(m, p.ThreadTS)
	ch.add(m)
	s.notifyLocked()
	copyM := *m
	inner, subscribed := s.messageEventLocked(ch, m)
	if !subscribed {
		s.mu.Unlock()
		return copyM, Delivery{}, nil
	}
	sp := s.eventSpecLocked(inner)
	s.mu.Unlock()
	d, err := s.deliver(ctx, sp, "")
	return copyM, d, err
}

// messageEventLocked builds the message event Slack sends for m, and whether the app subscribes to it.
func (s *Server) messageEventLocked(ch *channel, m *Message) (map[string]any, bool) {
	sub, kind := "message.channels", "channel"
	if ch.isIM() {
		sub, kind = "message.im", "im"
	}
	if !slices.Contains(s.opts.EventSubscriptions, sub) {
		return nil, false
	}
	ev := map[string]any{
		"type": "message", "channel": ch.id, "user": m.User, "text": m.Text, "ts": m.TS, "event_ts": m.TS,
		"channel_type": kind, "team": s.opts.TeamID,
	}
	if m.BotID != "" {
		ev["bot_id"] = m.BotID
		if m.BotID == s.opts.BotID {
			ev["app_id"] = s.opts.AppID
		}
	} else {
		ev["client_msg_id"] = newEnvelopeID()
	}
	if len(m.Blocks) > 0 {
		ev["blocks"] = m.Blocks
	}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
		if parent := ch.byTS[m.ThreadTS]; parent != nil {
			ev["parent_user_id"] = parent.User
		}
	}
	if len(m.FileIDs) > 0 {
		ev["subtype"] = "file_share"
	}
	return ev, true
}

// echoMessageEventLocked delivers the event for a message the app itself posted, as Slack does for
// subscribed conversations; with no connection open it is retried on the Events API schedule.
func (s *Server) echoMessageEventLocked(ch *channel, m *Message) {
	inner, ok := s.messageEventLocked(ch, m)
	if !ok {
		return
	}
	sp := s.eventSpecLocked(inner)
	s.goOwnedLocked(func() {
		if _, err := s.send(context.Background(), sp, ""); err == ErrNoConnection {
			s.mu.Lock()
			sp.attempt, sp.reason, sp.envID = 1, "connection_failed", newEnvelopeID()
			s.scheduleRetryLocked(sp, "")
			s.mu.Unlock()
		}
	})
}

// SendRaw delivers an envelope of any type with the given payload, tracked like the others.
func (s *Server) SendRaw(ctx context.Context, typ string, payload json.RawMessage, acceptsResponse bool) (Delivery, error) {
	return s.deliver(ctx, envSpec{envID: newEnvelopeID(), typ: typ, payload: payload, accepts: acceptsResponse}, "")
}

// Redeliver sends an envelope again, same envelope_id and payload, to another connection when there is
// one: a duplicate delivery. An events_api envelope carries retry_attempt+1 and retry_reason "timeout".
func (s *Server) Redeliver(ctx context.Context, envelopeID string) (Delivery, error) {
	s.mu.Lock()
	var last *delivery
	for _, d := range s.deliveries {
		if d.spec.envID == envelopeID {
			last = d
		}
	}
	if last == nil {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("redelivering %s: %w", envelopeID, ErrNotFound)
	}
	sp := last.spec
	if sp.typ == "events_api" {
		sp.attempt++
		sp.reason = "timeout"
	}
	exclude := last.conn.id
	s.mu.Unlock()
	return s.deliver(ctx, sp, exclude)
}
