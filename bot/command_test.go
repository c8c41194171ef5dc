package bot

import (
	"context"
	"encoding/json"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops"
)

const kubeconfigYAML = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`

// With slack.command: /gpu every operation of the real catalog is reachable under /gpu, and help shows /gpu only.
func TestConfiguredCommandEverywhere(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Slack: config.Slack{Command: "/gpu"}, Clusters: []config.Cluster{{Name: "c", Region: "us-west-2", Kubeconfig: kc}}}
	w, err := buildCatalog(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := w.catalog.Specs()
	if len(specs) < 15 {
		t.Fatalf("only %d operations in the catalog", len(specs))
	}
	g := handlers.NewGrammar("/gpu", specs)
	for _, s := range specs {
		inv, err := g.Parse(strings.TrimSpace(s.Topic + " " + s.Verb))
		if err != nil || inv.Command.Spec == nil || inv.Command.Spec.Name != s.Name {
			t.Errorf("%s is not reachable as /gpu %s %s: %v", s.Name, s.Topic, s.Verb, err)
		}
	}
	msgs := []handlers.Msg{handlers.HelpMessage(g, "")}
	for _, topic := range g.Topics() {
		msgs = append(msgs, handlers.HelpMessage(g, topic))
	}
	_, perr := g.Parse("trian submit")
	msgs = append(msgs, handlers.ErrorMessage(perr), handlers.ErrorMessage(ops.Errorf(ops.CodeNotFound, "", "check with "+ops.Ask("requests"), "no such request")))
	for _, m := range msgs {
		m = handlers.WithCommand(m, "/gpu")
		b, _ := json.Marshal(m)
		text := string(b)
		if strings.Contains(text, "/hp") || strings.Contains(text, ops.Command) {
			t.Errorf("a message says /hp or the placeholder: %s", text)
		}
		if !strings.Contains(text, "/gpu") {
			t.Errorf("a message does not name /gpu: %s", text)
		}
	}
}

// No human text in the code names the command literally: hints use ops.Ask (or the handlers' configured command),
// so a workspace with another command never reads /hp.
func TestNoLiteralSlashCommandInCode(t *testing.T) {
	for _, dir := range []string{"../ops", "../handlers", "../approvals", "../bot"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var s scanner.Scanner
			fset := token.NewFileSet()
			s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
			for {
				pos, tok, lit := s.Scan()
				if tok == token.EOF {
					break
				}
				if tok == token.STRING && strings.Contains(lit, "/hp ") {
					t.Errorf("%s: string %s names /hp; use ops.Ask or the configured command", fset.Position(pos), lit)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
