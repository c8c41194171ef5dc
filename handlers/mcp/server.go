package mcp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Path is where the MCP endpoint is served.
const Path = "/mcp"

// Engine is the part of the engine the MCP server drives.
type Engine interface {
	Submit(ctx context.Context, req ops.Request) (*ops.Record, error)
	Get(ctx context.Context, id string) (*ops.Record, error)
	List(ctx context.Context, q engine.ListQuery) ([]*ops.Record, error)
	// Revert asks for a new request, as ask's initiator, that puts back what the succeeded request id replaced.
	Revert(ctx context.Context, id string, ask ops.Request) (*ops.Record, error)
}

// Whereabouts tells where a request waits for people. The Slack side implements it from the messages it posted.
type Whereabouts interface {
	Where(ctx context.Context, rec *ops.Record) (*Waiting, error)
}

// Waiting is where a request waits for approval: the channel, the approval message and who may approve.
type Waiting struct {
	Channel string `json:"channel"`
	// Permalink is the link to the plan message with the Approve and Deny buttons ("" until it is posted).
	Permalink string `json:"permalink,omitempty"`
	// ApproverGroup is the configured approver group; Approvers its Slack users and user groups.
	ApproverGroup string     `json:"approverGroup,omitempty"`
	Approvers     []string   `json:"approvers,omitempty"`
	Until         *time.Time `json:"until,omitempty"`
}

// Options wire a Server.
type Options struct {
	Agents  []Agent
	Catalog *ops.Catalog
	Engine  Engine
	// Where tells where requests wait for approval (optional).
	Where   Whereabouts
	Bounds  Bounds
	Targets Targets
	// OnCall is told about every tool call: the tool and the code of its first error, or "OK" (metrics).
	OnCall func(tool, code string)
	// OnLimit is told about every refusal over a limit, by its configuration key (metrics).
	OnLimit func(configKey string)
	// Limits bound the sessions and waits of each agent (zero fields: the config defaults).
	Limits Limits
	// Changes wakes wait_request and the resource subscriptions when a request changes on any replica (engine.Feed);
	// they read the request then, never on a timer. Required.
	Changes Changes
	// Version is reported to clients as the server's version.
	Version string
	// Logger gets the SDK's log (default: discarded).
	Logger *slog.Logger
}

// Server is the MCP server of every registered agent: each agent sees its own tools.
type Server struct {
	opts   Options
	limits Limits
	steps  agentapi.Steps
	agents []*agentServer
	http   http.Handler
}

// agentServer is one agent's MCP server: its tools, its resources and its subscriptions.
type agentServer struct {
	s        *Server
	agent    Agent
	srv      *mcp.Server
	subs     *subscriptions
	sessions sessionSlots
}

// New builds the server; it serves nothing until its Handler is mounted.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.OnCall == nil {
		opts.OnCall = func(string, string) {}
	}
	if opts.OnLimit == nil {
		opts.OnLimit = func(string) {}
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, limits: opts.Limits.withDefaults(), steps: agentapi.NewSteps(opts.Catalog.Specs())}
	for _, a := range opts.Agents {
		s.agents = append(s.agents, s.newAgentServer(a))
	}
	streamable := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if as, ok := r.Context().Value(agentKey{}).(*agentServer); ok {
			return as.srv
		}
		return nil
	}, &mcp.StreamableHTTPOptions{Logger: opts.Logger, SessionTimeout: s.limits.SessionIdle})
	mux := http.NewServeMux()
	mux.Handle(Path, s.authenticate(streamable))
	s.http = mux
	return s
}

// Handler serves /mcp.
func (s *Server) Handler() http.Handler { return s.http }

// Changes tells of stored changes of requests (engine.Feed implements it).
type Changes interface {
	// Watch returns a channel that receives after each change of request id, and after the feed may have missed
	// some; stop ends the watch.
	Watch(id string) (changed <-chan struct{}, stop func())
	// Listen calls fn with the id of each changed request, and with "" when any may have changed; fn must not block.
	Listen(fn func(id string)) (stop func())
}

// Run tells subscribed clients about changes of their requests until ctx ends. It wakes on the feed: the requests
// that changed are read once each, whichever agents subscribed to them; nothing is read while nothing changes.
func (s *Server) Run(ctx context.Context) {
	var (
		mu      sync.Mutex
		changed = map[string]bool{}
		all     bool
		wake    = make(chan struct{}, 1)
	)
	stop := s.opts.Changes.Listen(func(id string) {
		mu.Lock()
		if id == "" {
			all = true
		} else {
			changed[id] = true
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		mu.Lock()
		ids, everything := changed, all
		changed, all = map[string]bool{}, false
		mu.Unlock()
		for _, a := range s.agents {
			a.tellSubscribers(ctx, func(id string) bool { return everything || ids[id] })
		}
	}
}

// Close ends every open MCP session, so nothing of them outlives the server.
func (s *Server) Close() {
	for _, a := range s.agents {
		for ss := range a.srv.Sessions() {
			_ = ss.Close()
		}
	}
}

type agentKey struct{}

// authenticate admits a request only with the bearer token of a registered agent. Anything else is 401 with
// WWW-Authenticate and nothing else: no engine call, nothing recorded. The SDK's bearer middleware then binds
// each MCP session to its agent, so one agent's session id is of no use with another agent's token. A request that
// opens a session is admitted only under the agent's Limits.SessionsPerAgent.
func (s *Server) authenticate(next http.Handler) http.Handler {
	bound := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		as, _ := ctx.Value(agentKey{}).(*agentServer)
		if as == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: as.agent.Initiator.ID}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			unauthorized(w, `Bearer realm="hyperops"`)
			return
		}
		as := match(s.agents, token)
		if as == nil {
			unauthorized(w, `Bearer realm="hyperops", error="invalid_token", error_description="unknown token"`)
			return
		}
		if r.Method == http.MethodPost && r.Header.Get(sessionIDHeader) == "" {
			aw, held, ok := as.openSession(w)
			if !ok {
				as.refuseSession(w, r, held)
				return
			}
			defer aw.release()
			w = aw
		}
		bound.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), agentKey{}, as)))
	})
}

// sessionIDHeader names an open session; a POST without it opens one.
const sessionIDHeader = "Mcp-Session-Id"

// Sessions is how many MCP sessions are open, over all agents.
func (s *Server) Sessions() int {
	n := 0
	for _, a := range s.agents {
		n += a.liveSessions()
	}
	return n
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

// unauthorized answers 401 and closes the connection: a client without a valid token has nothing to keep it open
// for, and a kept-alive connection per refused caller would pile up.
func unauthorized(w http.ResponseWriter, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Connection", "close")
	http.Error(w, "unauthorized: send Authorization: Bearer <the agent's HyperOps MCP token>", http.StatusUnauthorized)
}
