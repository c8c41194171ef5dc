package mcp

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

func TestAgentsFromConfig(t *testing.T) {
	d := sha("secret")
	cfg := &config.Config{Agents: []config.Agent{
		{Name: "dm-only", SlackUser: "U0DM", Operations: []string{"get-*"}},
		{Name: "both", SlackUser: "U0BOTH", MCP: config.AgentMCP{TokenSHA256: strings.ToUpper(hex.EncodeToString(d[:]))}, Operations: []string{"get-*"}},
		{Name: "mcp-only", MCP: config.AgentMCP{TokenSHA256: strings.Repeat("0a", 32)}, Operations: []string{"submit-*"}},
	}}
	agents, err := AgentsFrom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(agents) != 2 {
		t.Fatalf("agents = %+v, want the two with a token", agents)
	}
	if a := agents[0]; a.Initiator != (ops.Initiator{Kind: ops.Agent, ID: "U0BOTH", Name: "both"}) || a.digest != d {
		t.Errorf("agent with a Slack user = %+v, want its DM identity and the digest (any case)", a)
	}
	if a := agents[1]; a.Initiator.ID != "agent:mcp-only" || !a.Allows("submit-training-job") || a.Allows("get-request") {
		t.Errorf("MCP-only agent = %+v, want agent:mcp-only with its globs", a)
	}
	cfg.Agents[2].MCP.TokenSHA256 = "not-hex"
	if _, err := AgentsFrom(cfg); err == nil {
		t.Error("a malformed digest was accepted")
	}
}
