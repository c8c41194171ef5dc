package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// echoEndpoint is a streamable-HTTP MCP server that wants a bearer token and has one tool that reports progress.
func echoEndpoint(t *testing.T, token string) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "v0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "halfway"})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// stdioPair returns the bridge's stdio (what it reads, where it writes) and the client's transport on the other end.
func stdioPair() (stdin io.Reader, stdout io.WriteCloser, client *mcp.IOTransport) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	return inR, outW, &mcp.IOTransport{Reader: outR, Writer: inW}
}

func TestMCPStdioBridgesMessagesAndProgress(t *testing.T) {
	url := echoEndpoint(t, "agent-token")
	stdin, stdout, clientSide := stdioPair()
	done := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		done <- cmdMCPStdio(context.Background(), []string{"--url", url, "--token", "agent-token"}, stdin, stdout, &stderr)
		_ = stdout.Close()
	}()
	progressed := make(chan string, 1)
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progressed <- r.Params.Message }})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, clientSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := s.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Fatalf("tools over the bridge = %+v, %v", tools, err)
	}
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"hello": "world"}}
	params.SetProgressToken("p1")
	res, err := s.CallTool(ctx, params)
	if err != nil || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"hello":"world"`) {
		t.Fatalf("call over the bridge = %+v, %v", res, err)
	}
	select {
	case m := <-progressed:
		if m != "halfway" {
			t.Errorf("progress message %q", m)
		}
	case <-ctx.Done():
		t.Error("no progress notification over the bridge")
	}
	_ = s.Close() // closes the bridge's stdin
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("mcp-stdio exited %d after stdin closed: %s", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("mcp-stdio did not end when stdin closed")
	}
}

func TestMCPStdioWrongTokenFails(t *testing.T) {
	url := echoEndpoint(t, "agent-token")
	stdin, stdout, clientSide := stdioPair()
	done := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		done <- cmdMCPStdio(context.Background(), []string{"--url", url, "--token", "wrong"}, stdin, stdout, &stderr)
		_ = stdout.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "v0"}, nil)
	if _, err := c.Connect(ctx, clientSide, nil); err == nil {
		t.Error("initialize succeeded with a wrong token")
	}
	if code := <-done; code != 1 || !strings.Contains(stderr.String(), "Unauthorized") {
		t.Errorf("exit %d, stderr %q; want 1 naming the 401", code, stderr.String())
	}
}

func TestMCPStdioUsage(t *testing.T) {
	t.Setenv("HYPEROPS_MCP_URL", "")
	t.Setenv("HYPEROPS_MCP_TOKEN", "")
	var stderr strings.Builder
	if code := cmdMCPStdio(context.Background(), []string{"--url", "http://127.0.0.1:1/mcp"}, strings.NewReader(""), io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--token") {
		t.Errorf("without a token: exit %d, %q; want usage", code, stderr.String())
	}
}
