package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// TestAuditExport: `hyperops audit export` reads the configured Redis and prints exactly the lines the store's
// export (what GET /audit serves, bot's TestAuditEndpoint) writes; without --since or without a Redis it says why.
func TestAuditExport(t *testing.T) {
	rs := redistest.Start(t)
	example, err := os.ReadFile("../../config/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(example), `  url: ""`, `  url: "`+rs.URL()+`"`, 1)
	path := filepath.Join(t.TempDir(), "hyperops.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb, err := state.Dial(ctx, rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rdb.Close() }()
	store := state.New(rdb, state.Options{KeyPrefix: "hyperops"})
	at := time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC)
	who := ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}
	req := ops.Request{ID: "req-export", Operation: "submit-training-job", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"}, Initiator: who}
	rec := &ops.Record{Request: req, Fingerprint: req.Fingerprint(), Phase: ops.PhaseReceived, Version: 1, Owner: who, CreatedAt: at, UpdatedAt: at,
		History: []ops.Transition{{To: ops.PhaseReceived, At: at, By: who}}}
	if _, _, err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	next := rec.Clone()
	tr := ops.Transition{From: ops.PhaseReceived, To: ops.PhaseRejected, At: at.Add(time.Second), By: ops.Initiator{Kind: ops.System, ID: "hyperops"}, Note: "out of scope"}
	next.Phase, next.Version, next.History = tr.To, 2, append(next.History, tr)
	if err := store.Update(ctx, next, 1, audit.NewEvent(next, tr)); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := store.ExportAudit(ctx, &want, state.AuditQuery{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(want.String(), `"requestId":"req-export"`); n != 2 {
		t.Fatalf("the store exported %d lines of req-export, want 2:\n%s", n, want.String())
	}

	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		contains string
	}{
		{"every line", []string{"audit", "export", "--since", "2000-01-01T00:00:00Z", "-config", path}, 0, want.String(), ""},
		{"the first line", []string{"audit", "export", "--since", "2000-01-01T00:00:00Z", "--limit", "1", "-config", path}, 0,
			strings.SplitAfter(want.String(), "\n")[0], ""},
		{"since is required", []string{"audit", "export", "-config", path}, 2, "", "--since is required"},
		{"since is a time", []string{"audit", "export", "--since", "yesterday", "-config", path}, 2, "", "RFC 3339"},
		{"the embedded Redis has no trail to read", []string{"audit", "export", "--since", "2000-01-01T00:00:00Z", "-config", "../../config/example.yaml"}, 1,
			"", "GET /audit"},
		{"usage", []string{"audit"}, 2, "", "usage: hyperops audit export"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := runMain(tc.args, &out, &errOut); code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tc.code, out.String(), errOut.String())
			}
			if out.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), tc.stdout)
			}
			if !strings.Contains(errOut.String(), tc.contains) {
				t.Errorf("stderr lacks %q:\n%s", tc.contains, errOut.String())
			}
		})
	}
}
