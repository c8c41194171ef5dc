package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Limits bound what one agent holds on this replica, so a client that leaks sessions or waits, or a stolen token,
// cannot grow the server's memory or its reads of Redis.
type Limits struct {
	// SessionsPerAgent caps live MCP sessions (mcp.maxSessionsPerAgent).
	SessionsPerAgent int
	// WaitsPerAgent caps wait_request calls in flight plus resource subscriptions (mcp.maxWaitsPerAgent).
	WaitsPerAgent int
	// SessionIdle ends a session with no request for this long (mcp.sessionIdleTimeout).
	SessionIdle time.Duration
}

// LimitsFrom reads the limits from the configuration (defaults applied).
func LimitsFrom(cfg *config.Config) Limits {
	return Limits{SessionsPerAgent: cfg.MCP.MaxSessionsPerAgent, WaitsPerAgent: cfg.MCP.MaxWaitsPerAgent,
		SessionIdle: cfg.MCP.SessionIdleTimeout.Std()}
}

func (l Limits) withDefaults() Limits {
	if l.SessionsPerAgent <= 0 {
		l.SessionsPerAgent = config.DefaultMCPSessions
	}
	if l.WaitsPerAgent <= 0 {
		l.WaitsPerAgent = config.DefaultMCPWaits
	}
	if l.SessionIdle <= 0 {
		l.SessionIdle = config.DefaultMCPSessionIdle.Std()
	}
	return l
}

// CodeLimit is the JSON-RPC error code of a refusal over one of the Limits (a server error in the range the
// JSON-RPC spec leaves to implementations).
const CodeLimit = -32029

// LimitData is the data of a CodeLimit error: which limit, its configuration key, and how much is held.
type LimitData struct {
	Limit     string `json:"limit"`
	ConfigKey string `json:"configKey"`
	Max       int    `json:"max"`
	Held      int    `json:"held"`
	Next      string `json:"next"`
}

// sessionSlots counts the sessions of one agent: the initialized ones, and those being opened (a request without
// Mcp-Session-Id in flight), so concurrent initializes cannot pass the cap together. A session the SDK opened for
// a request that was not an initialize (a client probing the protocol) never initializes and is not counted.
type sessionSlots struct {
	mu      sync.Mutex
	opening int
}

// openSession admits a request that opens a session while the agent holds fewer than the cap. The admission ends
// when the answer starts (the session, if it initialized, counts from then on) or when the request ends.
func (a *agentServer) openSession(w http.ResponseWriter) (out *admitted, held int, ok bool) {
	a.sessions.mu.Lock()
	defer a.sessions.mu.Unlock()
	held = a.sessions.opening + a.liveSessions()
	if held >= a.s.limits.SessionsPerAgent {
		return nil, held, false
	}
	a.sessions.opening++
	var once sync.Once
	return &admitted{ResponseWriter: w, release: func() {
		once.Do(func() {
			a.sessions.mu.Lock()
			a.sessions.opening--
			a.sessions.mu.Unlock()
		})
	}}, held, true
}

// admitted releases a session admission as its answer starts: by then an initialize has initialized its session,
// and a client that reads the answer and initializes again is not counted twice.
type admitted struct {
	http.ResponseWriter
	release func()
}

func (w *admitted) WriteHeader(code int) {
	w.release()
	w.ResponseWriter.WriteHeader(code)
}

func (w *admitted) Write(b []byte) (int, error) {
	w.release()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the event stream.
func (w *admitted) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// liveSessions is how many initialized sessions the agent has open.
func (a *agentServer) liveSessions() int {
	n := 0
	for ss := range a.srv.Sessions() {
		if ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// refuseSession answers an initialize over the cap with a JSON-RPC error naming the limit, its configuration key
// and the next step, so the SDK clients show it (they hide the body of a 429). A body that is not one request
// gets a plain HTTP 429 with the same text.
func (a *agentServer) refuseSession(w http.ResponseWriter, r *http.Request, held int) {
	a.s.opts.OnLimit("mcp.maxSessionsPerAgent")
	max := a.s.limits.SessionsPerAgent
	data := LimitData{Limit: "sessions per agent", ConfigKey: "mcp.maxSessionsPerAgent", Max: max, Held: held,
		Next: fmt.Sprintf("reuse an open session (its Mcp-Session-Id), close the ones you no longer use (HTTP DELETE, "+
			"or they end after mcp.sessionIdleTimeout %s idle), or ask the platform team to raise mcp.maxSessionsPerAgent",
			a.s.limits.SessionIdle)}
	msg := fmt.Sprintf("agent %s already has %d live MCP sessions on this replica, the most mcp.maxSessionsPerAgent allows (%d): %s",
		a.agent.Name(), held, max, data.Next)
	body, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRefusedBody))
	msgIn, err := jsonrpc.DecodeMessage(body)
	req, isCall := msgIn.(*jsonrpc.Request)
	if err != nil || !isCall || !req.IsCall() {
		w.Header().Set("Connection", "close")
		http.Error(w, msg, http.StatusTooManyRequests)
		return
	}
	raw, _ := json.Marshal(data)
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: CodeLimit, Message: msg, Data: raw}})
	if err != nil {
		http.Error(w, msg, http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// maxRefusedBody is how much of a refused initialize is read to find its JSON-RPC id.
const maxRefusedBody = 64 << 10

// holdWait takes one of the agent's waits for a wait_request; release gives it back.
func (a *agentServer) holdWait() (release func(), err error) {
	a.pruneClosed() // a closed session's subscriptions count no more
	a.subs.mu.Lock()
	defer a.subs.mu.Unlock()
	if err := a.subs.roomLocked(a); err != nil {
		return nil, err
	}
	a.subs.waiting++
	return func() {
		a.subs.mu.Lock()
		a.subs.waiting--
		a.subs.mu.Unlock()
	}, nil
}

// roomLocked refuses one more wait or subscription over the agent's cap.
func (s *subscriptions) roomLocked(a *agentServer) error {
	max := a.s.limits.WaitsPerAgent
	if held := s.heldLocked(); held >= max {
		a.s.opts.OnLimit("mcp.maxWaitsPerAgent")
		return ops.Errorf(ops.CodeBusy, "", fmt.Sprintf("let one of your waits end or unsubscribe a request you no longer follow, "+
			"read the request with %s instead, or ask the platform team to raise mcp.maxWaitsPerAgent", ToolGetRequest),
			"agent %s already follows %d requests on this replica (%d wait_request calls in flight, %d subscriptions), "+
				"the most mcp.maxWaitsPerAgent allows (%d)", a.agent.Name(), held, s.waiting, held-s.waiting, max)
	}
	return nil
}
