package fakeslack

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Errors returned by the methods that drive the fake.
var (
	// ErrNoConnection means no Socket Mode connection is open to deliver an envelope to.
	ErrNoConnection = errors.New("fakeslack: no socket mode connection open")
	// ErrAckTimeout means the envelope was not acked within the ack timeout; Slack counted it as failed.
	ErrAckTimeout = errors.New("fakeslack: envelope not acked in time")
	// ErrClosed means the server was closed.
	ErrClosed = errors.New("fakeslack: server closed")
	// ErrNotFound means a message, button, view or envelope named by the caller does not exist.
	ErrNotFound = errors.New("fakeslack: not found")
)

// Server is a fake Slack listening on 127.0.0.1. Create it with New and stop it with Close.
type Server struct {
	opts  Options
	clock clockwork.Clock
	http  *httptest.Server

	mu      sync.Mutex
	changed chan struct{}
	closed  bool
	quit    chan struct{}
	wg      sync.WaitGroup

	users      map[string]User
	groups     map[string][]string
	channels   map[string]*channel
	lastTS     int64
	buckets    map[string]*bucket
	apiCalls   []APICall
	ratelimits int
	// throttledUntil is when a Throttle ends; every Web API call is answered 429 before it.
	throttledUntil time.Time
	// faults are the injected faults still to answer, in the order injected.
	faults []*armedFault
	// callHooks are the armed CallHooks that have not fired yet, in the order armed.
	callHooks []*armedHook

	ephemerals []Ephemeral
	files      map[string]*fileRecord
	fileOrder  []string
	views      map[string]*View
	viewOrder  []string
	homes      map[string]*Home
	triggers   map[string]*trigger
	hooks      map[string]*responseHook

	tickets    map[string]time.Time
	conns      map[string]*sockConn
	connOrder  []string
	connSeq    int
	rr         int
	pending    map[string]*delivery
	deliveries []*delivery
	acks       []Ack
	timers     map[clockwork.Timer]struct{}
}

// New starts a fake Slack on 127.0.0.1 with a free port.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		opts:     opts,
		clock:    opts.Clock,
		changed:  make(chan struct{}),
		quit:     make(chan struct{}),
		users:    map[string]User{},
		groups:   map[string][]string{},
		channels: map[string]*channel{},
		buckets:  map[string]*bucket{},
		files:    map[string]*fileRecord{},
		views:    map[string]*View{},
		homes:    map[string]*Home{},
		triggers: map[string]*trigger{},
		hooks:    map[string]*responseHook{},
		tickets:  map[string]time.Time{},
		conns:    map[string]*sockConn{},
		pending:  map[string]*delivery{},
		timers:   map[clockwork.Timer]struct{}{},
	}
	s.users[opts.BotUserID] = User{ID: opts.BotUserID, Name: "hyperops", RealName: "HyperOps", IsBot: true}
	for _, u := range opts.Users {
		s.users[u.ID] = u
	}
	for id, members := range opts.UserGroups {
		s.groups[id] = slices.Clone(members)
	}
	for id, members := range opts.Channels {
		s.channels[id] = newChannel(id, members)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/link/", s.serveSocket)
	mux.HandleFunc("/upload/v1/", s.serveUpload)
	mux.HandleFunc("/hooks/response/", s.serveResponseURL)
	s.http = httptest.NewServer(mux)
	return s
}

// URL is the server's base URL, http://127.0.0.1:port.
func (s *Server) URL() string { return s.http.URL }

// APIURL is the Web API base URL to give slack.OptionAPIURL: http://127.0.0.1:port/api/.
func (s *Server) APIURL() string { return s.http.URL + "/api/" }

// Options returns the options in effect, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// Close closes every Socket Mode connection, stops timers and the HTTP server, and waits for its goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.quit)
	for t := range s.timers {
		t.Stop()
	}
	s.timers = nil
	conns := make([]*sockConn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	for _, d := range s.pending {
		d.finish(nil, ErrClosed)
	}
	s.pending = map[string]*delivery{}
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.http.CloseClientConnections()
	s.http.Close()
	s.wg.Wait()
}

// goOwnedLocked runs f in a goroutine that Close waits for; it reports false if the server is closed.
// The caller must hold s.mu.
func (s *Server) goOwnedLocked(f func()) bool {
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// afterLocked runs f after d on the server clock, unless the server closes first. The caller must hold s.mu.
func (s *Server) afterLocked(d time.Duration, f func()) clockwork.Timer {
	if s.closed {
		return nil
	}
	var t clockwork.Timer
	t = s.clock.AfterFunc(d, func() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		delete(s.timers, t)
		s.wg.Add(1)
		s.mu.Unlock()
		defer s.wg.Done()
		f()
	})
	s.timers[t] = struct{}{}
	return t
}

func (s *Server) stopTimerLocked(t clockwork.Timer) {
	if t == nil {
		return
	}
	t.Stop()
	delete(s.timers, t)
}

// notifyLocked wakes every WaitFor. The caller must hold s.mu.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextTSLocked returns a Slack message timestamp, strictly increasing.
func (s *Server) nextTSLocked() string {
	us := s.clock.Now().UnixMicro()
	if us <= s.lastTS {
		us = s.lastTS + 1
	}
	s.lastTS = us
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func randomID(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for range n {
		i, _ := rand.Int(rand.Reader, big.NewInt(int64(len(idAlphabet))))
		b.WriteByte(idAlphabet[i.Int64()])
	}
	return b.String()
}

func randomHex(n int) string {
	buf := make([]byte, (n+1)/2)
	_, _ = rand.Read(buf)
	return fmt.Sprintf("%x", buf)[:n]
}

func newEnvelopeID() string {
	h := randomHex(32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// params reads a Web API request's arguments from a form, a query string or a JSON body.
type params struct {
	form url.Values
	json map[string]json.RawMessage
}

func readParams(r *http.Request) (params, error) {
	p := params{form: url.Values{}}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") {
		body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
		if err != nil {
			return p, fmt.Errorf("reading body: %w", err)
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &p.json); err != nil {
				return p, fmt.Errorf("decoding JSON body: %w", err)
			}
		}
		p.form = r.URL.Query()
		return p, nil
	}
	if err := r.ParseForm(); err != nil {
		return p, fmt.Errorf("parsing form: %w", err)
	}
	p.form = r.Form
	return p, nil
}

// get returns a string argument; a JSON object or array argument comes back as its JSON text.
func (p params) get(key string) string {
	if v, ok := p.form[key]; ok && len(v) > 0 {
		return v[0]
	}
	raw, ok := p.json[key]
	if !ok {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

func (p params) has(key string) bool {
	if _, ok := p.form[key]; ok {
		return true
	}
	_, ok := p.json[key]
	return ok
}

// boolArg reads a Slack boolean argument: true/1 or false/0; absent is nil.
func (p params) boolArg(key string) *bool {
	if !p.has(key) {
		return nil
	}
	v, err := strconv.ParseBool(p.get(key))
	if err != nil {
		return nil
	}
	return &v
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is a Slack error answer: {"ok":false,"error":code} and, for validation errors, the problems.
type apiError struct {
	code     string
	messages []string
}

func (e *apiError) Error() string { return e.code }

func errCode(code string, messages ...string) *apiError {
	return &apiError{code: code, messages: messages}
}

func (e *apiError) body() map[string]any {
	b := map[string]any{"ok": false, "error": e.code}
	if len(e.messages) > 0 {
		msgs := make([]string, len(e.messages))
		for i, m := range e.messages {
			msgs[i] = "[ERROR] " + m
		}
		b["errors"] = e.messages
		b["response_metadata"] = map[string]any{"messages": msgs}
	}
	return b
}
