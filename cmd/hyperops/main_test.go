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

// TestValidateConfigChecksRedisClientOptions: the go-redis options in redis.url (dial_timeout, pool_size, …) are
// checked by ops/state, not by config.Validate, and validate-config still names the field and the problem, never
// the password.
func TestValidateConfigChecksRedisClientOptions(t *testing.T) {
	example, err := os.ReadFile("../../config/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, url string
		code      int
		want      string
	}{
		{"good options", "redis://:hunter2@r:6379/0?dial_timeout=2s&pool_size=5", 0, "ok"},
		{"a bad duration", "redis://:hunter2@r:6379/0?dial_timeout=abc", 1, `redis.url: the client options after '?': redis: invalid dial_timeout duration`},
		{"an unknown option", "redis-sentinel://admin:hunter2@s1:26379/m?bogus=1", 1, "redis.url: the client options after '?': redis: unexpected option: bogus"},
		{"a bad number", "rediss-cluster://:hunter2@n1:6379?pool_size=many", 1, "redis.url: the client options after '?': redis: invalid pool_size number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := strings.Replace(string(example), `  url: ""`, `  url: "`+tt.url+`"`, 1)
			path := filepath.Join(t.TempDir(), "hyperops.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := runMain([]string{"validate-config", path}, &out, &errOut); code != tt.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
			if strings.Contains(out.String(), "hunter2") {
				t.Errorf("output shows the password:\n%s", out.String())
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

// TestValidateConfigShowsTheScopeLadder: the seed's progression — diagnose, then a test namespace, then production —
// is three edits of one agent's scope, and validate-config's summary shows each.
func TestValidateConfigShowsTheScopeLadder(t *testing.T) {
	example, err := os.ReadFile("../../config/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPS_AGENT_MCP_TOKEN_SHA256", strings.Repeat("0f", 32))
	steps := []struct {
		name string
		edit map[string]string
		want string
	}{
		{"diagnose", map[string]string{"readOnly: false": "readOnly: true"},
			"ops-agent (DM as U0AGENT, MCP): operations get-*, list-*, submit-training-job, deploy-inference, scale-inference; scope: read-only; clusters: all; namespaces: all; max risk: critical"},
		{"a test namespace", map[string]string{"namespaces: []": "namespaces: [ml-dev]", "maxRisk: critical": "maxRisk: medium"},
			"scope: may change; clusters: all; namespaces: ml-dev; max risk: medium"},
		{"production", nil,
			"scope: may change; clusters: all; namespaces: all; max risk: critical"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			text := string(example)
			for from, to := range st.edit {
				if !strings.Contains(text, "      "+from) {
					t.Fatalf("example.yaml's agent scope has no %q", from)
				}
				text = strings.Replace(text, "      "+from, "      "+to, 1)
			}
			path := filepath.Join(t.TempDir(), "hyperops.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := runMain([]string{"validate-config", path}, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), st.want) {
				t.Errorf("summary lacks %q:\n%s", st.want, out.String())
			}
		})
	}
}
