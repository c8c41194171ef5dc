package bot

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// mcpSessions is how many MCP sessions (clients) share the burst; each sends burstCallers/mcpSessions calls at once.
const mcpSessions = 100

// BenchmarkConcurrentMCPCalls sends 1,000 identical tool calls (the same requestId) at once from 100 MCP sessions of
// the SDK's client over real HTTP, with real Redis, and asserts exactly one execution and that every caller is
// answered with that requestId and no error (DESIGN.md: "1,000 concurrent identical MCP tool calls").
//
// approval: the stock rules ask a lead: every caller gets awaiting-approval, one approval message is posted, one
// click executes once. no-approval: a rule lets the agent's request run at once, so the callers race the execution.
func BenchmarkConcurrentMCPCalls(b *testing.B) {
	for _, tc := range []struct {
		name     string
		approval bool
	}{{"approval", true}, {"no-approval", false}} {
		b.Run(tc.name, func(b *testing.B) { benchMCPBurst(b, tc.approval) })
	}
}

func benchMCPBurst(b *testing.B, approval bool) {
	h := startMCPWith(b, harnessOptions{
		slack:  &fakeslack.Options{Scale: benchSlackScale},
		limits: scaledLimits(benchSlackScale, 0.9),
		edit: func(c *config.Config) {
			if !approval {
				c.Approvals.Rules = append([]config.ApprovalRule{{Risk: []string{"low", "medium"}, Initiator: "agent"}}, c.Approvals.Rules...)
			}
		},
	})
	tr := &http.Transport{MaxIdleConnsPerHost: burstCallers}
	b.Cleanup(tr.CloseIdleConnections)
	sessions := make([]*mcp.ClientSession, mcpSessions)
	for i := range sessions {
		s, err := h.connectWith(&mcp.StreamableClientTransport{Endpoint: h.mcpEndpoint(), MaxRetries: -1, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: bearer{tokenOps, tr}}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = s
	}
	op := h.ops["submit-training-job"]
	var all []time.Duration
	var wall time.Duration
	phases := map[ops.Phase]int{}
	iters := 0
	for b.Loop() {
		id := fmt.Sprintf("mcp-bench-%t-%d", approval, iters)
		runs := op.runs.Load()
		lat, w, ph := mcpBurst(b, sessions, id)
		all, wall = append(all, lat...), wall+w
		for p, n := range ph {
			phases[p] += n
		}
		if approval {
			h.approveMCP(id)
		}
		h.waitPhase(id, ops.PhaseSucceeded)
		if got := op.runs.Load() - runs; got != 1 {
			b.Fatalf("%d identical MCP calls executed %d times, want exactly once", burstCallers, got)
		}
		iters++
	}
	b.StopTimer()
	p50, p99 := percentile(all, 50), percentile(all, 99)
	b.ReportMetric(float64(wall.Milliseconds())/float64(iters), "wall-ms")
	b.ReportMetric(float64(p50.Microseconds())/1000, "call-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "call-p99-ms")
	fmt.Fprintf(os.Stdout, "\n%d identical MCP calls from %d sessions × %d burst(s), approval=%t (real HTTP, SDK client, real Redis)\n",
		burstCallers, mcpSessions, iters, approval)
	fmt.Fprintf(os.Stdout, "wall %s/burst · call p50 %s p99 %s · phases answered %v · executions 1 per burst\n",
		wall/time.Duration(iters), p50, p99, phases)
}

// mcpBurst sends burstCallers identical calls at once and checks every answer names id without errors.
func mcpBurst(b *testing.B, sessions []*mcp.ClientSession, id string) ([]time.Duration, time.Duration, map[ops.Phase]int) {
	b.Helper()
	lat := make([]time.Duration, burstCallers)
	replies := make([]hmcp.WaitReply, burstCallers)
	errs := make([]error, burstCallers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range burstCallers {
		wg.Go(func() {
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := sessions[i%len(sessions)].CallTool(ctx, &mcp.CallToolParams{Name: "submit-training-job", Arguments: trainArgs(id, false)})
			lat[i] = time.Since(t0)
			if err != nil {
				errs[i] = err
				return
			}
			replies[i] = decodeReply(b, res)
		})
	}
	wg.Wait()
	wall := time.Since(start)
	phases := map[ops.Phase]int{}
	for i, r := range replies {
		if errs[i] != nil {
			b.Fatalf("call %d: %v", i, errs[i])
		}
		if r.RequestID != id || len(r.Errors) > 0 {
			b.Fatalf("call %d answered request %q with errors %+v, want %q without errors", i, r.RequestID, r.Errors, id)
		}
		phases[r.Phase]++
	}
	return lat, wall, phases
}

// approveMCP checks the burst posted exactly one approval message for id and approves it as a lead.
func (h *harness) approveMCP(id string) {
	b := h.t
	var msgs []fakeslack.Message
	pollSlack(b, h.srv, "the approval message of "+id, 10*time.Second, func(s fakeslack.Snapshot) bool {
		msgs = msgs[:0]
		for _, m := range topLevel(s, chApprove) {
			if hasButton(m, handlers.ActionApprove) && containsID(m, id) {
				msgs = append(msgs, m)
			}
		}
		return len(msgs) > 0
	})
	if len(msgs) != 1 {
		b.Fatalf("%d approval messages for %s, want exactly one", len(msgs), id)
	}
	h.click(userLead1, chApprove, msgs[0].TS, handlers.ActionApprove)
}

func containsID(m fakeslack.Message, id string) bool {
	return strings.Contains(string(m.Blocks), `"`+id+`"`)
}

// BenchmarkMCPDryRun measures one dry-run tool call end to end (SDK client → HTTP → decode → plan with cost and
// risk → Redis → reply): p50 and p99 over the run, each call a new request.
func BenchmarkMCPDryRun(b *testing.B) {
	h := startMCP(b)
	s, err := h.connect(tokenOps, nil)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		args := map[string]any{"name": "w1", "count": 2, "requestId": fmt.Sprintf("dry-%d", i), "dryRun": true}
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "scale-widget", Arguments: args})
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if r := decodeReply(b, res); r.Phase != ops.PhaseDone || r.Plan == nil {
			b.Fatalf("dry run answered %+v", r)
		}
		i++
	}
	b.StopTimer()
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	fmt.Fprintf(os.Stdout, "\nMCP dry-run tool call over %d calls: p50 %s · p99 %s\n", len(lat), p50, p99)
}
