package bot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"storm","version":"1"}}}`

// unauthenticated sends one initialize without a token on its own connection and checks the answer is 401 and
// that the server then closes the connection (the next read is EOF, not the client's own deadline).
func unauthenticated(addr string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Content-Length: %d\r\n\r\n%s", hmcp.Path, addr, len(initializeBody), initializeBody)
	if err != nil {
		return err
	}
	// A guard against a hung server only: the server closes the connection at once.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("HTTP %d, want 401", resp.StatusCode)
	}
	return closedByServer(br)
}

// closedByServer reads until the server closes the connection.
func closedByServer(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("the server kept the connection open: %w", err)
	}
	return nil
}

// settledGoroutines is the process's goroutine count once the bot has finished starting (its Socket Mode
// connection, watchers and tellers running): the same count twice, 300 ms apart. On a loaded machine a count taken
// earlier misses goroutines the bot starts a moment later, which the storm would then seem to have left behind.
func (h *harness) settledGoroutines() int {
	h.t.Helper()
	last := goruntime.NumGoroutine()
	for range 20 {
		time.Sleep(300 * time.Millisecond)
		n := goruntime.NumGoroutine()
		if n == last {
			return n
		}
		last = n
	}
	return last
}

// goroutinesAtMost waits until the process runs at most n goroutines.
func (h *harness) goroutinesAtMost(what string, n int) {
	h.t.Helper()
	h.waitUntil(fmt.Sprintf("%s: at most %d goroutines (now %d)", what, n, goruntime.NumGoroutine()), func() bool {
		return goruntime.NumGoroutine() <= n
	})
}

// Unauthenticated callers, a caller that sends nothing, one that stops halfway through its headers and a
// kept-alive connection with no next request: the server closes every one of them, and after the storm it holds no
// connection and no more goroutines than before.
func TestMCPConnectionsAreClosed(t *testing.T) {
	h := startMCPWith(t, harnessOptions{edit: func(c *config.Config) {
		c.MCP.ReadTimeout, c.MCP.IdleTimeout = config.Duration(time.Second), config.Duration(time.Second)
		c.MCP.MaxSessionsPerAgent = 1
	}})
	h.waitUntil("no MCP connection yet", func() bool { return h.bot.MCPLoad().Connections == 0 })
	h.waitConnected(1)
	base := h.settledGoroutines()
	const callers = 300
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { errs[i] = unauthenticated(h.mcpAddr) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("unauthenticated caller %d: %v", i, err)
		}
	}
	slow := []string{"", "POST " + hmcp.Path + " HTTP/1.1\r\nHost: x\r\n",
		// a body that stops halfway, with a valid token: closed after mcp.readTimeout, and no session is left opening
		"POST " + hmcp.Path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
			"Authorization: Bearer " + tokenOps + "\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":",
		// kept alive after an answer (GET without a session is 400): closed after mcp.idleTimeout
		"GET " + hmcp.Path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer " + tokenOps + "\r\n\r\n"}
	for _, sent := range slow {
		wg.Go(func() {
			conn, err := net.Dial("tcp", h.mcpAddr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			_, _ = io.WriteString(conn, sent)
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if err := closedByServer(conn); err != nil {
				t.Errorf("after sending %q: %v", sent, err)
			}
		})
	}
	wg.Wait()
	h.waitUntil("every MCP connection closed", func() bool { return h.bot.MCPLoad().Connections == 0 })
	h.goroutinesAtMost("after the storm", base+5)
	if n := h.bot.MCPLoad().Sessions; n != 0 {
		t.Errorf("%d sessions after unauthenticated calls, want 0", n)
	}
	h.session(tokenOps, nil) // the one place the stalled body took was given back
}

// initialize opens a session the way a leaking client does: initialize, and never initialized nor DELETE.
func (h *harness) initialize(c *http.Client, token string) (status int, session, body string) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(h.ctx(), http.MethodPost, h.mcpEndpoint(), strings.NewReader(initializeBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// refusedOverCap checks an initialize answer is the limit's JSON-RPC error: it names the limit, its key and the
// next step.
func refusedOverCap(t *testing.T, body string) {
	t.Helper()
	var resp struct {
		Error struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    hmcp.LimitData `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Error.Code != hmcp.CodeLimit ||
		resp.Error.Data.ConfigKey != "mcp.maxSessionsPerAgent" || !strings.Contains(resp.Error.Message, "mcp.maxSessionsPerAgent") ||
		!strings.Contains(resp.Error.Data.Next, "DELETE") {
		t.Fatalf("refused initialize answered %s, want JSON-RPC error %d naming mcp.maxSessionsPerAgent and the next step", body, hmcp.CodeLimit)
	}
}

// A token's initialize calls open at most mcp.maxSessionsPerAgent sessions: a storm of them holds no more sessions
// nor goroutines than the cap, the SDK client is told why, another agent is not affected, and a closed session
// frees its place.
func TestMCPSessionsPerAgentAreCapped(t *testing.T) {
	const max = 8
	h := startMCPWith(t, harnessOptions{edit: func(c *config.Config) { c.MCP.MaxSessionsPerAgent = max }})
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	var sessions []string
	for len(sessions) < max {
		status, id, body := h.initialize(c, tokenOps)
		if status != http.StatusOK || id == "" {
			t.Fatalf("initialize %d of %d: HTTP %d %s", len(sessions)+1, max, status, body)
		}
		sessions = append(sessions, id)
	}
	full := goruntime.NumGoroutine()
	const storm = 400
	var wg sync.WaitGroup
	bodies := make([]string, storm)
	for i := range storm {
		wg.Go(func() { _, _, bodies[i] = h.initialize(c, tokenOps) })
	}
	wg.Wait()
	for _, b := range bodies {
		refusedOverCap(t, b)
	}
	if n := h.bot.MCPLoad().Sessions; n != max {
		t.Errorf("%d live sessions after %d more initialize calls, want the cap %d", n, storm, max)
	}
	if n := testutil.ToFloat64(h.bot.Metrics().MCPLimited.WithLabelValues("mcp.maxSessionsPerAgent")); n != storm {
		t.Errorf("hyperops_mcp_limited_total{mcp.maxSessionsPerAgent} = %v, want %d", n, storm)
	}
	tr.CloseIdleConnections()
	h.goroutinesAtMost("after the storm", full+5)
	if _, err := h.connect(tokenOps, nil); err == nil || !strings.Contains(err.Error(), "mcp.maxSessionsPerAgent") {
		t.Errorf("the SDK client over the cap: %v, want the limit named", err)
	}
	h.session(tokenReader, nil) // another agent's sessions are its own
	req, _ := http.NewRequestWithContext(h.ctx(), http.MethodDelete, h.mcpEndpoint(), nil)
	req.Header.Set("Authorization", "Bearer "+tokenOps)
	req.Header.Set("Mcp-Session-Id", sessions[0])
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE a session: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	// The session ends as its connection winds down; the reader's session is the other one counted.
	h.waitUntil("the deleted session ended", func() bool { return h.bot.MCPLoad().Sessions == max })
	h.session(tokenOps, nil)
}

// A session that sends nothing for mcp.sessionIdleTimeout ends.
func TestMCPIdleSessionsEnd(t *testing.T) {
	h := startMCPWith(t, harnessOptions{edit: func(c *config.Config) { c.MCP.SessionIdleTimeout = config.Duration(time.Second) }})
	if status, id, body := h.initialize(http.DefaultClient, tokenOps); status != http.StatusOK || id == "" {
		t.Fatalf("initialize: HTTP %d %s", status, body)
	}
	if n := h.bot.MCPLoad().Sessions; n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
	h.waitUntil("the idle session ended", func() bool { return h.bot.MCPLoad().Sessions == 0 })
}

// submitAwaiting submits a training job under id and checks it waits for approval.
func submitAwaiting(t *testing.T, s *mcp.ClientSession, id string) {
	t.Helper()
	if r, _ := call(t, s, "submit-training-job", trainArgs(id, false)); r.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("submit %s = %+v, want awaiting-approval", id, r.Body)
	}
}

func subscribe(h *harness, s *mcp.ClientSession, id string) error {
	return s.Subscribe(h.ctx(), &mcp.SubscribeParams{URI: "hyperops://requests/" + id})
}

// wait_request calls in flight and subscriptions of one agent are capped together by mcp.maxWaitsPerAgent; over it
// a wait is E_BUSY and a subscription a JSON-RPC error, both naming the limit; what ends frees its place.
func TestMCPWaitsPerAgentAreCapped(t *testing.T) {
	h := startMCPWith(t, harnessOptions{edit: func(c *config.Config) { c.MCP.MaxWaitsPerAgent = 2 }})
	progress := make(chan struct{}, 16)
	s1 := h.session(tokenOps, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress <- struct{}{} }})
	s2 := h.session(tokenOps, nil)
	for _, id := range []string{"cap-a", "cap-b", "cap-c"} {
		submitAwaiting(t, s1, id)
	}
	for _, sub := range []struct {
		s  *mcp.ClientSession
		id string
	}{{s1, "cap-a"}, {s1, "cap-a"}, {s2, "cap-b"}} { // the same subscription twice is one
		if err := subscribe(h, sub.s, sub.id); err != nil {
			t.Fatalf("subscribe %s: %v", sub.id, err)
		}
	}
	r, res := call(t, s1, hmcp.ToolWaitRequest, map[string]any{"requestId": "cap-c", "timeoutSeconds": 1})
	if !res.IsError || len(r.Errors) != 1 || r.Errors[0].Code != ops.CodeBusy || !strings.Contains(r.Errors[0].Message, "mcp.maxWaitsPerAgent") ||
		!strings.Contains(r.Errors[0].Next, hmcp.ToolGetRequest) {
		t.Fatalf("wait over the cap = %+v, want E_BUSY naming mcp.maxWaitsPerAgent and get_request", r.Body)
	}
	if err := subscribe(h, s2, "cap-c"); err == nil || !strings.Contains(err.Error(), "mcp.maxWaitsPerAgent") {
		t.Fatalf("subscription over the cap: %v, want the limit named", err)
	}
	if n := testutil.ToFloat64(h.bot.Metrics().MCPLimited.WithLabelValues("mcp.maxWaitsPerAgent")); n != 2 {
		t.Errorf("hyperops_mcp_limited_total{mcp.maxWaitsPerAgent} = %v, want 2", n)
	}
	if err := s1.Unsubscribe(h.ctx(), &mcp.UnsubscribeParams{URI: "hyperops://requests/cap-a"}); err != nil {
		t.Fatal(err)
	}
	// A wait in flight holds its place until it ends.
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: hmcp.ToolWaitRequest, Arguments: map[string]any{"requestId": "cap-c", "timeoutSeconds": 60}}
		p.SetProgressToken("cap")
		_, err := s1.CallTool(ctx, p)
		waited <- err
	}()
	<-progress
	if err := subscribe(h, s2, "cap-a"); err == nil || !strings.Contains(err.Error(), "mcp.maxWaitsPerAgent") {
		t.Fatalf("subscription while a wait and a subscription are held: %v, want the limit named", err)
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Logf("cancelled wait: %v", err)
	}
	h.waitUntil("the cancelled wait frees its place", func() bool { return subscribe(h, s2, "cap-a") == nil })
}

// A subscription is its session's own: another session's unsubscribe leaves it, and the subscriber is told of the
// change; a closed session's subscriptions are no longer read; a request that ended is followed no more.
func TestMCPSubscriptionsBelongToTheirSession(t *testing.T) {
	h := startMCP(t)
	updated := make(chan string, 16)
	sA := h.session(tokenOps, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI }})
	sB := h.session(tokenOps, nil)
	submitAwaiting(t, sA, "sub-x")
	if err := subscribe(h, sA, "sub-x"); err != nil {
		t.Fatal(err)
	}
	if err := sB.Unsubscribe(h.ctx(), &mcp.UnsubscribeParams{URI: "hyperops://requests/sub-x"}); err != nil {
		t.Fatal(err)
	}
	if n := h.bot.MCPLoad().Followed; n != 1 {
		t.Fatalf("another session's unsubscribe: %d requests followed, want sub-x still", n)
	}
	snap := h.waitFor("the approval message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chApprove)) == 1 })
	h.click(userLead1, chApprove, topLevel(snap, chApprove)[0].TS, handlers.ActionApprove)
	select {
	case uri := <-updated:
		if uri != "hyperops://requests/sub-x" {
			t.Errorf("updated %s, want sub-x", uri)
		}
	case <-h.ctx().Done():
		t.Fatal("the subscriber was not told of the approval")
	}
	h.waitPhase("sub-x", ops.PhaseSucceeded)
	h.waitUntil("the finished request no longer read", func() bool { return h.bot.MCPLoad().Followed == 0 })
	// Subscribing to a request that already ended adds nothing to read.
	if err := subscribe(h, sB, "sub-x"); err != nil {
		t.Fatal(err)
	}
	if n := h.bot.MCPLoad().Followed; n != 0 {
		t.Errorf("a subscription to a finished request: %d requests followed, want 0", n)
	}
	sC := h.session(tokenOps, nil)
	submitAwaiting(t, sC, "sub-y")
	if err := subscribe(h, sC, "sub-y"); err != nil {
		t.Fatal(err)
	}
	if n := h.bot.MCPLoad().Followed; n != 1 {
		t.Fatalf("%d requests followed, want sub-y", n)
	}
	if err := sC.Close(); err != nil {
		t.Fatal(err)
	}
	h.waitUntil("the closed session's subscription dropped", func() bool { return h.bot.MCPLoad().Followed == 0 })
}

// A key given twice in tool arguments is refused naming it, as in a DM, and nothing is recorded.
func TestMCPDuplicateKeysRefused(t *testing.T) {
	h := startMCP(t)
	s := h.session(tokenOps, nil)
	for _, tc := range []struct {
		tool, args, field string
	}{
		{"submit-training-job", `{"name":"a","image":"registry.example.com/trainer:v17","replicas":1,"replicas":8,"requestId":"dup-1"}`, "replicas"},
		{"submit-training-job", `{"name":"a","image":"registry.example.com/trainer:v17","requestId":"dup-2","target":{"cluster":"x","cluster":"y"}}`, "target.cluster"},
		{hmcp.ToolGetRequest, `{"requestId":"dup-1","requestId":"dup-2"}`, "requestId"},
	} {
		res, err := s.CallTool(h.ctx(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatal(err)
		}
		r := decodeReply(t, res)
		if !res.IsError || len(r.Errors) != 1 || r.Errors[0].Code != ops.CodeInvalidArgument || r.Errors[0].Field != tc.field ||
			!strings.Contains(r.Errors[0].Message, "given twice") {
			t.Errorf("%s %s = %+v, want E_INVALID_ARGUMENT: %s given twice", tc.tool, tc.args, r.Body, tc.field)
		}
	}
	if recs, err := h.bot.Engine().List(h.ctx(), engine.ListQuery{}); err != nil || len(recs) != 0 {
		t.Errorf("refused calls recorded %d request(s) (%v)", len(recs), err)
	}
}

// ops writes its next steps in the slash grammar; an MCP agent reads them as the tool to call.
func TestMCPNextStepsNameTools(t *testing.T) {
	h := startMCP(t)
	r, res := call(t, h.session(tokenOps, nil), hmcp.ToolGetRequest, map[string]any{"requestId": "no-such-request"})
	if !res.IsError || len(r.Errors) != 1 || r.Errors[0].Code != ops.CodeNotFound || r.Errors[0].Next != "check the id with "+hmcp.ToolListRequests {
		t.Errorf("get_request of an unknown id = %+v, want E_NOT_FOUND with next step list_requests", r.Body)
	}
}
