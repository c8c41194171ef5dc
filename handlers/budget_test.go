package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// budgetEngine answers BudgetsOf with uses (or err) and records who asked.
type budgetEngine struct {
	Engine
	uses  []ops.BudgetUse
	err   error
	asked []string
}

func (e *budgetEngine) BudgetsOf(_ context.Context, who ops.Initiator) ([]ops.BudgetUse, error) {
	e.asked = append(e.asked, who.ID)
	return e.uses, e.err
}

// privatePoster records whom each ephemeral message was for.
type privatePoster struct {
	recordPoster
	to []string
}

func (p *privatePoster) Ephemeral(ctx context.Context, channel, user string, m Msg) error {
	p.to = append(p.to, user)
	return p.recordPoster.Ephemeral(ctx, channel, user, m)
}

func sampleBudgetUses() []ops.BudgetUse {
	end := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	return []ops.BudgetUse{
		{Budget: ops.BudgetLimit{Name: "ops-agent-daily", Path: "budgets[0]", Holder: "ops-agent", Window: ops.WindowDay,
			Limit: ops.Amount{Cost: 1000, GPUs: 16}}, Start: end.Add(-24 * time.Hour), End: end, Used: ops.Amount{Cost: 800, GPUs: 8}},
		{Budget: ops.BudgetLimit{Name: "ml-<!channel>-monthly", Path: "budgets[1]", Holder: "ml-platform", Window: ops.WindowMonth,
			Limit: ops.Amount{GPUHours: 500}}, Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
			End: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Used: ops.Amount{GPUHours: 120}},
	}
}

func TestSlashBudgetAnswersTheViewerAlone(t *testing.T) {
	for _, channel := range []string{"C0OPS", "D0ALICE"} { // read-only: a DM answers it too
		t.Run(channel, func(t *testing.T) {
			eng := &budgetEngine{uses: sampleBudgetUses()}
			p := &privatePoster{}
			h := New(Config{Channels: []string{"C0OPS"}}, eng, everyone{}, testCatalog(), p, &memRefs{}, nil)
			if err := h.Slash(context.Background(), slack.SlashCommand{Command: "/hp", Text: "budget", UserID: "U0ALICE", ChannelID: channel}); err != nil {
				t.Fatal(err)
			}
			if len(eng.asked) != 1 || eng.asked[0] != "U0ALICE" || len(p.to) != 1 || p.to[0] != "U0ALICE" {
				t.Fatalf("asked for %v, answered privately to %v; want U0ALICE once each", eng.asked, p.to)
			}
			got := p.last(t)
			for _, want := range []string{"$800 of $1,000 today ($200 left)", "8 of 16 GPUs at once", "120 of 500 GPU-hours",
				"resets Fri 4 Dec 00:00 UTC", `ml-\u0026lt;!channel\u0026gt;-monthly`} {
				if !strings.Contains(got, want) {
					t.Errorf("answer lacks %q: %s", want, got)
				}
			}
			if strings.Contains(got, "<!channel>") {
				t.Errorf("a budget's name reached Slack unescaped: %s", got)
			}
		})
	}
}

func TestSlashBudgetSaysWhenThereIsNoneOrTheLedgerIsDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"none", nil, "No budget counts your requests"},
		{"ledger down", ops.Errorf(ops.CodeStateUnavailable, "", "try again in a minute", "the spend budgets cannot be read"), string(ops.CodeStateUnavailable)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &privatePoster{}
			h := New(Config{Channels: []string{"C0OPS"}}, &budgetEngine{err: tc.err}, everyone{}, testCatalog(), p, &memRefs{}, nil)
			if err := h.Slash(context.Background(), slack.SlashCommand{Command: "/hp", Text: "budget", UserID: "U0ALICE", ChannelID: "C0OPS"}); err != nil {
				t.Fatal(err)
			}
			if got := p.last(t); !strings.Contains(got, tc.want) {
				t.Errorf("answer lacks %q: %s", tc.want, got)
			}
		})
	}
}
