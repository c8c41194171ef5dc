package fakeslack

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

type tokenKind string

const (
	tokenBot  tokenKind = "bot"
	tokenApp  tokenKind = "app"
	tokenUser tokenKind = "user"
	tokenNone tokenKind = "none"
)

// identity is who a token speaks for.
type identity struct {
	kind tokenKind
	user string // the bot user for a bot token, the user for a user token
}

// call is one Web API request being served; handlers run with s.mu held.
type call struct {
	s   *Server
	p   params
	id  identity
	req *http.Request
}

type handler func(c *call) (map[string]any, *apiError)

type method struct {
	tier    tierName
	allowed []tokenKind
	handle  handler
}

var (
	botOrUser = []tokenKind{tokenBot, tokenUser}
	botOnly   = []tokenKind{tokenBot}
	appOnly   = []tokenKind{tokenApp}
)

func (s *Server) methods() map[string]method {
	return map[string]method{
		"auth.test":                    {tier4, botOrUser, s.authTest},
		"apps.connections.open":        {tier1, appOnly, s.appsConnectionsOpen},
		"chat.postMessage":             {tierPostMessage, botOrUser, s.chatPostMessage},
		"chat.update":                  {tier3, botOrUser, s.chatUpdate},
		"chat.postEphemeral":           {tier4, botOrUser, s.chatPostEphemeral},
		"chat.delete":                  {tier3, botOrUser, s.chatDelete},
		"chat.getPermalink":            {tier4, botOrUser, s.chatGetPermalink},
		"views.open":                   {tier4, botOnly, s.viewsOpen},
		"views.publish":                {tier4, botOnly, s.viewsPublish},
		"conversations.members":        {tier4, botOrUser, s.conversationsMembers},
		"conversations.info":           {tier3, botOrUser, s.conversationsInfo},
		"conversations.history":        {tier3, botOrUser, s.conversationsHistory},
		"conversations.replies":        {tier3, botOrUser, s.conversationsReplies},
		"conversations.open":           {tier3, botOrUser, s.conversationsOpen},
		"usergroups.users.list":        {tier2, botOrUser, s.usergroupsUsersList},
		"users.info":                   {tier4, botOrUser, s.usersInfo},
		"files.getUploadURLExternal":   {tier4, botOrUser, s.filesGetUploadURLExternal},
		"files.completeUploadExternal": {tier4, botOrUser, s.filesCompleteUploadExternal},
	}
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/api/")
	m, ok := s.methods()[name]
	if !ok {
		s.answer(w, name, tokenNone, http.StatusOK, errCode("unknown_method").body())
		return
	}
	p, err := readParams(r)
	if err != nil {
		s.answer(w, name, tokenNone, http.StatusOK, errCode("invalid_form_data").body())
		return
	}
	tok := p.get("token")
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		tok = strings.TrimPrefix(h, "Bearer ")
	}
	id, aerr := s.identify(tok, m.allowed)
	if aerr != nil {
		s.answer(w, name, id.kind, http.StatusOK, aerr.body())
		return
	}
	c := &call{s: s, p: p, id: id, req: r}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	wait, limited := s.throttleLocked()
	if !limited {
		wait, limited = s.rateLimitLocked(name, m.tier, p)
	}
	if limited {
		s.ratelimits++
		s.recordCallLocked(name, id.kind, http.StatusTooManyRequests, "ratelimited")
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		writeJSON(w, http.StatusTooManyRequests, errCode("ratelimited").body())
		return
	}
	s.runHooksLocked(name, id, p)
	f := s.faultLocked(name, p)
	if f != nil && !f.After && !f.onlyDelay() {
		s.recordCallLocked(name, id.kind, f.status(), f.code())
		s.mu.Unlock()
		s.answerFault(w, f)
		return
	}
	body, aerr := m.handle(c)
	code := ""
	if aerr != nil {
		body, code = aerr.body(), aerr.code
	} else {
		body["ok"] = true
	}
	if f != nil && !f.onlyDelay() {
		s.recordCallLocked(name, id.kind, f.status(), f.code())
		s.mu.Unlock()
		s.answerFault(w, f)
		return
	}
	s.recordCallLocked(name, id.kind, http.StatusOK, code)
	s.mu.Unlock()
	if f != nil {
		s.hold(f.Delay)
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) answer(w http.ResponseWriter, name string, kind tokenKind, status int, body map[string]any) {
	s.mu.Lock()
	code, _ := body["error"].(string)
	s.recordCallLocked(name, kind, status, code)
	s.mu.Unlock()
	writeJSON(w, status, body)
}

func (s *Server) recordCallLocked(name string, kind tokenKind, status int, code string) {
	s.apiCalls = append(s.apiCalls, APICall{Method: name, At: s.clock.Now(), Status: status, Error: code, TokenType: string(kind)})
	s.notifyLocked()
}

// identify maps a token to who it speaks for and checks the method accepts its type, answering as Slack does.
func (s *Server) identify(tok string, allowed []tokenKind) (identity, *apiError) {
	var id identity
	switch {
	case tok == "":
		return identity{kind: tokenNone}, errCode("not_authed")
	case tok == s.opts.BotToken:
		id = identity{kind: tokenBot, user: s.opts.BotUserID}
	case tok == s.opts.AppToken:
		id = identity{kind: tokenApp}
	case s.opts.UserTokens[tok] != "":
		id = identity{kind: tokenUser, user: s.opts.UserTokens[tok]}
	default:
		return identity{kind: tokenNone}, errCode("invalid_auth")
	}
	if !slices.Contains(allowed, id.kind) {
		return id, errCode("not_allowed_token_type")
	}
	return id, nil
}

// rateLimitLocked spends a token from the method's bucket (per channel for chat.postMessage) and says how
// long to wait when there is none.
func (s *Server) rateLimitLocked(name string, tn tierName, p params) (time.Duration, bool) {
	rl := *s.opts.RateLimits
	tier, ok := rl.tier(tn)
	if rl.Disabled || !ok {
		return 0, false
	}
	key := name
	if tn == tierPostMessage {
		key += "/" + p.get("channel")
	}
	b := s.buckets[key]
	if b == nil {
		b = &bucket{}
		s.buckets[key] = b
	}
	allowed, wait := b.take(s.clock.Now(), tier, s.opts.scaled(time.Minute))
	return wait, !allowed
}
