package bot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// startMCP serves the MCP endpoint on its own listener (Options.MCPListener, else mcp.listen; off when both are
// empty) until ctx ends. The returned function stops it and waits for it.
func (b *Bot) startMCP(ctx context.Context) (stop func(), err error) {
	cfg := b.opts.Config
	ln := b.opts.MCPListener
	if ln == nil && cfg.MCP.Listen == "" {
		return func() {}, nil
	}
	agents, err := hmcp.AgentsFrom(cfg)
	if err != nil {
		return nil, err
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.MCP.Listen); err != nil {
			return nil, fmt.Errorf("listen on mcp.listen %s: %w", cfg.MCP.Listen, err)
		}
	}
	if len(agents) == 0 {
		b.opts.Log.Warn().Msg("mcp.listen is set but no agent has mcp.tokenSHA256: every MCP call is refused 401")
	}
	// The feed wakes the agents' waits and subscriptions when a request changes on any replica: one Redis
	// subscription per replica, whatever the number of waits.
	feed := engine.NewFeed(b.store, func(err error) {
		b.opts.Log.Warn().Err(err).Msg("following request changes for MCP waits: following again in a second; waits read their requests then")
	})
	srv := hmcp.New(hmcp.Options{Agents: agents, Catalog: b.opts.Catalog, Engine: b.engine, Where: b.whereabouts(),
		Bounds: hmcp.BoundsFrom(cfg, b.opts.Catalog.Specs()), Targets: hmcp.TargetsFrom(cfg), Limits: hmcp.LimitsFrom(cfg),
		OnCall:  func(tool, code string) { b.metrics.MCPCalls.WithLabelValues(tool, code).Inc() },
		OnLimit: func(key string) { b.metrics.MCPLimited.WithLabelValues(key).Inc() },
		Changes: feed})
	serving := &mcpServing{srv: srv}
	b.mcp.Store(serving)
	// ReadTimeout bounds reading a request (headers and body) and not the answer: net/http lifts the deadline once
	// the body is read, so a wait_request or an event stream may take longer. IdleTimeout closes kept-alive
	// connections that send nothing more.
	hs := &http.Server{Handler: srv.Handler(), ReadTimeout: cfg.MCP.ReadTimeout.Std(), IdleTimeout: cfg.MCP.IdleTimeout.Std(),
		ConnState: serving.track}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		feed.Run(sctx)
	}()
	go func() {
		defer wg.Done()
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.opts.Log.Error().Err(err).Msg("mcp server stopped")
		}
	}()
	go func() {
		defer wg.Done()
		srv.Run(sctx)
	}()
	b.opts.Log.Info().Str("listen", ln.Addr().String()).Int("agents", len(agents)).Msg("serving MCP at " + hmcp.Path)
	return func() {
		cancel()
		// Sessions first: their event streams would keep Shutdown waiting. A wait_request still waiting ends with
		// the grace period, after which Close ends whatever is still open.
		srv.Close()
		shctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := hs.Shutdown(shctx); err != nil {
			_ = hs.Close()
		}
		scancel()
		srv.Close()
		wg.Wait()
	}, nil
}

// mcpServing is the MCP server a bot serves, and how many connections its listener holds open.
type mcpServing struct {
	srv   *hmcp.Server
	conns atomic.Int64
}

func (m *mcpServing) track(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		m.conns.Add(1)
	case http.StateClosed, http.StateHijacked:
		m.conns.Add(-1)
	}
}

// MCPLoad is what the MCP listener holds: open connections, live sessions, and the requests its subscriptions
// follow (read when they change). All zero when MCP is off.
type MCPLoad struct {
	Connections int64
	Sessions    int
	Followed    int
}

// MCPLoad reports what the MCP listener holds now.
func (b *Bot) MCPLoad() MCPLoad {
	m := b.mcp.Load()
	if m == nil {
		return MCPLoad{}
	}
	return MCPLoad{Connections: m.conns.Load(), Sessions: m.srv.Sessions(), Followed: m.srv.Followed()}
}

// registerMCPGauges publishes what the MCP listener holds, next to the limits that bound it.
func (b *Bot) registerMCPGauges() {
	gauge := func(name, help string, v func(MCPLoad) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(b.MCPLoad()) })
	}
	b.metrics.Registry.MustRegister(
		gauge("hyperops_mcp_connections", "Connections the MCP listener holds open.", func(l MCPLoad) float64 { return float64(l.Connections) }),
		gauge("hyperops_mcp_sessions", "Initialized MCP sessions, over all agents (each agent: at most mcp.maxSessionsPerAgent).",
			func(l MCPLoad) float64 { return float64(l.Sessions) }),
		gauge("hyperops_mcp_followed_requests", "Requests the MCP resource subscriptions follow (each read when it changes).",
			func(l MCPLoad) float64 { return float64(l.Followed) }))
}

func (b *Bot) whereabouts() *slackWhereabouts {
	return &slackWhereabouts{refs: storeRefs{b.store}, cfg: b.opts.Config.Approvals.Groups,
		approvals: b.opts.Config.Slack.ApprovalsChannel, workspace: b.rt.workspace}
}

// slackWhereabouts tells an MCP agent where its request waits: the plan message in the approvals channel (its
// link), and the approver group's members. It reads only what the bot stored: an agent's tool call never waits on
// Slack.
type slackWhereabouts struct {
	refs handlers.Refs
	cfg  map[string]config.ApproverGroup
	// approvals is where an agent's plan message goes: the answer until the message is posted (by the outbox).
	approvals string
	// workspace is the workspace's address from auth.test; "" leaves links out.
	workspace string
}

// Where implements hmcp.Whereabouts.
func (w *slackWhereabouts) Where(ctx context.Context, rec *ops.Record) (*hmcp.Waiting, error) {
	refs, err := w.refs.List(ctx, rec.ID())
	if err != nil {
		return nil, err
	}
	out := &hmcp.Waiting{Channel: w.approvals, ApproverGroup: rec.Approval.Approvers}
	if g, ok := w.cfg[rec.Approval.Approvers]; ok {
		out.Approvers = append(append(out.Approvers, g.Users...), g.UserGroups...)
	}
	if !rec.Approval.ExpiresAt.IsZero() {
		t := rec.Approval.ExpiresAt.UTC()
		out.Until = &t
	}
	for _, ref := range refs {
		if ref.Kind != handlers.RefPlan {
			continue
		}
		out.Channel, out.Permalink = ref.Channel, permalink(w.workspace, ref.Channel, ref.TS)
		return out, nil
	}
	return out, nil
}

// permalink is the link of a top-level message, made the way Slack makes it (chat.getPermalink answers the same for
// a top-level message: the workspace's address, archives, the channel, "p" and the ts without its dot), so telling
// an agent where to approve costs no call to Slack.
func permalink(workspace, channel, ts string) string {
	if workspace == "" || channel == "" || ts == "" {
		return ""
	}
	return strings.TrimSuffix(workspace, "/") + "/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
}
