package mcp

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hyperops/hyperops/ops"
)

// ToolGetBudget shows the agent's spend budgets and what their current windows used.
const ToolGetBudget = "get_budget"

// BudgetReader lists an initiator's spend budgets with their use; *engine.Engine implements it. An engine without it
// has no budgets, and get_budget says so.
type BudgetReader interface {
	BudgetsOf(ctx context.Context, who ops.Initiator) ([]ops.BudgetUse, error)
}

// BudgetReply is get_budget's structured answer.
type BudgetReply struct {
	Budgets []BudgetEntry `json:"budgets"`
}

// BudgetEntry is one budget: its limits, its current window and what the window used.
type BudgetEntry struct {
	Name   string     `json:"name"`
	Holder string     `json:"holder"`
	Window string     `json:"window"`
	Limit  ops.Amount `json:"limit"`
	Used   ops.Amount `json:"used"`
	Start  time.Time  `json:"start"`
	Resets time.Time  `json:"resets"`
	Says   string     `json:"says"`
}

func (a *agentServer) addBudgetTool() {
	a.srv.AddTool(&mcp.Tool{Name: ToolGetBudget, Annotations: readOnly,
		Description: "Your spend budgets (budgets[] in HyperOps' config): for each, its limits (US $ of planned cost, GPU-hours, " +
			"GPUs at once), what its current window used, and when it resets. A request over one is refused with E_BUDGET_EXCEEDED.",
		InputSchema: Schema{"type": "object", "additionalProperties": false, "properties": Schema{}}}, a.counted(ToolGetBudget, a.getBudget))
}

func (a *agentServer) getBudget(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	_, err := decodeFollow(req.Params.Arguments)
	var uses []ops.BudgetUse
	if br, ok := a.s.opts.Engine.(BudgetReader); ok && err == nil {
		uses, err = br.BudgetsOf(ctx, a.agent.Initiator)
	}
	if err != nil {
		r := a.reply(ctx, nil, "", err)
		return result(r, r), nil
	}
	out := BudgetReply{Budgets: []BudgetEntry{}}
	text := fmt.Sprintf("%d spend budget(s) count the requests of agent %s.", len(uses), a.agent.Name())
	for _, u := range uses {
		b := u.Budget
		out.Budgets = append(out.Budgets, BudgetEntry{Name: b.Name, Holder: b.Holder, Window: string(b.Window), Limit: b.Limit,
			Used: u.Used, Start: u.Start, Resets: u.End, Says: u.String()})
		text += fmt.Sprintf(" %s: %s; resets %s.", b.Name, u.String(), u.End.UTC().Format(time.RFC3339))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
}
