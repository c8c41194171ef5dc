package bot

import (
	"cmp"
	"context"
	"fmt"
	"io"
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
	"github.com/hyperops/hyperops/ops/opstest"
)

// mcpSessions is how many MCP sessions (clients) share the burst; each sends burstCallers/mcpSessions calls at once.
const mcpSessions = 100

// BenchmarkConcurrentMCPCalls sends 1,000 identical tool calls (the same requestId) at once from 100 MCP sessions of
// the SDK's client over real HTTP, with real Redis, and asserts exactly one execution and that every caller is
// answered with that requestId and no error (docs/architecture.md, Performance targets: 1,000 concurrent identical calls).
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

// stormSize is how many unauthenticated connections, and how many initialize calls from one token, the storm sends.
const stormSize = 10_000

// BenchmarkMCPStorm sends 10,000 unauthenticated connections and then 10,000 initialize calls from one agent's token
// (a client that never closes a session), and times a legitimate agent's dry run (another token, a session opened
// before) during and after the storm. It reports the heap and goroutines before and after, what the listener still
// holds, and the dry run's latency (target < 1 s during the storm).
func BenchmarkMCPStorm(b *testing.B) {
	h := startMCP(b)
	s, err := h.connect(tokenOps, nil)
	if err != nil {
		b.Fatal(err)
	}
	dryRun := func(i int) time.Duration {
		args := map[string]any{"name": "w1", "count": 2, "requestId": fmt.Sprintf("storm-dry-%d", i), "dryRun": true}
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "scale-widget", Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		if r := decodeReply(b, res); r.Phase != ops.PhaseDone {
			b.Fatalf("dry run answered %+v", r.Body)
		}
		return time.Since(t0)
	}
	dryRun(0)
	before := h.footprint(b)
	var during, after []time.Duration
	var refused, opened int
	for b.Loop() {
		stop := make(chan struct{})
		done := make(chan []time.Duration)
		go func() {
			var lat []time.Duration
			for i := 1; ; i++ {
				select {
				case <-stop:
					done <- lat
					return
				default:
				}
				lat = append(lat, dryRun(i))
			}
		}()
		stormUnauthenticated(b, h.mcpAddr)
		opened, refused = stormInitialize(b, h, tokenReader)
		close(stop)
		during = append(during, <-done...)
	}
	b.StopTimer()
	opstest.Eventually(b, time.Minute, "the storm's connections closed", func() bool { return h.bot.MCPLoad().Connections <= 1 })
	for i := range 50 {
		after = append(after, dryRun(1_000_000+i))
	}
	end := h.footprint(b)
	load := h.bot.MCPLoad()
	mib := func(n uint64) float64 { return float64(n) / (1 << 20) }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(mib(before.heap), "heap-before-MiB")
	b.ReportMetric(mib(end.heap), "heap-after-MiB")
	b.ReportMetric(float64(before.goroutines), "goroutines-before")
	b.ReportMetric(float64(end.goroutines), "goroutines-after")
	b.ReportMetric(float64(load.Sessions), "sessions-after")
	b.ReportMetric(ms(percentile(during, 50)), "dryrun-during-p50-ms")
	b.ReportMetric(ms(percentile(during, 99)), "dryrun-during-p99-ms")
	b.ReportMetric(ms(percentile(after, 50)), "dryrun-after-p50-ms")
	fmt.Fprintf(os.Stdout, "\nMCP storm: %d unauthenticated connections, then %d initialize calls from one token (%d sessions opened, %d refused over mcp.maxSessionsPerAgent)\n",
		stormSize, stormSize, opened, refused)
	fmt.Fprintf(os.Stdout, "heap %.1f MiB → %.1f MiB · goroutines %d → %d · after: %d connections, %d sessions\n",
		mib(before.heap), mib(end.heap), before.goroutines, end.goroutines, load.Connections, load.Sessions)
	fmt.Fprintf(os.Stdout, "another agent's dry run: during the storm p50 %s p99 %s max %s (%d calls) · after p50 %s p99 %s\n",
		percentile(during, 50), percentile(during, 99), percentile(during, 100), len(during), percentile(after, 50), percentile(after, 99))
}

// stormUnauthenticated opens stormSize connections, 256 at a time, each sending an initialize without a token; every
// one must be answered 401 and closed by the server.
func stormUnauthenticated(b *testing.B, addr string) {
	work := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 256 {
		wg.Go(func() {
			for range work {
				if err := unauthenticated(addr); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for range stormSize {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// stormInitialize sends stormSize initialize calls with token, 64 at a time, never closing a session.
func stormInitialize(b *testing.B, h *harness, token string) (opened, refused int) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	work := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 64 {
		wg.Go(func() {
			for range work {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.mcpEndpoint(), strings.NewReader(initializeBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := c.Do(req)
				if err != nil {
					cancel()
					b.Error(err)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				cancel()
				mu.Lock()
				if resp.Header.Get("Mcp-Session-Id") != "" {
					opened++
				} else if strings.Contains(string(body), "mcp.maxSessionsPerAgent") {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	for range stormSize {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	if opened+refused != stormSize {
		b.Fatalf("%d opened + %d refused of %d initialize calls", opened, refused, stormSize)
	}
	return opened, refused
}
