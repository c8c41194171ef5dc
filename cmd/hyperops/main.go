package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/hyperops/hyperops/bot"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/redact"
	"github.com/hyperops/hyperops/ops/state"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `hyperops — Slack chat-ops control plane for EKS and SageMaker HyperPod

Usage:
  hyperops run [-config FILE]        connect to Slack and serve requests (default config: $HYPEROPS_CONFIG or config/example.yaml)
  hyperops playground [-listen 127.0.0.1:8090] [-kubeconfig FILE]
                                     try it in a browser: the real bot against a fake Slack, a fake AWS and a local
                                     Kubernetes API (or your cluster); no Slack workspace, AWS account or cluster needed
  hyperops validate-config FILE      check a configuration file; prints "ok" and each agent's operations and scope,
                                     or every problem, exits 1 on problems
  hyperops audit export --since T    print the audit trail (JSON lines, docs/audit.md) from the configured Redis
                                     [--limit N] [--cursor ID] [-config FILE]
  hyperops mcp-stdio --url URL       bridge a stdio MCP client to the HyperOps MCP endpoint (token: $HYPEROPS_MCP_TOKEN or --token)
  hyperops version                   print the version

Secrets come from the environment (${NAME} in the file): SLACK_APP_TOKEN (xapp-…) and SLACK_BOT_TOKEN (xoxb-…).
`

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain dispatches the subcommand and returns the exit code: 0 ok, 1 a problem the user can fix, 2 bad usage.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stderr)
	case "playground":
		return cmdPlayground(args[1:], stdout, stderr)
	case "mcp-stdio":
		return cmdMCPStdio(context.Background(), args[1:], os.Stdin, stdout, stderr)
	case "validate-config":
		return cmdValidate(args[1:], stdout, stderr)
	case "audit":
		return cmdAudit(context.Background(), args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "hyperops: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func versionString() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		v += " " + info.GoVersion
	}
	return "hyperops " + v
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprint(stderr, "usage: hyperops validate-config FILE\n")
		return 2
	}
	cfg, err := config.Load(args[0])
	if err == nil {
		if ps := redisClientProblems(cfg, args[0]); len(ps) > 0 {
			err = ps
		}
	}
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			fmt.Fprintf(stdout, "%d problem(s) in %s:\n%s\n", len(ps), args[0], ps.Error())
			return 1
		}
		fmt.Fprintf(stdout, "%s: %v\n", args[0], err)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	summarize(stdout, cfg)
	return 0
}

// redisClientProblems reports the client options of redis.url (dial_timeout, pool_size, …) that go-redis refuses.
// ops/state checks them (state.CheckEndpoint, which state.NewClient runs too), not config.Validate: config, which
// every package imports, does not import go-redis.
func redisClientProblems(cfg *config.Config, source string) config.Problems {
	if cfg.Redis.Embedded() {
		return nil
	}
	e, err := cfg.Redis.Endpoint()
	if err != nil {
		// config.Validate has checked what Endpoint reads, and the error names the field all the same.
		return config.Problems{{Source: source, Message: err.Error()}}
	}
	if err := state.CheckEndpoint(e); err != nil {
		at := "redis.url"
		if cfg.Redis.URL == "" {
			at = "redis"
		}
		return config.Problems{{Source: source, Path: at, Message: err.Error()}}
	}
	return nil
}

// summarize prints what a valid configuration lets its agents do, one agent a line: how it reaches HyperOps, its
// operations and its scope, so each widening of an agent (agents[].scope) shows in the output.
func summarize(w io.Writer, cfg *config.Config) {
	fmt.Fprintf(w, "agents: %d\n", len(cfg.Agents))
	for _, a := range cfg.Agents {
		var via []string
		if a.SlackUser != "" {
			via = append(via, "DM as "+a.SlackUser)
		}
		if a.MCP.TokenSHA256 != "" {
			via = append(via, "MCP")
		}
		ops := "none"
		if len(a.Operations) > 0 {
			ops = strings.Join(a.Operations, ", ")
		}
		fmt.Fprintf(w, "  %s (%s): operations %s; scope: %s\n", a.Name, strings.Join(via, ", "), ops, a.Scope)
	}
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("HYPEROPS_CONFIG")
	if def == "" {
		def = "config/example.yaml"
	}
	path := fs.String("config", def, "configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "hyperops: %s:\n%v\n", *path, err)
		return 1
	}
	if err := cfg.CheckSlackTokens(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	redactor, err := redact.For(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "hyperops: %s:\n%v\n", *path, err)
		return 1
	}
	log := newLogger(os.Stderr, cfg.Log, redactor)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info().Str("version", versionString()).Str("config", *path).Msg("starting hyperops")
	if err := bot.Run(ctx, cfg, log); err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("hyperops stopped")
		return 1
	}
	log.Info().Msg("hyperops stopped")
	return 0
}
