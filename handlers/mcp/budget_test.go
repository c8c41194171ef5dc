package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/ops"
)

// budgetRecord is oneRecord with budgets: it answers BudgetsOf for the agent it knows, and records who asked.
type budgetRecord struct {
	oneRecord
	asked *[]string
}

func (e budgetRecord) BudgetsOf(_ context.Context, who ops.Initiator) ([]ops.BudgetUse, error) {
	*e.asked = append(*e.asked, who.ID)
	end := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	return []ops.BudgetUse{{Budget: ops.BudgetLimit{Name: "ops-agent-daily", Path: "budgets[0]", Holder: "ci-agent", Window: ops.WindowDay,
		Limit: ops.Amount{Cost: 1000}}, Start: end.Add(-24 * time.Hour), End: end, Used: ops.Amount{Cost: 800}}}, nil
}

// get_budget, through the MCP SDK's client, answers the calling agent's budgets with their use and reset time, and
// refuses an argument it does not take.
func TestGetBudgetOverMCP(t *testing.T) {
	agent := ops.Initiator{Kind: ops.Agent, ID: "agent:ci-agent", Name: "ci-agent"}
	var asked []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := agentSession(ctx, t, agent, budgetRecord{oneRecord: oneRecord{&ops.Record{Request: ops.Request{ID: "r-1"}}}, asked: &asked})

	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: ToolGetBudget, Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("get_budget = %+v, %v", res, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var r BudgetReply
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Budgets) != 1 {
		t.Fatalf("get_budget answered %s (%v), want one budget", raw, err)
	}
	b := r.Budgets[0]
	if b.Name != "ops-agent-daily" || b.Used.Cost != 800 || b.Limit.Cost != 1000 || !b.Resets.Equal(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)) ||
		b.Says != "$800 of $1,000 today ($200 left)" {
		t.Errorf("budget = %+v", b)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "$800 of $1,000 today") || !strings.Contains(text, "2026-12-04T00:00:00Z") {
		t.Errorf("summary %q lacks the use and the reset", text)
	}
	if len(asked) != 1 || asked[0] != agent.ID {
		t.Errorf("budgets asked for %v, want the calling agent only", asked)
	}

	bad, err := s.CallTool(ctx, &mcp.CallToolParams{Name: ToolGetBudget, Arguments: map[string]any{"agent": "someone-else"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bad.IsError || !strings.Contains(bad.Content[0].(*mcp.TextContent).Text, "agent") {
		t.Errorf("get_budget with another agent's name = %+v, want a refusal naming the argument", bad.Content)
	}
	if len(asked) != 1 {
		t.Errorf("a refused call read the budgets: %v", asked)
	}
}
