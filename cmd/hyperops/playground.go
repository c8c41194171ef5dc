//go:build !noplayground

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hyperops/hyperops/internal/playground"
)

// cmdPlayground runs the real bot against the fake Slack, the fake AWS and a Kubernetes API, and serves the page.
func cmdPlayground(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("playground", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8090", "address of the page (loopback only)")
	kubeconfig := fs.String("kubeconfig", "", "a cluster of your own (kind, minikube, a test cluster); empty = the local control plane with kwok GPU nodes")
	kubeContext := fs.String("context", "", "the kubeconfig context (empty: its current one)")
	keep := fs.String("dir", "", "keep the playground's files (config, bot log, control-plane data) in this directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t0 := time.Now()
	ln, url, err := playground.Listen(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "hyperops playground: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "HyperOps playground: open %s (starting; the page loads once the bot is connected)\n", url)
	if *kubeconfig == "" {
		if err := playground.EnsureControlPlane(ctx, "", stderr); err != nil {
			fmt.Fprintf(stderr, "hyperops playground: %v\n", err)
			return 1
		}
	}
	pg, err := playground.Start(ctx, playground.Options{Listener: ln, Kubeconfig: *kubeconfig, Context: *kubeContext, Dir: *keep, Progress: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "hyperops playground: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ready in %s: %s\n", time.Since(t0).Round(100*time.Millisecond), pg.URL())
	fmt.Fprintf(stdout, "  throw-away: a fake Slack, a fake AWS and %s; nothing reaches a real Slack or AWS.\n", pg.Mode())
	fmt.Fprintf(stdout, "  bot config %s, bot log %s. Ctrl-C stops it and removes everything.\n", pg.ConfigPath, pg.BotLog)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-pg.Done():
	}
	if err := pg.Close(); err != nil {
		fmt.Fprintf(stderr, "hyperops playground: stopping: %v\n", err)
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		fmt.Fprintf(stderr, "hyperops playground: the bot stopped: %v\n", runErr)
		return 1
	}
	return 0
}
