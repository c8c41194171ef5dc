package config

import (
	"os"
	"strings"
	"testing"
)

// TestAgentsDocConfig parses the configuration docs/agents.md shows, so the guide cannot drift from the loader: with
// the digest in the environment the agent gets it, and mcp.listen is what the guide says.
func TestAgentsDocConfig(t *testing.T) {
	raw, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "   ```yaml\n   agents:\n")
	if !ok {
		t.Fatal("docs/agents.md has no ```yaml block starting with agents:")
	}
	block, _, ok := strings.Cut(rest, "   ```")
	if !ok {
		t.Fatal("unterminated yaml block in docs/agents.md")
	}
	var lines []string
	for _, l := range strings.Split("   agents:\n"+block, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "   "))
	}
	digest := strings.Repeat("0f", 32)
	t.Setenv("OPS_AGENT_MCP_TOKEN_SHA256", digest)
	cfg, err := Parse([]byte(minimal+strings.Join(lines, "\n")), "docs/agents.md")
	if err != nil {
		t.Fatalf("the config in docs/agents.md does not parse:\n%v", err)
	}
	if a := cfg.Agents[0]; a.MCP.TokenSHA256 != digest || a.InitiatorID() != "U0AGENT" || cfg.MCP.Listen != ":8090" {
		t.Errorf("agent %+v, mcp.listen %q; want the digest from the environment, U0AGENT and :8090", a, cfg.MCP.Listen)
	}
}
