package handlers

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// BudgetReader answers /hp budget: the viewer's spend budgets and their use. *engine.Engine implements it; an engine
// without it has no budgets to show.
type BudgetReader interface {
	BudgetsOf(ctx context.Context, who ops.Initiator) ([]ops.BudgetUse, error)
}

// budget answers /hp budget to the viewer alone: their budgets are nobody else's business.
func (h *Handler) budget(ctx context.Context, who ops.Initiator, channel string) error {
	var uses []ops.BudgetUse
	if br, ok := h.engine.(BudgetReader); ok {
		var err error
		if uses, err = br.BudgetsOf(ctx, who); err != nil {
			return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
		}
	}
	return h.poster.Ephemeral(ctx, channel, who.ID, BudgetMessage(uses))
}

// BudgetMessage lists spend budgets with what their current windows used and when they reset.
func BudgetMessage(uses []ops.BudgetUse) Msg {
	blocks := []slack.Block{section("*Your spend budgets*")}
	if len(uses) == 0 {
		blocks = append(blocks, contextBlock("No budget counts your requests: nothing limits their planned spend beyond the per-request caps "+
			"(budgets[] in the config; ask a platform lead)."))
		return Msg{Text: "Your spend budgets: none", Blocks: blocks}
	}
	for i, u := range uses {
		if len(blocks) >= maxBlocks-1 {
			blocks = append(blocks, contextBlock(fmt.Sprintf("and %d more", len(uses)-i)))
			break
		}
		b := u.Budget
		blocks = append(blocks, section(fmt.Sprintf("*%s* (%s, per %s)\n%s\nresets %s", escLine(b.Name), escLine(b.Holder), escLine(string(b.Window)),
			escLine(u.String()), u.End.Format("Mon 2 Jan 15:04 MST"))))
	}
	return Msg{Text: fitText(fmt.Sprintf("Your spend budgets: %s", plural(int64(len(uses)), "budget", "budgets"))), Blocks: blocks}
}
