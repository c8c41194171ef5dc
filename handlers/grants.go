package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/grants"
)

// Standing grants (grants.Grant). A plan message awaiting one approval offers "Approve and allow similar…" in its
// menu; the click is checked (MayGrant) before the form opens, prefilled from the request, and the engine checks
// everything again on submit (ApproveAndGrant: the same checks as Approve). Each use is told in the thread of the
// request it was given on, by the outbox (the teller of the request it approved); a revocation is told there too.
// /hp grants lists the viewer's grants with a Revoke button each; /hp grants revoke id= revokes one.
const (
	// ActionGrant is the plan message's menu entry that opens the grant form.
	ActionGrant = "hp_grant"
	// ActionRevokeGrant is the Revoke button of a listed grant; its value is the grant id.
	ActionRevokeGrant = "hp_grant_revoke"
	// GrantCallback is the grant form.
	GrantCallback = "hp_grant_form"
	// GrantModalTitle is the grant form's title: Slack refuses a modal whose title is over 24 characters, so it is
	// not the menu entry's "Approve and allow similar…" (25 without the ellipsis).
	GrantModalTitle = "Approve & allow similar"
	// GrantBadge marks the messages about a grant.
	GrantBadge = "🎫"
)

// The grant form's blocks (one input each; the block id is the field Slack shows an error under).
const (
	grantTargetBlock = "grant_target"
	grantSizeBlock   = "grant_size"
	grantHourlyBlock = "grant_hourly"
	grantTotalBlock  = "grant_total"
	grantUsesBlock   = "grant_uses"
	grantHoursBlock  = "grant_hours"
	grantInput       = "value"
)

// grantFieldBlocks maps grants.Validate's fields to the form's blocks.
var grantFieldBlocks = map[string]string{"target": grantTargetBlock, "maxSize": grantSizeBlock, "maxHourly": grantHourlyBlock,
	"maxTotal": grantTotalBlock, "uses": grantUsesBlock, "hours": grantHoursBlock}

// GrantEngine is the engine's standing grants (engine.Engine implements it). App Home lists them with VisibleGrants and
// revokes one with RevokeGrant, as /hp grants does.
type GrantEngine interface {
	MayGrant(ctx context.Context, rec *ops.Record, who ops.Initiator) error
	ApproveAndGrant(ctx context.Context, id string, who ops.Initiator, planHash string, spec grants.Spec) (*ops.Record, *grants.Grant, error)
	VisibleGrants(ctx context.Context, viewer ops.Initiator) ([]grants.Grant, error)
	RevokeGrant(ctx context.Context, id string, who ops.Initiator) (grants.Grant, bool, error)
}

func (h *Handler) grantEngine() (GrantEngine, error) {
	if g, ok := h.engine.(GrantEngine); ok {
		return g, nil
	}
	return nil, ops.Errorf(ops.CodeNotAuthorized, "", "approve it without a grant", "grants are not available here")
}

// grantMeta is the form's private metadata: the request, the plan shown, where the click came from, and what the
// form is checked against without reading the request again.
type grantMeta struct {
	RequestID string `json:"id"`
	PlanHash  string `json:"plan"`
	Channel   string `json:"channel"`
	TS        string `json:"ts"`
	Subject   string `json:"subject"`
	Sized     bool   `json:"sized,omitempty"`
}

// grantClicked checks the click and, when who may approve the request and give a grant on it, opens the form.
func (h *Handler) grantClicked(ctx context.Context, trigger string, rec *ops.Record, who ops.Initiator, channel, ts string) error {
	g, err := h.grantEngine()
	if err == nil {
		err = g.MayGrant(ctx, rec, who)
	}
	if err != nil {
		return h.answerClick(ctx, rec, err, channel, ts, who.ID)
	}
	if plan, ok := h.planRef(ctx, rec.ID()); ok {
		channel, ts = plan.Channel, plan.TS // uses are told in the request's own thread
	}
	_, sized := grants.Size(rec.Plan)
	meta, _ := json.Marshal(grantMeta{RequestID: rec.ID(), PlanHash: rec.Approval.PlanHash, Channel: channel, TS: ts,
		Subject: grants.Subject(rec.Request), Sized: sized})
	return h.poster.OpenView(ctx, trigger, GrantModal(h.catalog, rec, string(meta)))
}

// planRef is the request's plan message, when it is known.
func (h *Handler) planRef(ctx context.Context, id string) (MessageRef, bool) {
	refs, err := h.refs.List(ctx, id)
	if err != nil {
		return MessageRef{}, false
	}
	return findKind(refs, RefPlan)
}

// grantPattern is the target pattern the form suggests: the subject's prefix up to its last dash, with *
// (ng-03 → ng-*), else the subject itself.
func grantPattern(subject string) string {
	if i := strings.LastIndex(subject, "-"); i > 0 {
		return subject[:i+1] + "*"
	}
	return subject
}

// GrantModal renders the form "Approve and allow similar…" opens, prefilled from rec: the target pattern, the size
// cap (the change's own size), the $/h and total caps (the plan's, rounded up), 5 uses, 2 hours.
func GrantModal(specs Specs, rec *ops.Record, privateMetadata string) slack.ModalViewRequest {
	size, sized := grants.Size(rec.Plan)
	hourly, total := 0.0, 0.0
	if rec.Plan != nil {
		hourly, total = math.Ceil(max(rec.Plan.Cost.HourlyDelta, 0)), math.Ceil(max(rec.Plan.Cost.Total, 0))
	}
	input := func(block, label, initial, placeholder, hint string, optional bool) *slack.InputBlock {
		el := slack.NewPlainTextInputBlockElement(plain(placeholder), grantInput)
		el.InitialValue = initial
		b := slack.NewInputBlock(block, plain(label), plain(hint), el)
		b.Optional = optional
		return b
	}
	req := rec.Request
	maxH := grants.MaxDuration.Hours()
	body := fmt.Sprintf("%s You approve this request, and allow similar ones for a while: each later request of %s on %s by %s "+
		"inside every bound below is approved without a vote, in your name, and told in this request's thread. "+
		"Never a critical-risk request, never past a budget. You or a lead of %s may revoke it (%s).\n%s",
		GrantBadge, code(req.Operation), code(req.Target.Cluster), person(req.Initiator), code(rec.Approval.Approvers), code(ops.Ask("grants")),
		headline(rec, specOf(specs, rec)))
	blocks := []slack.Block{section(body),
		input(grantTargetBlock, "Target pattern", grantPattern(grants.Subject(req)), "e.g. ng-*",
			"matched against the request's group (node or instance group), else its namespace; * and ? are wildcards", false)}
	if sized {
		hint := "each request may change the count by at most this"
		if _, counts := grants.SizeCounts(rec.Plan); !counts {
			hint = "each request may change at most this many objects"
		}
		blocks = append(blocks, input(grantSizeBlock, "Size cap ("+grants.SizeUnit(rec.Plan)+")", strconv.Itoa(max(size, 1)), "e.g. 2",
			hint, false))
	}
	blocks = append(blocks,
		input(grantHourlyBlock, "$/h cap", strconv.FormatFloat(hourly, 'f', -1, 64), "e.g. 100", "each request may add at most this per hour", false),
		input(grantTotalBlock, "Total $ cap (0: none)", strconv.FormatFloat(total, 'f', -1, 64), "e.g. 400",
			"each request's bounded total; with a cap, a request of unbounded total does not fit", true),
		input(grantUsesBlock, "Uses", "5", "e.g. 5", fmt.Sprintf("how many requests it may approve, 1 to %d", grants.MaxUses), false),
		input(grantHoursBlock, "Hours", "2", "e.g. 2", fmt.Sprintf("how long it lasts, at most %g", maxH), false))
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: GrantCallback, PrivateMetadata: privateMetadata,
		Title: plain(GrantModalTitle), Submit: plain("Approve and allow"), Close: plain("Back"),
		Blocks: slack.Blocks{BlockSet: blocks},
	}
}

// grantForm reads the form: the spec, and the problems with it by block (a number that is not one, and what
// grants.ValidateOn refuses), each naming the rule and the next step.
func grantForm(cb slack.InteractionCallback) (grantMeta, grants.Spec, map[string]string) {
	var meta grantMeta
	problems := map[string]string{}
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil || meta.RequestID == "" {
		problems[grantTargetBlock] = "this form is damaged; choose Approve and allow similar… again"
		return meta, grants.Spec{}, problems
	}
	value := func(block string) string {
		if cb.View.State == nil {
			return ""
		}
		return strings.TrimSpace(cb.View.State.Values[block][grantInput].Value)
	}
	number := func(block, field string, integer bool) float64 {
		s := strings.TrimPrefix(strings.ReplaceAll(value(block), ",", ""), "$")
		if s == "" {
			return 0
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || (integer && v != math.Trunc(v)) {
			kind := "a number"
			if integer {
				kind = "a whole number"
			}
			problems[block] = fmt.Sprintf("%s must be %s, not %q: type digits only, e.g. 2", field, kind, value(block))
		}
		return v
	}
	spec := grants.Spec{Target: value(grantTargetBlock), MaxSize: int(number(grantSizeBlock, "the size cap", true)),
		MaxHourly: number(grantHourlyBlock, "the $/h cap", false), MaxTotal: number(grantTotalBlock, "the total cap", false),
		Uses: int(number(grantUsesBlock, "uses", true)), Hours: number(grantHoursBlock, "hours", false),
		Thread: map[string]string{AnnChannel: meta.Channel, AnnThread: meta.TS}}
	for _, e := range grants.ValidateOn(spec, meta.Subject, meta.Sized) {
		if b := grantFieldBlocks[e.Field]; b != "" && problems[b] == "" {
			problems[b] = e.Message + ": " + e.Next
		}
	}
	return meta, spec, problems
}

// validateGrantForm is the ack's answer to the form: nil accepts it.
func validateGrantForm(cb slack.InteractionCallback) *slack.ViewSubmissionResponse {
	if _, _, problems := grantForm(cb); len(problems) > 0 {
		return slack.NewErrorsViewSubmissionResponse(problems)
	}
	return nil
}

// grantSubmitted approves the request and gives the grant; the giver is told privately what they gave.
func (h *Handler) grantSubmitted(ctx context.Context, cb slack.InteractionCallback) error {
	return h.submitOutsideModal(ctx, cb)
}

// grantSubmission reads the grant form (ValidateSubmission refused its problems in the ack): the engine's refusal
// is shown under the field it names, else under the target pattern; an accepted one tells the giver privately what
// they gave.
func (h *Handler) grantSubmission(cb slack.InteractionCallback) (submission, error) {
	meta, spec, problems := grantForm(cb)
	if len(problems) > 0 {
		return submission{}, fmt.Errorf("the grant form of %s has problems the ack refused", meta.RequestID)
	}
	who := h.initiator(cb.User.ID, cb.User.Name)
	var grant *grants.Grant
	return submission{block: grantTargetBlock, fields: grantFieldBlocks, channel: meta.Channel, ts: meta.TS,
		decide: func(ctx context.Context) (*ops.Record, error) {
			g, err := h.grantEngine()
			if err != nil {
				return nil, err
			}
			rec, given, err := g.ApproveAndGrant(ctx, meta.RequestID, who, meta.PlanHash, spec)
			grant = given
			return rec, err
		},
		done: func(ctx context.Context) error {
			if grant == nil {
				return nil
			}
			return h.poster.Ephemeral(ctx, meta.Channel, who.ID, GrantGivenMessage(*grant))
		}}, nil
}

// grants answers /hp grants (the viewer's live grants) and /hp grants revoke id=, privately.
func (h *Handler) grants(ctx context.Context, inv *Invocation, who ops.Initiator, channel string) error {
	g, err := h.grantEngine()
	if err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	if inv.Command.Verb == "revoke" {
		id := inv.Args["id"]
		if id == "" {
			return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(ops.Errorf(ops.CodeInvalidArgument, "id",
				"add id=<grant id> (see "+h.cfg.Command+" grants)", "%s grants revoke needs id=", h.cfg.Command)))
		}
		return h.revokeGrant(ctx, id, who, channel)
	}
	list, err := g.VisibleGrants(ctx, who)
	if err != nil {
		return h.poster.Ephemeral(ctx, channel, who.ID, ErrorMessage(err))
	}
	return h.poster.Ephemeral(ctx, channel, who.ID, GrantsMessage(list, who, h.Now()))
}

// Now is the handler's clock for what it renders (the engine's, when it has one).
func (h *Handler) Now() time.Time {
	if c, ok := h.engine.(interface{ Now() time.Time }); ok {
		return c.Now()
	}
	return time.Now()
}

// revokeGrant revokes a grant for who and tells the revoker privately; the thread of the request it was given on is
// told through that request's history (ops.KindGrantRevoked), like the grant's uses.
func (h *Handler) revokeGrant(ctx context.Context, id string, who ops.Initiator, channel string) error {
	g, err := h.grantEngine()
	if err != nil {
		return h.tellClicker(ctx, channel, who.ID, ErrorMessage(err))
	}
	grant, revoked, err := g.RevokeGrant(ctx, id, who)
	if err != nil {
		return h.tellClicker(ctx, channel, who.ID, ErrorMessage(err))
	}
	what := "revoked"
	if !revoked {
		what = "was already revoked"
	}
	return h.tellClicker(ctx, channel, who.ID, InfoMessage(fmt.Sprintf("%s Grant %s %s: the next request it would have approved waits for votes.",
		GrantBadge, code(grant.ID), what)))
}

// grantBounds says a grant's bounds for Slack, the requester mentioned.
func grantBounds(g grants.Grant) string {
	parts := []string{fmt.Sprintf("%s on %s, target %s, asked by %s", code(g.Operation), code(g.Cluster), code(g.Target), person(g.Requester))}
	if g.MaxSize > 0 {
		parts = append(parts, fmt.Sprintf("≤ %s", plural(int64(g.MaxSize), "node or replica", "nodes or replicas")))
	}
	parts = append(parts, "≤ "+ops.Dollars(g.MaxHourly)+"/h")
	if g.MaxTotal > 0 {
		parts = append(parts, "≤ "+ops.Dollars(g.MaxTotal)+" in total")
	}
	return strings.Join(parts, ", ")
}

// GrantsMessage lists the viewer's live grants, each with its bounds, uses left, expiry, who gave it, and a Revoke
// button.
func GrantsMessage(list []grants.Grant, viewer ops.Initiator, now time.Time) Msg {
	blocks := []slack.Block{section("*" + GrantBadge + " Standing grants* you gave, that approve your requests, or that you may revoke")}
	if len(list) == 0 {
		blocks = append(blocks, contextBlock("None live. A lead gives one with *Approve and allow similar…* in a request's menu."))
		return Msg{Text: "Standing grants: none", Blocks: blocks}
	}
	for i, g := range list {
		if len(blocks) >= maxBlocks-1 {
			blocks = append(blocks, contextBlock(fmt.Sprintf("and %d more", len(list)-i)))
			break
		}
		s := section(fmt.Sprintf("*%s* %s\n%d of %d uses left · expires %s · given by %s on %s",
			code(g.ID), grantBounds(g), g.Left(), g.Uses, slackTime(g.ExpiresAt), person(g.GivenBy), code(g.GivenIn)))
		b := slack.NewButtonBlockElement(ActionRevokeGrant, g.ID, plain("Revoke"))
		b.Style = slack.StyleDanger
		s.Accessory = slack.NewAccessory(b)
		blocks = append(blocks, s)
	}
	return Msg{Text: fitText(fmt.Sprintf("Standing grants: %s", plural(int64(len(list)), "grant", "grants"))), Blocks: blocks}
}

// GrantGivenMessage tells the giver, privately, the grant they gave.
func GrantGivenMessage(g grants.Grant) Msg {
	s := fmt.Sprintf("%s You approved %s and gave grant %s: %s; %s, until %s. Each use is told in this request's thread; revoke it with %s.",
		GrantBadge, code(g.GivenIn), code(g.ID), grantBounds(g), plural(int64(g.Uses), "use", "uses"), slackTime(g.ExpiresAt), code(ops.Ask("grants revoke id="+g.ID)))
	return Msg{Text: fitText(fmt.Sprintf("You gave grant %s", g.ID)), Blocks: []slack.Block{section(s)}}
}

// GrantUseReply is the reply in the grant's thread that tells one use: which request, which use of how many, and
// when it was the last.
func GrantUseReply(rec *ops.Record) Msg {
	u := rec.Grant
	// Told without a mention: the requester is told in their own request's thread.
	s := fmt.Sprintf("%s Grant %s approved %s, asked by %s (%d of %d used).", GrantBadge, code(u.Grant), code(rec.ID()),
		escLine(display(rec.Request.Initiator)), u.Use, u.Uses)
	text := fmt.Sprintf("grant %s used by %s (%d of %d used)", u.Grant, rec.ID(), u.Use, u.Uses)
	if u.Use >= u.Uses {
		s += " It is used up: the next similar request waits for votes."
		text += ", used up"
	}
	return Msg{Text: escText(text), Blocks: []slack.Block{section(s)}, Background: true}
}

// GrantRevokedReply is the reply in the thread of the request a grant was given on that tells its revocation (an
// ops.KindGrantRevoked entry of that request's history, t.By who revoked it).
func GrantRevokedReply(t ops.Transition) Msg {
	id, used, uses, ok := grants.ParseRevoked(t.Note)
	if !ok {
		s := fmt.Sprintf("%s %s, by %s: the next similar request waits for votes.", GrantBadge, escText(t.Note), person(t.By))
		return Msg{Text: escText(t.Note), Blocks: []slack.Block{section(s)}}
	}
	s := fmt.Sprintf("%s Grant %s was revoked by %s after %d of %d uses: the next similar request waits for votes.", GrantBadge, code(id), person(t.By), used, uses)
	return Msg{Text: escText(fmt.Sprintf("grant %s revoked", id)), Blocks: []slack.Block{section(s)}}
}

// grantLine is the plan message's line about a grant: the one that approved the request, or, on a dry run, the
// one that would.
func grantLine(rec *ops.Record) string {
	if u := rec.Grant; u != nil {
		return fmt.Sprintf("\n%s Approved by grant %s, given by %s (%d of %d used)", GrantBadge, code(u.Grant), person(u.GivenBy), u.Use, u.Uses)
	}
	if rec.Plan != nil && rec.Plan.Grant != nil {
		n := rec.Plan.Grant
		return fmt.Sprintf("\n%s Grant %s (given by %s, %s left) would approve this", GrantBadge, code(n.Grant), person(n.GivenBy),
			plural(int64(n.Left), "use", "uses"))
	}
	return ""
}

// grantUsed reports whether history entry i of rec is the one a grant approved.
func grantUsed(rec *ops.Record, i int) bool {
	if rec.Grant == nil || i >= len(rec.History) {
		return false
	}
	t := rec.History[i]
	return t.Kind == ops.KindPhase && t.From == ops.PhasePlanned && t.To == ops.PhaseApproved && t.By.Kind == ops.System
}

// tellGrantUse tells a grant's use in the grant's thread, once (deliver finds a post whose answer was lost).
func (tl *Teller) tellGrantUse(ctx context.Context, rec *ops.Record, i int) error {
	ch, ts := rec.Grant.Thread[AnnChannel], rec.Grant.Thread[AnnThread]
	if ch == "" {
		return nil
	}
	_, _, err := tl.deliver(ctx, rec, i, part{name: "grant", channel: ch, thread: ts, msg: GrantUseReply(rec)})
	if _, ok := refused(err); ok {
		return nil // the grant's thread is gone or closed to the bot: the request's own messages still say it
	}
	return err
}
