package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// The Deny modal: an optional reason, recorded on the vote and shown on the message.
const (
	DenyCallback = "hp_deny_reason"
	denyBlock    = "reason"
	denyAction   = "reason_text"
	// maxDenyReason is how long a reason may be (Slack's input enforces it).
	maxDenyReason = 500
)

// modalMeta is a modal's private metadata: which request, and where its message is.
type modalMeta struct {
	RequestID string `json:"id"`
	Channel   string `json:"channel"`
	TS        string `json:"ts"`
}

func (h *Handler) openDeny(ctx context.Context, trigger string, rec *ops.Record, channel, ts string) error {
	meta, _ := json.Marshal(modalMeta{RequestID: rec.ID(), Channel: channel, TS: ts})
	return h.poster.OpenView(ctx, trigger, DenyModal(h.catalog, rec, string(meta)))
}

// DenyModal renders the modal a Deny click opens: what is denied, and an optional reason for the requester.
func DenyModal(specs Specs, rec *ops.Record, privateMetadata string) slack.ModalViewRequest {
	input := slack.NewPlainTextInputBlockElement(plain("e.g. too expensive this week; use 2 replicas"), denyAction)
	input.Multiline = true
	input.MaxLength = maxDenyReason
	in := slack.NewInputBlock(denyBlock, plain("Reason (optional, shown to the requester)"), nil, input)
	in.Optional = true
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: DenyCallback, PrivateMetadata: privateMetadata,
		Title: plain("Deny request"), Submit: plain("Deny"), Close: plain("Back"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			section(":no_entry_sign: Deny: " + headline(rec, specOf(specs, rec)) + "\nAsked by " + person(rec.Request.Initiator) + ". Nothing will run; the request ends."),
			in,
		}},
	}
}

func (h *Handler) denySubmitted(ctx context.Context, cb slack.InteractionCallback) error {
	return h.submitOutsideModal(ctx, cb)
}

// denySubmission reads the Deny modal: the vote against, with the reason, is refused under the reason.
func (h *Handler) denySubmission(cb slack.InteractionCallback) (submission, error) {
	var meta modalMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		return submission{}, fmt.Errorf("read the deny form: %w", err)
	}
	var reason string
	if cb.View.State != nil {
		reason = strings.TrimSpace(cb.View.State.Values[denyBlock][denyAction].Value)
	}
	voter := h.initiator(cb.User.ID, cb.User.Name)
	return submission{block: denyBlock, channel: meta.Channel, ts: meta.TS, decide: func(ctx context.Context) (*ops.Record, error) {
		return h.engine.DenyWithReason(ctx, meta.RequestID, voter, clip(reason, maxDenyReason))
	}}, nil
}

// maxModalText is how much manifest and diff the Details modal shows before pointing at the thread's files.
const maxModalText = 12000

// DetailsModal renders what a lead may want before deciding but not above the buttons: every risk reason, the
// cost lines and price source, the approval rule, the full diff and the manifest.
func DetailsModal(specs Specs, rec *ops.Record) slack.ModalViewRequest {
	blocks := []slack.Block{section(headline(rec, specOf(specs, rec)))}
	if p := rec.Plan; p != nil {
		blocks = append(blocks, section("*Risk* "+riskEmoji[p.Risk.Level]+" "+p.Risk.Level.String()+"\n"+reasonLines(p.Risk)))
		blocks = append(blocks, section("*Cost* (estimate)\n"+costLines(p.Cost)))
		if rule := rec.Approval.Rule; rule != "" {
			blocks = append(blocks, section("*Approval rule*\n"+escLine(rule)))
		}
		if p.RunsAs != "" {
			blocks = append(blocks, section("*Runs as*\n"+escLine(p.RunsAs)))
		}
		blocks = append(blocks, longText("Diff", fullDiff(p.Changes), rec.ID()+"-diff.txt")...)
		if len(p.Drift) > 0 {
			blocks = append(blocks, longText("Drift", driftText(p.Drift), rec.ID()+"-drift.txt")...)
		}
		blocks = append(blocks, longText("Manifest", p.Manifest, rec.ID()+"-manifest.yaml")...)
	}
	blocks = append(blocks, contextBlock(footer(rec, false)))
	return slack.ModalViewRequest{Type: slack.VTModal, Title: plain("Request details"), Close: plain("Close"),
		Blocks: slack.Blocks{BlockSet: blocks}}
}

func reasonLines(r ops.Risk) string {
	if len(r.Reasons) == 0 {
		return "no reason above the operation's baseline"
	}
	lines := make([]string, 0, len(r.Reasons))
	for _, x := range r.Reasons {
		lines = append(lines, riskEmoji[x.Level]+" "+escLine(x.Text))
	}
	return strings.Join(lines, "\n")
}

func costLines(c ops.Cost) string {
	var lines []string
	for _, l := range c.Lines {
		lines = append(lines, fmt.Sprintf("• %s: %s × %s/%s = %s/h", escLine(l.Item), trimFloat(l.Quantity), money(l.UnitPrice), escLine(l.Unit), money(l.Hourly)))
	}
	if c.Total > 0 {
		lines = append(lines, "• at most "+money(c.Total)+" "+escLine(c.TotalBasis))
	}
	if c.HourlyDelta != 0 && c.Total == 0 {
		lines = append(lines, "• "+signedMoney(c.HourlyDelta)+"/h, "+signedMoney(c.MonthlyDelta)+" per 30 days")
	}
	if c.PricedAt != "" {
		l := "• " + escLine(c.PricedAt)
		if len(c.MayLandOn) > 0 {
			l += " (by price per GPU, of " + joinWords(escAll(c.MayLandOn)) + ")"
		}
		lines = append(lines, l)
	}
	if len(c.Unknown) > 0 {
		lines = append(lines, "• no price for "+joinWords(escAll(c.Unknown)))
	}
	if c.Source != "" {
		lines = append(lines, "_prices: "+escLine(c.Source)+"_")
	}
	if len(lines) == 0 {
		return "no cost"
	}
	return strings.Join(lines, "\n")
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.3f", f)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// longText shows a text in chunks a section can hold, or says which file of the thread has it.
func longText(title, text, file string) []slack.Block {
	if text == "" {
		return nil
	}
	if len([]rune(text)) > maxModalText {
		return []slack.Block{section(fmt.Sprintf("*%s*\ntoo long to show here: it is attached in the message's thread as %s", title, code(file)))}
	}
	blocks := []slack.Block{section("*" + title + "*")}
	r := []rune(text)
	for len(r) > 0 {
		n := min(len(r), 2800)
		if i := strings.LastIndex(string(r[:n]), "\n"); i > 0 && n < len(r) {
			n = len([]rune(string(r[:n])[:i])) + 1
		}
		blocks = append(blocks, section(codeBlock(string(r[:n]))))
		r = r[n:]
	}
	return blocks
}
