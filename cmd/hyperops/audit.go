package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/state"
)

const auditUsage = `usage: hyperops audit export --since RFC3339 [--limit N] [--cursor ID] [-config FILE]
  prints the audit trail from the configuration's Redis as JSON lines (docs/audit.md), oldest first
`

// cmdAudit runs `hyperops audit export`: the same lines GET /audit serves, read from the Redis the configuration
// names, every page of them (or the first --limit).
func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprint(stderr, auditUsage)
		return 2
	}
	fs := flag.NewFlagSet("audit export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("HYPEROPS_CONFIG")
	if def == "" {
		def = "config/example.yaml"
	}
	path := fs.String("config", def, "configuration file")
	since := fs.String("since", "", "the first time to export, RFC 3339 (e.g. 2025-03-08T00:00:00Z)")
	limit := fs.Int("limit", 0, "at most this many lines (0 = all)")
	cursor := fs.String("cursor", "", "continue after this line's cursor")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	q := state.AuditQuery{Cursor: *cursor, Limit: *limit}
	if *since == "" {
		fmt.Fprint(stderr, "hyperops audit export: --since is required\n"+auditUsage)
		return 2
	}
	t, err := time.Parse(time.RFC3339, *since)
	if err != nil {
		fmt.Fprintf(stderr, "hyperops audit export: --since must be an RFC 3339 time such as 2025-03-08T00:00:00Z, got %q\n", *since)
		return 2
	}
	q.Since = t
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "hyperops: %s:\n%v\n", *path, err)
		return 1
	}
	if cfg.Redis.Embedded() {
		fmt.Fprintf(stderr, "hyperops audit export: %s configures no Redis (redis.url): the embedded one lives inside the bot's process; "+
			"read its trail with GET %s on server.listen instead\n", *path, "/audit")
		return 1
	}
	e, err := cfg.Redis.Endpoint()
	if err != nil {
		fmt.Fprintf(stderr, "hyperops audit export: %v\n", err)
		return 1
	}
	rdb, err := state.DialEndpoint(ctx, e)
	if err != nil {
		fmt.Fprintf(stderr, "hyperops audit export: %v\n", err)
		return 1
	}
	defer func() { _ = rdb.Close() }()
	store := state.New(rdb, state.Options{KeyPrefix: cfg.Redis.KeyPrefix, AuditMaxLen: cfg.Audit.MaxEntries})
	if err := store.ExportAudit(ctx, stdout, q); err != nil {
		fmt.Fprintf(stderr, "hyperops audit export: %v\n", err)
		return 1
	}
	return 0
}
