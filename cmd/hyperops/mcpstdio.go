package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const mcpStdioUsage = `usage: hyperops mcp-stdio --url URL [--token TOKEN]

Bridges an MCP client that only speaks stdio to a HyperOps MCP endpoint (streamable HTTP), message by message.
--url      the endpoint, e.g. https://hyperops.example.com/mcp (default $HYPEROPS_MCP_URL)
--token    the agent's bearer token (default $HYPEROPS_MCP_TOKEN; prefer the variable: a flag shows in ps)
`

// cmdMCPStdio relays JSON-RPC messages between stdin/stdout and the HTTP endpoint; it runs no engine. It ends when
// stdin closes or the endpoint ends the session.
func cmdMCPStdio(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp-stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, mcpStdioUsage) }
	url := fs.String("url", os.Getenv("HYPEROPS_MCP_URL"), "the HyperOps MCP endpoint")
	token := fs.String("token", os.Getenv("HYPEROPS_MCP_TOKEN"), "the agent's bearer token")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *url == "" || *token == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, mcpStdioUsage)
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	local := &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	remote := &mcp.StreamableClientTransport{Endpoint: *url, MaxRetries: 3,
		HTTPClient: &http.Client{Transport: bearerTransport{token: strings.TrimSpace(*token), next: http.DefaultTransport}}}
	if err := bridge(ctx, local, remote); err != nil {
		fmt.Fprintf(stderr, "hyperops mcp-stdio: %v\n", err)
		return 1
	}
	return 0
}

// bridge copies messages both ways until either side ends. The end of the local input is a normal end.
func bridge(ctx context.Context, local, remote mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lc, err := local.Connect(ctx)
	if err != nil {
		return fmt.Errorf("open stdio: %w", err)
	}
	rc, err := remote.Connect(ctx)
	if err != nil {
		_ = lc.Close()
		return fmt.Errorf("connect to the endpoint: %w", err)
	}
	type end struct {
		local bool
		err   error
	}
	ends := make(chan end, 2)
	pump := func(from, to mcp.Connection, fromLocal bool) {
		for {
			msg, err := from.Read(ctx)
			if err != nil {
				ends <- end{fromLocal, err}
				return
			}
			if err := to.Write(ctx, msg); err != nil {
				ends <- end{!fromLocal, err}
				return
			}
		}
	}
	go pump(lc, rc, true)
	go pump(rc, lc, false)
	first := <-ends
	cancel()
	_ = rc.Close() // ends the remote session (DELETE)
	_ = lc.Close()
	<-ends
	if first.local && (errors.Is(first.err, io.EOF) || errors.Is(first.err, context.Canceled)) {
		return nil
	}
	if ctx.Err() != nil && !first.local && errors.Is(first.err, context.Canceled) {
		return nil
	}
	return first.err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
