package fakeslack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Home is the App Home tab last published to a user with views.publish.
type Home struct {
	ID              string
	User            string
	PrivateMetadata string
	Blocks          json.RawMessage
	Raw             json.RawMessage // the view object as sent
	// Hash is the view's hash as Slack returns it: a publish naming another one is refused (hash_conflict).
	Hash        string
	PublishedAt time.Time
	// Publishes counts the views.publish calls Slack took for this user.
	Publishes int
}

// viewsPublish implements views.publish: a home view (type "home", at most 100 blocks, Block Kit valid, no title)
// for an existing, active user; a hash that is not the current view's is refused, as Slack does.
func (s *Server) viewsPublish(c *call) (map[string]any, *apiError) {
	user, raw := c.p.get("user_id"), c.p.get("view")
	if user == "" || raw == "" {
		return nil, errCode("invalid_arguments")
	}
	if u, ok := s.users[user]; !ok || u.Deleted || u.IsBot {
		return nil, errCode("user_not_found")
	}
	if problems := validateHomeView(raw); len(problems) > 0 {
		return nil, errCode("invalid_arguments", problems...)
	}
	h := s.homes[user]
	if hash := c.p.get("hash"); hash != "" && (h == nil || h.Hash != hash) {
		return nil, errCode("hash_conflict")
	}
	if h == nil {
		h = &Home{ID: randomID("V", 10), User: user}
		s.homes[user] = h
	}
	var view map[string]any
	_ = json.Unmarshal([]byte(raw), &view)
	blocks, _ := json.Marshal(view["blocks"])
	meta, _ := view["private_metadata"].(string)
	sum := sha256.Sum256([]byte(raw))
	h.PrivateMetadata, h.Blocks, h.Raw, h.PublishedAt = meta, blocks, json.RawMessage(raw), s.clock.Now()
	h.Hash = strconv.FormatInt(h.PublishedAt.Unix(), 10) + "." + hex.EncodeToString(sum[:8])
	h.Publishes++
	s.notifyLocked()
	return map[string]any{"view": s.homeJSONLocked(h)}, nil
}

func (s *Server) homeJSONLocked(h *Home) map[string]any {
	var out map[string]any
	_ = json.Unmarshal(h.Raw, &out)
	if out == nil {
		out = map[string]any{}
	}
	out["id"], out["team_id"], out["app_id"], out["bot_id"] = h.ID, s.opts.TeamID, s.opts.AppID, s.opts.BotID
	out["root_view_id"], out["previous_view_id"], out["hash"] = h.ID, nil, h.Hash
	out["state"] = map[string]any{"values": map[string]any{}}
	return out
}

// validateHomeView checks a home view as Slack does: type home, at most 100 blocks of the types a view allows,
// private_metadata and callback_id within their limits.
func validateHomeView(raw string) []string {
	var view map[string]any
	if err := json.Unmarshal([]byte(raw), &view); err != nil {
		return []string{"view must be a JSON object [json-pointer:/view]"}
	}
	v := &validator{blockIDs: map[string]bool{}}
	if view["type"] != "home" {
		v.addf("/view/type", "must be a valid enum value")
	}
	return v.viewBody(view)
}

// Home returns the Home tab last published to user.
func (s *Server) Home(user string) (Home, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.homes[user]
	if h == nil {
		return Home{}, false
	}
	return *h, true
}

// OpenHome is user opening the app's Home tab: an app_home_opened event (tab "home"), carrying the view published
// to them, if any.
func (s *Server) OpenHome(ctx context.Context, user string) (Delivery, error) {
	s.mu.Lock()
	if u, ok := s.users[user]; !ok || u.Deleted {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("opening the Home of %s: %w", user, ErrNotFound)
	}
	im := s.imWithLocked(user)
	inner := map[string]any{"type": "app_home_opened", "user": user, "channel": im.id, "tab": "home",
		"event_ts": strconv.FormatInt(s.clock.Now().Unix(), 10) + ".000100"}
	if h := s.homes[user]; h != nil {
		inner["view"] = s.homeJSONLocked(h)
	}
	sp := s.eventSpecLocked(inner)
	s.mu.Unlock()
	return s.deliver(ctx, sp, "")
}

// HomeClick is a user pressing a button in their Home tab.
type HomeClick struct {
	User     string
	ActionID string
	BlockID  string // optional: which block, when several have the action
}

// ClickHome delivers a block_actions interaction for a button that is in the user's Home tab now, as Slack sends
// one from a view: a "view" container and the view, no channel and no message.
func (s *Server) ClickHome(ctx context.Context, cl HomeClick) (Delivery, error) {
	s.mu.Lock()
	h := s.homes[cl.User]
	if h == nil {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("clicking %s in the Home of %s: no Home: %w", cl.ActionID, cl.User, ErrNotFound)
	}
	action, blockID, ok := findButton(h.Blocks, cl.ActionID, cl.BlockID)
	if !ok {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("clicking %s in the Home of %s: button: %w", cl.ActionID, cl.User, ErrNotFound)
	}
	s.stampActionLocked(action, blockID)
	trig := s.newTriggerLocked(cl.User)
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": s.userRefLocked(cl.User), "api_app_id": s.opts.AppID,
		"token": "verification-token", "container": map[string]any{"type": "view", "view_id": h.ID},
		"trigger_id": trig, "team": map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamDomain},
		"enterprise": nil, "is_enterprise_install": false, "view": s.homeJSONLocked(h),
		"actions": []any{action},
	})
	s.mu.Unlock()
	return s.deliver(ctx, envSpec{envID: newEnvelopeID(), typ: "interactive", payload: payload, user: cl.User, trigger: trig}, "")
}
