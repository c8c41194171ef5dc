package fakeslack

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fault is an application-level failure Slack answers instead of (or after) serving a Web API call: an error
// answered with ok:false, an HTTP error, a dropped connection, a slow answer. Inject it; the first fault that
// matches a call is used, in the order injected.
type Fault struct {
	Method  string // Web API method, e.g. "chat.postMessage", "chat.update"
	Channel string // only calls for this channel ("" = any)
	// Reply matches only thread replies (calls with a thread_ts), so a fault on a request's thread spares its
	// top-level message.
	Reply bool
	// WithBlocks matches only calls that carry blocks, the way Slack refuses a message for its content
	// (invalid_blocks) and takes its plain-text version.
	WithBlocks bool
	// Error is the Slack error answered with ok:false ("channel_not_found", "not_in_channel", "is_archived",
	// "invalid_blocks", "msg_too_long", …); "" with Status for an HTTP error.
	Error      string
	Status     int           // HTTP status (500, 503, 429 with RetryAfter); 0 is 200
	RetryAfter time.Duration // Retry-After of a 429, rounded up to whole seconds as Slack sends it
	After      bool          // perform the call (the message IS posted), then answer the fault
	Reset      bool          // drop the connection instead of answering
	Delay      time.Duration // hold the answer this long (on the server's clock)
	Times      int           // how many matching calls; negative: until ClearFaults; 0 counts as 1
}

// armedFault is an injected fault and how many calls it answered.
type armedFault struct {
	Fault
	hits int
}

// Inject adds a fault for the Web API calls it matches. It returns a function that says how many calls the
// fault answered so far, so a test can tell that it fired.
func (s *Server) Inject(f Fault) (hits func() int) {
	if f.Times == 0 {
		f.Times = 1
	}
	a := &armedFault{Fault: f}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, a)
	return func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return a.hits
	}
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// ArchiveChannel archives a conversation: posting in it is answered is_archived from then on, as Slack does.
func (s *Server) ArchiveChannel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.archiveLocked(id)
}

// RemoveMember takes user (the bot's user, typically) out of a channel: its posts there are answered
// not_in_channel from then on.
func (s *Server) RemoveMember(channel, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeMemberLocked(channel, user)
}

func (s *Server) archiveLocked(id string) {
	if ch := s.channels[id]; ch != nil {
		ch.archived = true
	}
}

func (s *Server) removeMemberLocked(channel, user string) {
	if ch := s.channels[channel]; ch != nil {
		ch.members = slices.DeleteFunc(ch.members, func(m string) bool { return m == user })
	}
}

// Call is a Web API call as the fake received it, before serving it: what a CallHook matches on.
type Call struct {
	Method string
	// By is the user the call's token speaks for: the bot user for the bot token, "" for the app token.
	By       string
	Channel  string // the channel argument ("" when the call has none)
	ThreadTS string // thread_ts: set for a thread reply
	TS       string // ts: the message a chat.update or chat.delete is for
	Text     string
	// Blocks is the blocks argument as sent (JSON text), "" when the call carries none.
	Blocks string
	// Metadata is the message metadata the call carries, nil when it carries none (or none Slack would take).
	Metadata *Metadata
}

// CallHook changes the fake right before it serves the first Web API call that Match accepts, as part of serving
// that call: the call, and every call served after it, meet what Do changed, and no other call is served in
// between. It is how a test makes Slack change under the bot at an exact point of what the bot tells (archive a
// channel just before the first reply that tells an approval), however late or early the bot gets there.
//
// Only calls Slack would serve are offered to Match: one answered 429 by a rate limit or a Throttle is not (its
// retry is). Hooks are checked before injected faults, so an injected fault on the same call still answers it.
type CallHook struct {
	// Match says whether the call is the one. It runs with the fake locked: it must not call the Server.
	Match func(Call) bool
	// Do makes the change, through what Change offers (the fake is locked meanwhile).
	Do func(Change)
}

// Change is what a CallHook may change of the fake while the call it fired on waits to be served.
type Change struct{ s *Server }

// ArchiveChannel is Server.ArchiveChannel, from inside a hook.
func (c Change) ArchiveChannel(id string) { c.s.archiveLocked(id) }

// RemoveMember is Server.RemoveMember, from inside a hook.
func (c Change) RemoveMember(channel, user string) { c.s.removeMemberLocked(channel, user) }

// armedHook is a CallHook waiting for its call.
type armedHook struct {
	CallHook
	fired int
}

// OnCall arms h: it fires once, on the first Web API call it matches. It returns a function that says whether
// it fired yet (0 or 1), so a test can tell the change was made and when it cannot have been.
func (s *Server) OnCall(h CallHook) (fired func() int) {
	a := &armedHook{CallHook: h}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callHooks = append(s.callHooks, a)
	return func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return a.fired
	}
}

// runHooksLocked fires the hooks that match a call about to be served, in the order they were armed.
func (s *Server) runHooksLocked(method string, id identity, p params) {
	if len(s.callHooks) == 0 {
		return
	}
	c := Call{Method: method, By: id.user, Channel: p.get("channel"), ThreadTS: p.get("thread_ts"), TS: p.get("ts"),
		Text: p.get("text"), Blocks: p.get("blocks")}
	if raw := p.get("metadata"); raw != "" {
		c.Metadata, _ = readMetadata(raw)
	}
	kept := s.callHooks[:0]
	var fire []*armedHook
	for _, h := range s.callHooks {
		if h.Match(c) {
			fire = append(fire, h)
			continue
		}
		kept = append(kept, h)
	}
	clear(s.callHooks[len(kept):])
	s.callHooks = kept
	for _, h := range fire {
		h.fired++
		h.Do(Change{s: s})
	}
	if len(fire) > 0 {
		s.notifyLocked()
	}
}

// faultLocked takes the first fault matching a call, spending one of its times.
func (s *Server) faultLocked(method string, p params) *Fault {
	for i, f := range s.faults {
		if !f.matches(method, p) {
			continue
		}
		f.hits++
		hit := f.Fault
		if f.Times > 0 {
			if f.Times--; f.Times == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return &hit
	}
	return nil
}

func (f *Fault) matches(method string, p params) bool {
	return f.Method == method && (f.Channel == "" || f.Channel == p.get("channel")) &&
		(!f.Reply || p.get("thread_ts") != "") && (!f.WithBlocks || p.get("blocks") != "")
}

// status is the HTTP status a fault answers with.
func (f *Fault) status() int {
	if f.Reset {
		return 0
	}
	if f.Status != 0 {
		return f.Status
	}
	return http.StatusOK
}

// code is the Slack error a fault answers with, for the call log and the body.
func (f *Fault) code() string {
	switch {
	case f.Error != "":
		return f.Error
	case f.Reset:
		return "connection_reset"
	case f.Status == http.StatusTooManyRequests:
		return "ratelimited"
	case f.Status >= 500:
		return "internal_error"
	}
	return ""
}

// answerFault waits out the fault's delay and answers it: the connection dropped, or the error. The call was
// recorded by the caller.
func (s *Server) answerFault(w http.ResponseWriter, f *Fault) {
	s.hold(f.Delay)
	if f.Reset {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	if f.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(f.RetryAfter)))
	}
	status := f.status()
	if status != http.StatusOK && f.Error == "" && f.Status != http.StatusTooManyRequests {
		// Slack's 5xx answers are HTML or plain text, not JSON.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(strings.ToLower(http.StatusText(status)) + "\n"))
		return
	}
	writeJSON(w, status, errCode(f.code()).body())
}

// onlyDelay reports whether the fault only slows the call down: it is served and answered as usual, late.
func (f *Fault) onlyDelay() bool {
	return f.Error == "" && f.Status == 0 && !f.Reset
}

// hold waits d on the server's clock, or until the server closes.
func (s *Server) hold(d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-s.clock.After(d):
	case <-s.quit:
	}
}
