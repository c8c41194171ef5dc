package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateConfig(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	example, err := os.ReadFile("../../config/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(example), "maxNodesPerGroup: 16", "maxNodesPerGroup: -1", 1)
	text = strings.Replace(text, `schedule: "0 9 * * 1-5"`, `schedule: "0 25 * * *"`, 1)
	text = strings.Replace(text, "slack:\n", "slack:\n  colour: blue\n", 1)
	if err := os.WriteFile(bad, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{"example is ok", []string{"validate-config", "../../config/example.yaml"}, 0, []string{"ok"}},
		{"three problems at once", []string{"validate-config", bad}, 1, []string{"colour", "maxNodesPerGroup", "schedule"}},
		{"missing file", []string{"validate-config", "/nonexistent.yaml"}, 1, []string{"nonexistent.yaml"}},
		{"usage", []string{"validate-config"}, 2, nil},
		{"unknown command", []string{"frobnicate"}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := runMain(tt.args, &out, &errOut)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout=%s stderr=%s", code, tt.code, out.String(), errOut.String())
			}
			for _, c := range tt.contains {
				if !strings.Contains(out.String(), c) {
					t.Errorf("output lacks %q:\n%s", c, out.String())
				}
			}
		})
	}
}

func TestRunWithoutTokensSaysHowToGetThem(t *testing.T) {
	t.Setenv("SLACK_APP_TOKEN", "")
	t.Setenv("SLACK_BOT_TOKEN", "")
	var out, errOut bytes.Buffer
	code := runMain([]string{"run", "-config", "../../config/example.yaml"}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"SLACK_APP_TOKEN", "SLACK_BOT_TOKEN", "xapp-", "xoxb-", "make playground"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("message lacks %q:\n%s", want, errOut.String())
		}
	}
}

// TestPlaygroundServesOnLoopbackOnly: an address another machine could reach is refused before anything starts,
// with the reason and the address to use.
func TestPlaygroundServesOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8090", ":8090"} {
		var out, errOut bytes.Buffer
		if code := runMain([]string{"playground", "-listen", addr}, &out, &errOut); code != 1 {
			t.Fatalf("-listen %s: exit %d, want 1; stdout=%s stderr=%s", addr, code, out.String(), errOut.String())
		}
		if !strings.Contains(errOut.String(), "127.0.0.1:PORT") {
			t.Errorf("-listen %s: the refusal does not say what to use:\n%s", addr, errOut.String())
		}
		if out.Len() != 0 {
			t.Errorf("-listen %s: printed %q before refusing", addr, out.String())
		}
	}
}
