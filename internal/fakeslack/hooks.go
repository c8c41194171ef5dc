package fakeslack

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Response URL limits: Slack accepts five posts within thirty minutes.
const (
	responseURLUses = 5
	responseURLTTL  = 30 * time.Minute
)

// responseHook is a response_url handed out with a slash command or an interaction.
type responseHook struct {
	channel   string
	user      string
	messageTS string // the message the interaction came from; empty for slash commands
	issued    time.Time
	uses      int
}

func (s *Server) newResponseURLLocked(channel, user, messageTS string) string {
	id := randomID("", 13)
	secret := randomHex(24)
	s.hooks[id+"/"+secret] = &responseHook{channel: channel, user: user, messageTS: messageTS, issued: s.clock.Now()}
	return s.http.URL + "/hooks/response/" + s.opts.TeamID + "/" + id + "/" + secret
}

// hookBody is what a response_url accepts.
type hookBody struct {
	Text            string          `json:"text"`
	Blocks          json.RawMessage `json:"blocks"`
	ResponseType    string          `json:"response_type"`
	ReplaceOriginal bool            `json:"replace_original"`
	DeleteOriginal  bool            `json:"delete_original"`
	ThreadTS        string          `json:"thread_ts"`
	Metadata        json.RawMessage `json:"metadata"`
}

func (s *Server) serveResponseURL(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/hooks/response/"), "/")
	var body hookBody
	raw, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(parts) != 3 || parts[0] != s.opts.TeamID {
		writeJSON(w, http.StatusNotFound, errCode("invalid_url").body())
		return
	}
	h := s.hooks[parts[1]+"/"+parts[2]]
	switch {
	case h == nil:
		writeJSON(w, http.StatusNotFound, errCode("invalid_url").body())
		return
	case s.clock.Since(h.issued) > s.opts.scaled(responseURLTTL):
		writeJSON(w, http.StatusNotFound, errCode("expired_url").body())
		return
	case h.uses >= responseURLUses:
		writeJSON(w, http.StatusNotFound, errCode("used_url").body())
		return
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errCode("invalid_payload").body())
		return
	}
	if aerr := s.applyHookLocked(h, body); aerr != nil {
		writeJSON(w, http.StatusOK, aerr.body())
		return
	}
	h.uses++
	s.notifyLocked()
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// applyHookLocked carries out a response_url post: replace or delete the original message, post in the
// channel, or show an ephemeral message to the user (the default).
func (s *Server) applyHookLocked(h *responseHook, body hookBody) *apiError {
	ct := content{text: body.Text, hasText: body.Text != ""}
	if utf8.RuneCountInString(body.Text) > maxMessageText {
		return errCode("msg_too_long") // a response_url takes the message limits chat.postMessage does
	}
	if len(body.Blocks) > 0 && string(body.Blocks) != "null" {
		if code, problems := validateBlocks(string(body.Blocks), surfaceMessage, "/blocks"); code != "" {
			return errCode(code, problems...)
		}
		ct.blocks, ct.hasBlocks = body.Blocks, true
	}
	if len(body.Metadata) > 0 && string(body.Metadata) != "null" {
		var md Metadata
		if json.Unmarshal(body.Metadata, &md) == nil && md.EventType != "" {
			ct.metadata = &md
		}
	}
	ch := s.channels[h.channel]
	bot := identity{kind: tokenBot, user: s.opts.BotUserID}
	var original *Message
	if ch != nil && h.messageTS != "" {
		original = ch.byTS[h.messageTS]
	}
	switch {
	case body.DeleteOriginal && original != nil:
		original.Deleted = true
	case body.ReplaceOriginal && original != nil:
		// Unlike chat.update, replace_original replaces the whole message: blocks not sent are gone.
		ct.hasText = true
		s.updateMessageLocked(original, ct, s.opts.BotUserID, true)
	case !ct.hasText && !ct.hasBlocks:
		return errCode("no_text")
	case body.ResponseType == "in_channel" && ch != nil:
		s.addMessageLocked(ch, bot, ct, body.ThreadTS)
	default:
		s.ephemerals = append(s.ephemerals, Ephemeral{
			Channel: h.channel, User: h.user, TS: s.nextTSLocked(), ThreadTS: body.ThreadTS, Text: ct.text,
			Blocks: ct.blocks, Via: "response_url", At: s.clock.Now(),
		})
	}
	return nil
}
