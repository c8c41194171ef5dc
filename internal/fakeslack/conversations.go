package fakeslack

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

func (s *Server) authTest(c *call) (map[string]any, *apiError) {
	u := s.users[c.id.user]
	out := map[string]any{
		"url": "https://" + s.opts.TeamDomain + ".slack.com/", "team": s.opts.TeamDomain, "user": u.Name,
		"team_id": s.opts.TeamID, "user_id": c.id.user, "is_enterprise_install": false,
	}
	if c.id.kind == tokenBot {
		out["bot_id"] = s.opts.BotID
	}
	return out, nil
}

func (s *Server) usersInfo(c *call) (map[string]any, *apiError) {
	u, ok := s.users[c.p.get("user")]
	if !ok {
		return nil, errCode("user_not_found")
	}
	tz := u.TZ
	if tz == "" {
		tz = "America/Los_Angeles"
	}
	return map[string]any{"user": map[string]any{
		"id": u.ID, "team_id": s.opts.TeamID, "name": u.Name, "real_name": u.RealName, "deleted": u.Deleted,
		"is_bot": u.IsBot, "tz": tz,
		"profile": map[string]any{"real_name": u.RealName, "display_name": u.Name, "email": u.Email},
	}}, nil
}

func (s *Server) usergroupsUsersList(c *call) (map[string]any, *apiError) {
	members, ok := s.groups[c.p.get("usergroup")]
	if !ok {
		return nil, errCode("no_such_subteam")
	}
	return map[string]any{"users": slices.Clone(members)}, nil
}

// readableLocked finds a conversation the caller can read.
func (s *Server) readableLocked(c *call) (*channel, *apiError) {
	ch := s.channels[c.p.get("channel")]
	if ch == nil {
		return nil, errCode("channel_not_found")
	}
	if !ch.isIM() && !ch.isMember(c.id.user) {
		return nil, errCode("not_in_channel")
	}
	return ch, nil
}

func (s *Server) conversationsInfo(c *call) (map[string]any, *apiError) {
	ch := s.channels[c.p.get("channel")]
	if ch == nil {
		return nil, errCode("channel_not_found")
	}
	info := map[string]any{
		"id": ch.id, "name": strings.ToLower(ch.id), "is_channel": !ch.isIM(), "is_im": ch.isIM(),
		"is_private": false, "is_member": ch.isIM() || ch.isMember(c.id.user),
	}
	if c.p.get("include_num_members") == "true" || c.p.get("include_num_members") == "1" {
		info["num_members"] = len(ch.members)
	}
	return map[string]any{"channel": info}, nil
}

// page reads Slack's limit and opaque cursor ("<kind>:<position>", base64) for a list of n items.
func page(p params, kind string, n, defLimit, maxLimit int) (start, end int, next string, aerr *apiError) {
	limit := defLimit
	if l := p.get("limit"); l != "" {
		v, err := strconv.Atoi(l)
		if err != nil || v < 0 {
			return 0, 0, "", errCode("invalid_limit")
		}
		if v > 0 {
			limit = min(v, maxLimit)
		}
	}
	if cur := p.get("cursor"); cur != "" {
		raw, err := base64.StdEncoding.DecodeString(cur)
		pos, perr := strconv.Atoi(strings.TrimPrefix(string(raw), kind+":"))
		if err != nil || perr != nil || !strings.HasPrefix(string(raw), kind+":") || pos < 0 || pos > n {
			return 0, 0, "", errCode("invalid_cursor")
		}
		start = pos
	}
	end = min(start+limit, n)
	if end < n {
		next = base64.StdEncoding.EncodeToString([]byte(kind + ":" + strconv.Itoa(end)))
	}
	return start, end, next, nil
}

func (s *Server) conversationsMembers(c *call) (map[string]any, *apiError) {
	ch := s.channels[c.p.get("channel")]
	if ch == nil {
		return nil, errCode("channel_not_found")
	}
	members := ch.members
	if ch.isIM() && !slices.Contains(members, s.opts.BotUserID) {
		members = append([]string{s.opts.BotUserID}, members...)
	}
	start, end, next, aerr := page(c.p, "user", len(members), 100, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return map[string]any{
		"members":           slices.Clone(members[start:end]),
		"response_metadata": map[string]any{"next_cursor": next},
	}, nil
}

func (s *Server) conversationsHistory(c *call) (map[string]any, *apiError) {
	ch, aerr := s.readableLocked(c)
	if aerr != nil {
		return nil, aerr
	}
	var top []*Message
	for _, m := range slices.Backward(ch.messages) {
		if !m.Deleted && m.ThreadTS == "" && inRange(c.p, m.TS) {
			top = append(top, m)
		}
	}
	start, end, next, aerr := page(c.p, "next_ts", len(top), 100, 999)
	if aerr != nil {
		return nil, aerr
	}
	withMeta := c.p.get("include_all_metadata") == "1" || c.p.get("include_all_metadata") == "true"
	msgs := make([]map[string]any, 0, end-start)
	for _, m := range top[start:end] {
		msgs = append(msgs, s.messageJSON(ch, m, withMeta))
	}
	return map[string]any{
		"messages": msgs, "has_more": next != "", "pin_count": 0,
		"response_metadata": map[string]any{"next_cursor": next},
	}, nil
}

// inRange applies conversations.history's oldest/latest/inclusive bounds.
func inRange(p params, ts string) bool {
	inclusive := p.get("inclusive") == "1" || p.get("inclusive") == "true"
	t, _ := strconv.ParseFloat(ts, 64)
	if o := p.get("oldest"); o != "" {
		ov, _ := strconv.ParseFloat(o, 64)
		if t < ov || (t == ov && !inclusive) {
			return false
		}
	}
	if l := p.get("latest"); l != "" {
		lv, _ := strconv.ParseFloat(l, 64)
		if t > lv || (t == lv && !inclusive) {
			return false
		}
	}
	return true
}

func (s *Server) conversationsReplies(c *call) (map[string]any, *apiError) {
	ch, aerr := s.readableLocked(c)
	if aerr != nil {
		return nil, aerr
	}
	root := threadRoot(ch, c.p.get("ts"))
	if root == "" {
		return nil, errCode("thread_not_found")
	}
	thread := append([]*Message{ch.byTS[root]}, ch.replies(root)...)
	start, end, next, aerr := page(c.p, "next_ts", len(thread), 1000, 1000)
	if aerr != nil {
		return nil, aerr
	}
	withMeta := c.p.get("include_all_metadata") == "1" || c.p.get("include_all_metadata") == "true"
	msgs := make([]map[string]any, 0, end-start)
	for _, m := range thread[start:end] {
		j := s.messageJSON(ch, m, withMeta)
		if m.TS != root {
			j["parent_user_id"] = ch.byTS[root].User
		}
		msgs = append(msgs, j)
	}
	return map[string]any{"messages": msgs, "has_more": next != "", "response_metadata": map[string]any{"next_cursor": next}}, nil
}

// trigger is a trigger_id handed out with an interaction; it opens one view within TriggerTTL.
type trigger struct {
	user   string
	issued time.Time
	used   bool
}

// newTriggerLocked issues a trigger_id like Slack's: "<digits>.<digits>.<hex>".
func (s *Server) newTriggerLocked(user string) string {
	id := strconv.FormatInt(s.clock.Now().UnixNano()%1e11, 10) + "." + strconv.FormatInt(s.lastTS%1e10, 10) + "." + randomHex(32)
	s.triggers[id] = &trigger{user: user, issued: s.clock.Now()}
	return id
}

func (s *Server) viewsOpen(c *call) (map[string]any, *apiError) {
	tid := c.p.get("trigger_id")
	raw := c.p.get("view")
	if tid == "" || raw == "" {
		return nil, errCode("invalid_arguments")
	}
	t := s.triggers[tid]
	switch {
	case t == nil:
		return nil, errCode("invalid_trigger_id")
	case t.used:
		return nil, errCode("exchanged_trigger_id")
	case s.clock.Since(t.issued) > s.opts.TriggerTTL:
		return nil, errCode("expired_trigger_id")
	}
	if problems := validateView(raw); len(problems) > 0 {
		return nil, errCode("invalid_arguments", problems...)
	}
	t.used = true
	var view map[string]any
	_ = json.Unmarshal([]byte(raw), &view)
	str := func(k string) string { v, _ := view[k].(string); return v }
	title := ""
	if tm, ok := view["title"].(map[string]any); ok {
		title, _ = tm["text"].(string)
	}
	blocks, _ := json.Marshal(view["blocks"])
	v := &View{
		ID: randomID("V", 10), User: t.user, TriggerID: tid, Type: str("type"), CallbackID: str("callback_id"),
		PrivateMetadata: str("private_metadata"), ExternalID: str("external_id"), Title: title,
		Blocks: blocks, Raw: json.RawMessage(raw), OpenedAt: s.clock.Now(),
	}
	s.views[v.ID] = v
	s.viewOrder = append(s.viewOrder, v.ID)
	s.notifyLocked()
	return map[string]any{"view": s.viewJSON(v, nil)}, nil
}

// viewJSON renders a view as views.open returns it and as view_submission carries it.
func (s *Server) viewJSON(v *View, state map[string]any) map[string]any {
	var out map[string]any
	_ = json.Unmarshal(v.Raw, &out)
	if out == nil {
		out = map[string]any{}
	}
	if state == nil {
		state = map[string]any{}
	}
	out["id"] = v.ID
	out["team_id"] = s.opts.TeamID
	out["app_id"] = s.opts.AppID
	out["bot_id"] = s.opts.BotID
	out["root_view_id"] = v.ID
	out["previous_view_id"] = nil
	out["hash"] = strconv.FormatInt(v.OpenedAt.Unix(), 10) + "." + v.ID
	out["state"] = map[string]any{"values": state}
	return out
}
