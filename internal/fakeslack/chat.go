package fakeslack

import (
	"encoding/json"
	"strings"
)

// content is the text, blocks and metadata of a message being posted or updated.
type content struct {
	text        string
	blocks      json.RawMessage
	hasText     bool
	hasBlocks   bool
	metadata    *Metadata
	unfurlLinks *bool
	unfurlMedia *bool
}

// readContent reads and validates text, blocks, attachments and metadata the way chat.* methods do.
func readContent(p params, requireSome bool) (content, *apiError) {
	c := content{
		text:        p.get("text"),
		hasText:     p.has("text"),
		hasBlocks:   p.has("blocks") && p.get("blocks") != "",
		unfurlLinks: p.boolArg("unfurl_links"),
		unfurlMedia: p.boolArg("unfurl_media"),
	}
	if requireSome && c.text == "" && !c.hasBlocks && p.get("attachments") == "" {
		return c, errCode("no_text")
	}
	var blocks string
	if c.hasBlocks {
		blocks = p.get("blocks")
	}
	if aerr := checkContent(c.text, blocks, p.get("metadata")); aerr != nil {
		return c, aerr
	}
	if c.hasBlocks {
		c.blocks = json.RawMessage(blocks)
	}
	if meta := p.get("metadata"); meta != "" {
		c.metadata, _ = readMetadata(meta)
	}
	return c, nil
}

// postableLocked finds a conversation the caller can post in.
func (s *Server) postableLocked(channelID, poster string) (*channel, *apiError) {
	ch := s.channels[channelID]
	if ch == nil && strings.HasPrefix(channelID, "U") {
		ch = s.imWithLocked(channelID)
	}
	if ch == nil {
		return nil, errCode("channel_not_found")
	}
	if ch.archived {
		return nil, errCode("is_archived")
	}
	if !ch.isIM() && !ch.isMember(poster) {
		return nil, errCode("not_in_channel")
	}
	return ch, nil
}

// imWithLocked is the bot's direct message conversation with a user, opened if there is none yet, as Slack does
// for chat.postMessage to a user id and for conversations.open; nil for an unknown or deleted user.
func (s *Server) imWithLocked(user string) *channel {
	if u, ok := s.users[user]; !ok || u.Deleted {
		return nil
	}
	for _, ch := range s.channels {
		if ch.isIM() && len(ch.members) == 1 && ch.members[0] == user {
			return ch
		}
	}
	id := "D" + strings.TrimPrefix(user, "U")
	for s.channels[id] != nil {
		id = randomID("D", 10)
	}
	ch := newChannel(id, []string{user})
	s.channels[id] = ch
	return ch
}

// conversationsOpen opens (or finds) the direct message with the one user named in users.
func (s *Server) conversationsOpen(c *call) (map[string]any, *apiError) {
	users := strings.Split(c.p.get("users"), ",")
	if c.p.get("users") == "" || len(users) != 1 {
		return nil, errCode("users_list_not_supplied")
	}
	ch := s.imWithLocked(users[0])
	if ch == nil {
		return nil, errCode("user_not_found")
	}
	return map[string]any{"channel": map[string]any{"id": ch.id, "is_im": true, "user": users[0]}}, nil
}

// thread puts a new message m in the thread of the message threadTS names, as every way of posting does; a
// threadTS that names no live message leaves m at the top of ch, with the threadTS it asked for kept aside.
func (ch *channel) thread(m *Message, threadTS string) {
	if root := threadRoot(ch, threadTS); root != "" {
		m.ThreadTS = root
	} else if threadTS != "" {
		m.RequestedThreadTS = threadTS
	}
}

// threadRoot resolves thread_ts to the thread's parent. Slack posts a reply whose parent is unknown or
// deleted to the channel instead, un-threaded, so this returns "" then.
func threadRoot(ch *channel, ts string) string {
	if ts == "" {
		return ""
	}
	parent := ch.byTS[ts]
	if parent == nil || parent.Deleted {
		return ""
	}
	if parent.ThreadTS != "" {
		return parent.ThreadTS
	}
	return parent.TS
}

func (s *Server) chatPostMessage(c *call) (map[string]any, *apiError) {
	ch, aerr := s.postableLocked(c.p.get("channel"), c.id.user)
	if aerr != nil {
		return nil, aerr
	}
	ct, aerr := readContent(c.p, true)
	if aerr != nil {
		return nil, aerr
	}
	m := s.addMessageLocked(ch, c.id, ct, c.p.get("thread_ts"))
	return map[string]any{"channel": ch.id, "ts": m.TS, "message": s.messageJSON(ch, m, true)}, nil
}

// addMessageLocked stores a new message and tells event subscribers about it.
func (s *Server) addMessageLocked(ch *channel, id identity, ct content, threadTS string) *Message {
	m := &Message{
		Channel:     ch.id,
		TS:          s.nextTSLocked(),
		User:        id.user,
		Text:        ct.text,
		Blocks:      ct.blocks,
		Metadata:    ct.metadata,
		UnfurlLinks: ct.unfurlLinks,
		UnfurlMedia: ct.unfurlMedia,
		PostedAt:    s.clock.Now(),
	}
	if id.kind == tokenBot {
		m.BotID = s.opts.BotID
	}
	ch.thread(m, threadTS)
	ch.add(m)
	s.notifyLocked()
	s.echoMessageEventLocked(ch, m)
	return m
}

func (s *Server) chatUpdate(c *call) (map[string]any, *apiError) {
	ch, m, aerr := s.ownMessageLocked(c, "cant_update_message")
	if aerr != nil {
		return nil, aerr
	}
	ct, aerr := readContent(c.p, true)
	if aerr != nil {
		return nil, aerr
	}
	s.updateMessageLocked(m, ct, c.id.user, c.p.has("blocks"))
	return map[string]any{"channel": ch.id, "ts": m.TS, "text": m.Text, "message": s.messageJSON(ch, m, true)}, nil
}

// ownMessageLocked finds the message that chat.update and chat.delete name (channel and ts) and refuses it with
// notYours unless the caller posted it: both methods answer the same errors, in the same order.
func (s *Server) ownMessageLocked(c *call, notYours string) (*channel, *Message, *apiError) {
	ch := s.channels[c.p.get("channel")]
	if ch == nil {
		return nil, nil, errCode("channel_not_found")
	}
	m := ch.byTS[c.p.get("ts")]
	if m == nil || m.Deleted {
		return nil, nil, errCode("message_not_found")
	}
	if m.User != c.id.user {
		return nil, nil, errCode(notYours)
	}
	return ch, m, nil
}

// updateMessageLocked keeps the current version as a revision and applies the new content. Blocks are
// replaced only when sent ("[]" clears them), as chat.update does.
func (s *Server) updateMessageLocked(m *Message, ct content, by string, blocksSent bool) {
	m.Revisions = append(m.Revisions, Revision{
		Text: m.Text, Blocks: m.Blocks, Metadata: m.Metadata, Replaced: s.clock.Now(), UpdatedBy: by,
	})
	if ct.hasText {
		m.Text = ct.text
	}
	if blocksSent {
		m.Blocks = ct.blocks
	}
	if ct.metadata != nil {
		m.Metadata = ct.metadata
	}
	s.notifyLocked()
}

func (s *Server) chatPostEphemeral(c *call) (map[string]any, *apiError) {
	ch, aerr := s.postableLocked(c.p.get("channel"), c.id.user)
	if aerr != nil {
		return nil, aerr
	}
	user := c.p.get("user")
	if _, ok := s.users[user]; !ok {
		return nil, errCode("user_not_found")
	}
	if !ch.isIM() && !ch.isMember(user) {
		return nil, errCode("user_not_in_channel")
	}
	ct, aerr := readContent(c.p, true)
	if aerr != nil {
		return nil, aerr
	}
	ts := s.nextTSLocked()
	s.ephemerals = append(s.ephemerals, Ephemeral{
		Channel: ch.id, User: user, TS: ts, ThreadTS: c.p.get("thread_ts"), Text: ct.text, Blocks: ct.blocks,
		Via: "chat.postEphemeral", At: s.clock.Now(),
	})
	s.notifyLocked()
	return map[string]any{"message_ts": ts}, nil
}

func (s *Server) chatDelete(c *call) (map[string]any, *apiError) {
	ch, m, aerr := s.ownMessageLocked(c, "cant_delete_message")
	if aerr != nil {
		return nil, aerr
	}
	m.Deleted = true
	s.notifyLocked()
	return map[string]any{"channel": ch.id, "ts": m.TS}, nil
}

// chatGetPermalink answers as Slack does: https://<team domain>.slack.com/archives/<channel>/p<ts without the dot>,
// with thread_ts and cid for a reply in a thread. A conversation the caller cannot read is channel_not_found; a
// deleted or unknown message is message_not_found.
func (s *Server) chatGetPermalink(c *call) (map[string]any, *apiError) {
	ch := s.channels[c.p.get("channel")]
	if ch == nil || (!ch.isIM() && !ch.isMember(c.id.user)) {
		return nil, errCode("channel_not_found")
	}
	m := ch.byTS[c.p.get("message_ts")]
	if m == nil || m.Deleted {
		return nil, errCode("message_not_found")
	}
	link := Permalink(s.opts.TeamDomain, ch.id, m.TS)
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		link += "?thread_ts=" + m.ThreadTS + "&cid=" + ch.id
	}
	return map[string]any{"channel": ch.id, "permalink": link}, nil
}

// Permalink is the link chat.getPermalink gives for a top-level message of a workspace.
func Permalink(teamDomain, channel, ts string) string {
	return "https://" + teamDomain + ".slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
}

// messageJSON renders a message as the Web API returns it.
func (s *Server) messageJSON(ch *channel, m *Message, withMetadata bool) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "team": s.opts.TeamID}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
		out["app_id"] = s.opts.AppID
	}
	if m.Subtype != "" {
		out["subtype"] = m.Subtype
	}
	if len(m.Blocks) > 0 {
		out["blocks"] = m.Blocks
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if replies := ch.replies(m.TS); m.ThreadTS == "" && len(replies) > 0 {
		out["thread_ts"] = m.TS
		out["reply_count"] = len(replies)
		out["latest_reply"] = replies[len(replies)-1].TS
	}
	if withMetadata && m.Metadata != nil {
		out["metadata"] = m.Metadata
	}
	if len(m.Revisions) > 0 {
		last := m.Revisions[len(m.Revisions)-1]
		out["edited"] = map[string]any{"user": last.UpdatedBy, "ts": m.TS}
	}
	if len(m.FileIDs) > 0 {
		files := make([]map[string]any, 0, len(m.FileIDs))
		for _, id := range m.FileIDs {
			if f := s.files[id]; f != nil {
				files = append(files, s.fileJSON(f))
			}
		}
		out["files"] = files
		out["upload"] = true
	}
	return out
}
