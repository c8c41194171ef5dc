package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// Break-glass (engine.Engine.BreakGlass): a requester on call approves their own request alone, with a reason. The
// plan message offers "Break glass…" when the request's rule names an on-call group; the click is checked again
// (MayBreakGlass) before the modal asks for the reason, and the engine checks everything again on submit. The
// outbox then posts, once, a new notice mentioning every approver — in the approvals channel, else the request's
// channel — with an Acknowledge button that only a lead may press, a reply in the request's thread, and the audit
// line with the badge. The acknowledgement updates the notice and tells the person who broke glass, by a new reply
// that mentions them, that they may break glass again.
const (
	ActionBreakGlass       = "hp_break_glass"
	ActionAcknowledgeGlass = "hp_glass_ack"
	// BreakGlassCallback is the modal that asks for the reason.
	BreakGlassCallback = "hp_break_glass_reason"
	glassBlock         = "reason"
	glassAction        = "glass_reason"
	// RefGlass is the break-glass notice, updated when a lead acknowledges it.
	RefGlass RefKind = "glass"
	// GlassBadge marks every message about a break-glass.
	GlassBadge = "🔨 BREAK-GLASS"
)

// GlassEngine is the engine's break-glass (engine.Engine implements it). An engine without it offers no break-glass.
type GlassEngine interface {
	MayBreakGlass(ctx context.Context, rec *ops.Record, who ops.Initiator) (*ops.Record, error)
	BreakGlass(ctx context.Context, id string, who ops.Initiator, reason string) (*ops.Record, error)
	AcknowledgeBreakGlass(ctx context.Context, id string, who ops.Initiator) (*ops.Record, error)
}

func (h *Handler) glassEngine() (GlassEngine, error) {
	if g, ok := h.engine.(GlassEngine); ok {
		return g, nil
	}
	return nil, ops.Errorf(ops.CodeNotAuthorized, "", "wait for its approvers", "break-glass is not available here")
}

// breakGlassClicked checks the click again and, when who may break glass, asks for the reason.
func (h *Handler) breakGlassClicked(ctx context.Context, trigger string, rec *ops.Record, who ops.Initiator, channel, ts string) error {
	g, err := h.glassEngine()
	if err == nil {
		rec, err = g.MayBreakGlass(ctx, rec, who)
	}
	if err != nil {
		return h.answerClick(ctx, rec, err, channel, ts, who.ID)
	}
	meta, _ := json.Marshal(modalMeta{RequestID: rec.ID(), Channel: channel, TS: ts})
	return h.poster.OpenView(ctx, trigger, BreakGlassModal(h.catalog, rec, string(meta)))
}

// BreakGlassModal renders the modal a Break glass… click opens: what is approved alone, what follows, and the
// reason, required.
func BreakGlassModal(specs Specs, rec *ops.Record, privateMetadata string) slack.ModalViewRequest {
	input := slack.NewPlainTextInputBlockElement(plain("e.g. fraud-scorer is down in production, scaling it back now"), glassAction)
	input.Multiline = true
	input.MaxLength = ops.MaxBreakGlassReason
	in := slack.NewInputBlock(glassBlock, plain("Why can it not wait? (required, shown to every approver)"), nil, input)
	a := rec.Approval
	body := fmt.Sprintf("*%s*: you approve this yourself, now, without a vote:\n%s\n"+
		"Every approver and the audit channel are told at once, with your reason. You cannot break glass again until a lead of %s acknowledges this one.",
		GlassBadge, headline(rec, specOf(specs, rec)), code(a.Approvers))
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: BreakGlassCallback, PrivateMetadata: privateMetadata,
		Title: plain("Break glass"), Submit: plain("Break glass"), Close: plain("Back"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{section(body), in}},
	}
}

func glassReason(cb slack.InteractionCallback) string {
	if cb.View.State == nil {
		return ""
	}
	return strings.TrimSpace(cb.View.State.Values[glassBlock][glassAction].Value)
}

func (h *Handler) glassSubmitted(ctx context.Context, cb slack.InteractionCallback) error {
	return h.submitOutsideModal(ctx, cb)
}

// glassSubmission reads the break-glass modal: a refusal (not on call any more, an earlier break-glass not
// acknowledged, the request decided meanwhile) is shown under the reason.
func (h *Handler) glassSubmission(cb slack.InteractionCallback) (submission, error) {
	var meta modalMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		return submission{}, fmt.Errorf("read the break-glass form: %w", err)
	}
	who := h.initiator(cb.User.ID, cb.User.Name)
	reason := glassReason(cb)
	return submission{block: glassBlock, channel: meta.Channel, ts: meta.TS, decide: func(ctx context.Context) (*ops.Record, error) {
		g, err := h.glassEngine()
		if err != nil {
			return nil, err
		}
		return g.BreakGlass(ctx, meta.RequestID, who, reason)
	}}, nil
}

// acknowledgeGlass records a lead's acknowledgement; the outbox updates the notice. Only a refusal is answered
// here, privately.
func (h *Handler) acknowledgeGlass(ctx context.Context, id string, who ops.Initiator, channel string) error {
	g, err := h.glassEngine()
	if err == nil {
		_, err = g.AcknowledgeBreakGlass(ctx, id, who)
	}
	if err != nil {
		return h.tellClicker(ctx, channel, who.ID, ErrorMessage(err))
	}
	return nil
}

// glassMentions are the notice's mentions: every approver of the request (its group's user groups and users, and
// the group it was escalated to), but the person who broke glass.
func glassMentions(rec *ops.Record) []string {
	a := rec.Approval
	var out []string
	seen := map[string]bool{}
	add := func(m string) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	groups, users := a.ApproverUserGroups, a.ApproverUsers
	if a.Escalated {
		groups, users = append(append([]string{}, groups...), a.EscalateUserGroups...), append(append([]string{}, users...), a.EscalateUsers...)
	}
	for _, g := range groups {
		if slackID(g) {
			add(groupMention(g))
		}
	}
	for _, u := range users {
		if slackID(u) && (rec.BreakGlass == nil || u != rec.BreakGlass.By.ID) {
			add(mention(u))
		}
	}
	return out
}

// BreakGlassNotice renders the new message that tells every approver of a break-glass: who broke glass on what,
// its risk and cost, the reason, and the Acknowledge button — or, once acknowledged, who acknowledged it.
func BreakGlassNotice(specs Specs, rec *ops.Record) Msg {
	bg := rec.BreakGlass
	op := specOf(specs, rec)
	a := rec.Approval
	lead := fmt.Sprintf("*%s* %s approved their own request alone, on call (%s), without the %s of %s it needed:\n%s",
		GlassBadge, person(bg.By), code(bg.Group), plural(int64(a.Required), "approval", "approvals"), code(a.Approvers), headline(rec, op))
	blocks := []slack.Block{}
	m := addressed(glassMentions(rec), escText(fmt.Sprintf("%s: %s approved %s alone — %s", GlassBadge, display(bg.By), rec.ID(), oneLine(plainHeadline(rec, op)))), lead)
	blocks = append(blocks, m.Blocks...)
	if rec.Plan != nil {
		blocks = append(blocks, fieldsSection("*Risk*\n"+riskField(rec.Plan.Risk), "*Cost*\n"+costText(rec)))
	}
	blocks = append(blocks, section("*Reason*\n"+escLine(bg.Reason)))
	if by := bg.AcknowledgedBy; by != nil {
		blocks = append(blocks, section(fmt.Sprintf(":white_check_mark: *Acknowledged* by %s %s: %s may break glass again.",
			person(*by), slackTime(bg.AcknowledgedAt), person(bg.By))))
	} else {
		ack := slack.NewButtonBlockElement(ActionAcknowledgeGlass, rec.ID(), plain("Acknowledge"))
		ack.Style = slack.StylePrimary
		blocks = append(blocks, section(fmt.Sprintf("A lead of %s acknowledges it here; until then %s cannot break glass again.",
			code(a.Approvers), person(bg.By))), slack.NewActionBlock("glass", ack))
	}
	blocks = append(blocks, contextBlock(fmt.Sprintf("request %s · broke glass %s · %s", code(rec.ID()), slackTime(bg.At), escLine(rec.Request.Operation))))
	m.Blocks = capBlocks(blocks)
	m.Version = rec.Version
	return m
}

func display(i ops.Initiator) string {
	if i.Name != "" {
		return i.Name
	}
	return i.ID
}

// BreakGlassReply renders the request thread's reply to the break-glass: approved alone, the reason, where the
// approvers were told.
func BreakGlassReply(rec *ops.Record, noticeChannel string) Msg {
	bg := rec.BreakGlass
	where := ""
	if noticeChannel != "" {
		where = " in <#" + noticeChannel + ">"
	}
	s := fmt.Sprintf("*%s*: approved by %s alone, on call (%s): _%s_\nEvery approver was told%s; %s cannot break glass again until a lead of %s acknowledges it.",
		GlassBadge, person(bg.By), code(bg.Group), escLine(bg.Reason), where, person(bg.By), code(rec.Approval.Approvers))
	return Msg{Text: escText(fmt.Sprintf("%s: %s approved %s alone", GlassBadge, display(bg.By), rec.ID())), Blocks: []slack.Block{section(s)}}
}

// GlassAckReply renders the reply that tells the person who broke glass, mentioning them, that a lead acknowledged
// it and they may break glass again.
func GlassAckReply(rec *ops.Record) Msg {
	bg := rec.BreakGlass
	by := "a lead"
	if bg.AcknowledgedBy != nil {
		by = person(*bg.AcknowledgedBy)
	}
	body := fmt.Sprintf(":white_check_mark: Your *%s* on this request was acknowledged by %s: you may break glass again.", GlassBadge, by)
	return addressed([]string{person(bg.By)}, escText(fmt.Sprintf("%s: your break-glass was acknowledged", rec.ID())), body)
}

// glassLine is the plan message's line about a break-glass, under the status.
func glassLine(rec *ops.Record) string {
	bg := rec.BreakGlass
	if bg == nil {
		return ""
	}
	s := fmt.Sprintf("\n*%s* by %s (on call, %s): _%s_", GlassBadge, person(bg.By), code(bg.Group), escLine(bg.Reason))
	if bg.AcknowledgedBy != nil {
		return s + " · acknowledged by " + person(*bg.AcknowledgedBy)
	}
	return s + " · not acknowledged yet"
}

// lastKind is the latest message of kind k: a request broken again after its plan changed has a notice per
// break-glass, and its acknowledgement is the latest one's.
func lastKind(refs []MessageRef, k RefKind) (MessageRef, bool) {
	for i := len(refs) - 1; i >= 0; i-- {
		if refs[i].Kind == k {
			return refs[i], true
		}
	}
	return MessageRef{}, false
}

// noticeChannel is where a break-glass notice goes: the approvals channel, else the request's own.
func (h *Handler) noticeChannel(plan MessageRef) string {
	if h.cfg.ApprovalsChannel != "" {
		return h.cfg.ApprovalsChannel
	}
	return plan.Channel
}

// tellGlass tells the entry that broke glass: the notice (posted once, found by its metadata after a lost answer,
// remembered as RefGlass for the acknowledgement), then the reply in the request's thread.
func (tl *Teller) tellGlass(ctx context.Context, rec *ops.Record, i int, plan MessageRef) error {
	h := tl.h
	channel := h.noticeChannel(plan)
	ts, found, err := tl.deliver(ctx, rec, i, part{name: "glass", channel: channel, msg: BreakGlassNotice(h.catalog, rec)})
	if _, ok := refused(err); !ok && err != nil {
		return err
	}
	if err == nil && found && ts == "" {
		if ts, err = tl.findPosted(ctx, rec, i, "glass", channel, ""); err != nil {
			return err
		}
	}
	if ts != "" {
		if err := h.refs.Add(ctx, rec.ID(), MessageRef{Kind: RefGlass, Channel: channel, TS: ts}); err != nil {
			return fmt.Errorf("remember the break-glass notice of %s: %w", rec.ID(), err)
		}
	}
	reply := BreakGlassReply(rec, channel)
	if channel == plan.Channel {
		reply = BreakGlassReply(rec, "")
	}
	reply.Background = true
	_, _, err = tl.deliver(ctx, rec, i, part{name: "reply", channel: plan.Channel, thread: plan.TS, msg: reply})
	if slackCode, ok := refused(err); ok {
		return tl.fallback(ctx, rec, i, plan.Channel, slackCode, reply)
	}
	return err
}

// tellGlassAck tells an acknowledgement: the notice is updated (its button gone), and the person who broke glass
// is told by a new reply that mentions them.
func (tl *Teller) tellGlassAck(ctx context.Context, rec *ops.Record, i int, plan MessageRef) error {
	refs, err := tl.h.refs.List(ctx, rec.ID())
	if err != nil {
		return fmt.Errorf("list the messages of %s: %w", rec.ID(), err)
	}
	if notice, ok := lastKind(refs, RefGlass); ok {
		if err := tl.update(ctx, rec, notice, BreakGlassNotice(tl.h.catalog, rec)); err != nil {
			return err
		}
	}
	reply := GlassAckReply(rec)
	_, _, err = tl.deliver(ctx, rec, i, part{name: "reply", channel: plan.Channel, thread: plan.TS, msg: reply})
	if slackCode, ok := refused(err); ok {
		return tl.fallback(ctx, rec, i, plan.Channel, slackCode, reply)
	}
	return err
}
