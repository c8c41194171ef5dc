package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// blockText is the mrkdwn or plain text a block shows.
func blockText(b slack.Block) string {
	raw, _ := json.Marshal(b)
	var m struct {
		Text   struct{ Text string }   `json:"text"`
		Fields []struct{ Text string } `json:"fields"`
		Elems  []struct{ Text string } `json:"elements"`
	}
	_ = json.Unmarshal(raw, &m)
	parts := []string{m.Text.Text}
	for _, f := range m.Fields {
		parts = append(parts, f.Text)
	}
	if b.BlockType() == slack.MBTContext {
		for _, e := range m.Elems {
			parts = append(parts, e.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// A lead decides from what is above the buttons: cost, risk, who asked, who approves, all before any diff or
// manifest, and short enough to read in five seconds.
func TestPlanDecisionFirst(t *testing.T) {
	for name, rec := range map[string]*ops.Record{"training": trainingRecord(), "inference": inferenceRecord(),
		"capacity": capacityRecord(), "delete-storage": deleteStorageRecord(), "drift": driftRecord()} {
		t.Run(name, func(t *testing.T) {
			m := PlanMessage(opSpecs, rec).Msg
			order := map[string]int{}
			var before strings.Builder
			buttonsAt := -1
			for i, b := range m.Blocks {
				text := blockText(b)
				if b.BlockType() == slack.MBTAction && buttonsAt < 0 {
					buttonsAt = i
					order["buttons"] = i
				}
				if buttonsAt < 0 {
					before.WriteString(text)
				}
				for _, k := range []string{"*Cost*", "*Risk*", "*Asked by*", "*Needs*", "*Changes*", "apiVersion", "```"} {
					if _, seen := order[k]; !seen && strings.Contains(text, k) {
						order[k] = i
					}
				}
			}
			for _, k := range []string{"*Cost*", "*Risk*", "*Asked by*", "*Needs*", "buttons", "*Changes*"} {
				if _, ok := order[k]; !ok {
					t.Fatalf("no %s block in %s", k, blocksJSON(m))
				}
			}
			for _, early := range []string{"*Cost*", "*Risk*", "*Asked by*", "*Needs*"} {
				if order[early] >= order["buttons"] {
					t.Errorf("%s (block %d) comes after the buttons (block %d)", early, order[early], order["buttons"])
				}
			}
			for _, late := range []string{"*Changes*", "apiVersion", "```"} {
				if i, ok := order[late]; ok && i < order["buttons"] {
					t.Errorf("%s (block %d) comes before the buttons (block %d)", late, i, order["buttons"])
				}
			}
			if _, ok := order["apiVersion"]; ok {
				t.Errorf("the manifest is inline; it belongs behind Details")
			}
			if n := len([]rune(before.String())); n >= 600 {
				t.Errorf("%d characters before the buttons, want under 600:\n%s", n, before.String())
			}
			if !strings.Contains(before.String(), "<!subteam^S0LEADS>") {
				t.Errorf("the approvers are not mentioned: %s", before.String())
			}
			if !strings.Contains(before.String(), "<!date^") {
				t.Errorf("the expiry is not a Slack date: %s", before.String())
			}
		})
	}
}

func blocksJSON(m Msg) string {
	b, _ := json.Marshal(m.Blocks)
	return string(b)
}

func findButton(m Msg, action string) *slack.ButtonBlockElement {
	for _, b := range m.Blocks {
		if a, ok := b.(*slack.ActionBlock); ok {
			for _, e := range a.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok && btn.ActionID == action {
					return btn
				}
			}
		}
	}
	return nil
}

func TestApproveConfirmsHighRisk(t *testing.T) {
	tests := []struct {
		name    string
		rec     *ops.Record
		confirm bool
	}{
		{"high risk training asks to confirm", trainingRecord(), true},
		{"medium risk inference does not", inferenceRecord(), false},
		// delete-storage's Approve opens the typed-name modal instead of a second dialog
		{"delete-storage confirms in its own modal", deleteStorageRecord(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := findButton(PlanMessage(opSpecs, tc.rec).Msg, ActionApprove)
			if b == nil {
				t.Fatal("no Approve button")
			}
			if b.Style != slack.StylePrimary {
				t.Errorf("Approve style %q, want primary", b.Style)
			}
			if (b.Confirm != nil) != tc.confirm {
				t.Errorf("confirm = %v, want %v", b.Confirm != nil, tc.confirm)
			}
			if b.Confirm != nil && !strings.Contains(b.Confirm.Text.Text, "high risk") {
				t.Errorf("the confirm dialog does not say why: %q", b.Confirm.Text.Text)
			}
		})
	}
}

func TestDeniedShowsReason(t *testing.T) {
	rec := trainingRecord()
	rec.Phase = ops.PhaseDenied
	rec.Approval.Votes = append(rec.Approval.Votes, ops.Vote{Voter: ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}, PlanHash: rec.Plan.Hash,
		Reason: "use <!channel> 1 replica"})
	head := blockText(PlanMessage(opSpecs, rec).Msg.Blocks[0])
	for _, want := range []string{"*Denied* by <@U0LEAD1>", "use &lt;!channel&gt; 1 replica", "<@U0ALICE>"} {
		if !strings.Contains(head, want) {
			t.Errorf("headline lacks %q: %s", want, head)
		}
	}
	if findButton(PlanMessage(opSpecs, rec).Msg, ActionApprove) != nil {
		t.Error("a denied request still offers Approve")
	}
}

func TestHumanize(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{money(2713.634), "$2,713.63"}, {money(162817.92), "$162,818"}, {money(0.5), "$0.50"}, {signedMoney(-14.18), "−$14.18"},
		{hours(12), "12 h"}, {hours(1.5), "1 h 30 min"}, {hours(0.25), "15 min"}, {hours(72), "3 days"},
		{joinWords([]string{"a", "b", "c"}), "a, b and c"}, {count(1234567), "1,234,567"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
