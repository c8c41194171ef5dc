package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// The App Home tab: one viewer's dashboard of what waits for their vote, their own requests, what runs on each
// cluster, what the agents have open, and their budgets. Its request buttons are the channel's (same action ids and
// values), so a click in Home is handled like one on the plan message.

// ActionHomePage is a Home tab's paging button; its value is "<section>:<offset>".
const ActionHomePage = "hp_home_page"

// The Home tab's request sections, in the order they are drawn.
const (
	HomeWaiting = "waiting"
	HomeYours   = "yours"
	HomeRunning = "running"
	HomeAgents  = "agents"
)

// Slack's limit on a view's blocks, and how many requests a section shows per page: four full sections of two
// blocks each, with their headers, the budgets and the extra sections, stay under maxViewBlocks.
const (
	maxViewBlocks = 100
	homePageSize  = 8
	// homeExtraBlocks bounds what one extra section (HomeSection) may add.
	homeExtraBlocks = 8
)

// HomeSection is a part of the Home tab that another feature fills, drawn after the budgets: the viewer's standing
// grants are meant to slot in here, with their own buttons. Blocks must escape what people typed; more than
// homeExtraBlocks are cut.
type HomeSection interface {
	// HomeTitle is the section's header ("Your grants").
	HomeTitle() string
	// HomeBlocks renders the viewer's part of the section; nil draws the header with "none".
	HomeBlocks(ctx context.Context, viewer ops.Initiator) ([]slack.Block, error)
}

// HomePages is where each section of a viewer's Home is paged to (the offset of its first request shown).
type HomePages map[string]int

// EncodeHomePages writes pages as the view's private metadata.
func EncodeHomePages(p HomePages) string {
	if len(p) == 0 {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// DecodeHomePages reads a view's private metadata; anything unreadable is the first page.
func DecodeHomePages(s string) HomePages {
	p := HomePages{}
	if s != "" {
		_ = json.Unmarshal([]byte(s), &p)
	}
	for k, v := range p {
		if v < 0 || !slices.Contains([]string{HomeWaiting, HomeYours, HomeRunning, HomeAgents}, k) {
			delete(p, k)
		}
	}
	return p
}

// HomeItem is a request a section shows and the buttons offered to the viewer on it.
type HomeItem struct {
	Rec     *ops.Record
	Actions []string
	// Workloads are the states last told of the workloads a succeeded request made and watches.
	Workloads []HomeWorkload
}

// HomeWorkload is a watched workload of a request and the state last told of it ("" before any).
type HomeWorkload struct {
	Object ops.ObjectRef
	State  string
}

// WorkloadStates reads the state last told of a watched workload (ops/state's Store implements it).
type WorkloadStates interface {
	LastTold(ctx context.Context, obj ops.ObjectRef) (string, error)
}

// liveWorkload reports whether a watched workload still runs (or is about to): a request whose workload does is
// running now, though the request itself succeeded when the workload was created.
func liveWorkload(state string) bool {
	switch state {
	case "", "pending", "running", "progressing", "suspended":
		return true
	}
	return false
}

// homeWorkloadsMax bounds the workloads read and shown per request.
const homeWorkloadsMax = 3

// watches reports whether rec succeeded and watches workloads it made.
func watches(rec *ops.Record) bool {
	return rec.Phase == ops.PhaseSucceeded && rec.Result != nil && len(rec.Result.Watch) > 0
}

// HomePart is a rendered extra section (HomeSection).
type HomePart struct {
	Title  string
	Blocks []slack.Block
	Err    error
}

// HomeData is everything one viewer's Home shows, already reduced to what they may see.
type HomeData struct {
	Viewer  ops.Initiator
	Waiting []HomeItem
	Yours   []HomeItem
	// Running is sorted by cluster.
	Running []HomeItem
	// Agents is sorted by agent name.
	Agents     []HomeItem
	Budgets    []ops.BudgetUse
	BudgetsErr error
	Extra      []HomePart
	Pages      HomePages
	// Notice heads the view: why the viewer's last click in Home was refused.
	Notice string
}

// Shows lists the ids of the requests the Home draws (on any page), to know whose Home a change touches.
func (d HomeData) Shows() []string {
	var out []string
	for _, items := range [][]HomeItem{d.Waiting, d.Yours, d.Running, d.Agents} {
		for _, it := range items {
			out = append(out, it.Rec.ID())
		}
	}
	return out
}

// HomeView renders a viewer's Home tab.
func HomeView(specs Specs, d HomeData) slack.HomeTabViewRequest {
	blocks := []slack.Block{slack.NewHeaderBlock(plain("HyperOps"))}
	if d.Notice != "" {
		blocks = append(blocks, section(":warning: "+d.Notice))
	}
	blocks = append(blocks, contextBlock("What waits for you, what is yours, what runs. Buttons work as on the request's message; "+
		"this tab refreshes itself when a request changes."))
	blocks = append(blocks, homeSection(specs, d, HomeWaiting, ":hourglass_flowing_sand: Waiting for you", "Nothing waits for your vote.", d.Waiting)...)
	blocks = append(blocks, homeSection(specs, d, HomeYours, ":bust_in_silhouette: Yours", "You have asked for nothing lately.", d.Yours)...)
	blocks = append(blocks, homeSection(specs, d, HomeRunning, ":gear: Running now", "Nothing you may see is running.", d.Running)...)
	blocks = append(blocks, homeSection(specs, d, HomeAgents, ":robot_face: Agents", "No agent has a request open that you may see.", d.Agents)...)
	blocks = append(blocks, homeBudgets(d)...)
	for _, p := range d.Extra {
		blocks = append(blocks, homeExtra(p)...)
	}
	return slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: capViewBlocks(blocks)},
		PrivateMetadata: EncodeHomePages(d.Pages)}
}

func homeHeader(title string) []slack.Block {
	return []slack.Block{slack.NewDividerBlock(), section("*" + title + "*")}
}

// homeSection draws one page of a section's requests, with the buttons to page on and back.
func homeSection(specs Specs, d HomeData, id, title, none string, items []HomeItem) []slack.Block {
	if len(items) > 0 {
		title += fmt.Sprintf(" (%d)", len(items))
	}
	blocks := homeHeader(title)
	if len(items) == 0 {
		return append(blocks, contextBlock(none))
	}
	from := min(d.Pages[id], len(items)-1)
	from -= from % homePageSize
	to := min(from+homePageSize, len(items))
	lastCluster := ""
	for _, it := range items[from:to] {
		if id == HomeRunning && it.Rec.Request.Target.Cluster != lastCluster {
			lastCluster = it.Rec.Request.Target.Cluster
			blocks = append(blocks, contextBlock(":file_cabinet: cluster "+code(lastCluster)))
		}
		blocks = append(blocks, homeItem(specs, id, it)...)
	}
	var pager []slack.BlockElement
	if from > 0 {
		pager = append(pager, slack.NewButtonBlockElement(ActionHomePage, id+":"+strconv.Itoa(from-homePageSize), plain("‹ Previous")))
	}
	if to < len(items) {
		pager = append(pager, slack.NewButtonBlockElement(ActionHomePage, id+":"+strconv.Itoa(to),
			plain(fmt.Sprintf("Show more (%d more)", len(items)-to))))
	}
	if len(pager) > 0 {
		blocks = append(blocks, contextBlock(fmt.Sprintf("%d–%d of %d", from+1, to, len(items))),
			slack.NewActionBlock("home:page:"+id, pager...))
	}
	return blocks
}

// homeItem is one request: what and where (the headline), then what decides it — risk, cost, where it stands and,
// while it waits, how many approvals it still needs and until when — then who asked and its id, then the viewer's
// buttons.
func homeItem(specs Specs, sectionID string, it HomeItem) []slack.Block {
	rec := it.Rec
	op := specOf(specs, rec)
	var facts []string
	if risk := homeRisk(rec); risk != "" {
		facts = append(facts, "*"+risk+"*")
	}
	facts = append(facts, homeCost(rec))
	if rec.Phase == ops.PhaseAwaitingApproval {
		a := rec.Approval
		facts = append(facts, fmt.Sprintf("needs %s", plural(int64(max(a.Required-a.Received(), 0)), "more approval", "more approvals")))
		if !a.ExpiresAt.IsZero() {
			facts = append(facts, "expires "+slackTime(a.ExpiresAt))
		}
	}
	if sectionID != HomeWaiting {
		facts = append([]string{strings.ToLower(phaseWords[rec.Phase])}, facts...)
	}
	for _, w := range it.Workloads {
		state := w.State
		if state == "" {
			state = "pending"
		}
		kind := w.Object.Kind
		if kind == "" {
			kind = "Job"
		}
		facts = append(facts, fmt.Sprintf("%s %s %s *%s*", stateEmoji[state], escLine(kind), code(w.Object.Name), escLine(phrase(state))))
	}
	who := "asked by " + person(rec.Request.Initiator)
	if rec.Owner.ID != "" && rec.Owner.ID != rec.Request.Initiator.ID {
		who += ", now owned by " + person(rec.Owner)
	}
	text := fmt.Sprintf("%s %s\n%s\n%s · %s", phaseEmoji[rec.Phase], headline(rec, op), strings.Join(facts, " · "), who, code(rec.ID()))
	blocks := []slack.Block{section(text)}
	var els []slack.BlockElement
	for _, a := range it.Actions {
		els = append(els, button(rec, op, a))
	}
	if rec.Plan != nil {
		els = append(els, slack.NewButtonBlockElement(ActionDetails, rec.ID(), plain("Details")))
	}
	if len(els) > 0 {
		blocks = append(blocks, slack.NewActionBlock(clip("home:"+sectionID+":"+rec.ID(), 255), els...))
	}
	return blocks
}

// homeCost is the request's cost in a few words.
func homeCost(rec *ops.Record) string {
	if rec.Plan == nil {
		return "cost not planned yet"
	}
	c := rec.Plan.Cost
	switch {
	case !c.Known():
		return "price unknown"
	case c.Total > 0:
		return "up to " + money(c.Total)
	case c.HourlyDelta == 0:
		return "no change in cost"
	}
	return signedMoney(c.HourlyDelta) + "/h"
}

func homeRisk(rec *ops.Record) string {
	if rec.Plan == nil || rec.Plan.Risk.Level < ops.RiskMedium {
		return ""
	}
	return rec.Plan.Risk.Level.String() + " risk"
}

// homeBudgets draws the viewer's spend budgets as /hp budget does.
func homeBudgets(d HomeData) []slack.Block {
	blocks := homeHeader(":moneybag: Your budgets")
	if d.BudgetsErr != nil {
		return append(blocks, contextBlock("Your budgets could not be read just now: "+escLine(ops.AsError(d.BudgetsErr).Message)))
	}
	if len(d.Budgets) == 0 {
		return append(blocks, contextBlock("No budget counts your requests."))
	}
	for i, u := range d.Budgets {
		if i == homePageSize {
			return append(blocks, contextBlock(fmt.Sprintf("and %d more: %s", len(d.Budgets)-i, code(ops.Ask("budget")))))
		}
		b := u.Budget
		blocks = append(blocks, section(fmt.Sprintf("*%s* (%s, per %s) · %s · resets %s", escLine(b.Name), escLine(b.Holder),
			escLine(string(b.Window)), escLine(u.String()), u.End.Format("Mon 2 Jan 15:04 MST"))))
	}
	return blocks
}

func homeExtra(p HomePart) []slack.Block {
	blocks := homeHeader(escLine(p.Title))
	switch {
	case p.Err != nil:
		return append(blocks, contextBlock("Could not be read just now: "+escLine(ops.AsError(p.Err).Message)))
	case len(p.Blocks) == 0:
		return append(blocks, contextBlock("none"))
	case len(p.Blocks) > homeExtraBlocks:
		return append(append(blocks, p.Blocks[:homeExtraBlocks-1]...), contextBlock("and more that does not fit here"))
	}
	return append(blocks, p.Blocks...)
}

// capViewBlocks keeps a view within Slack's 100 blocks, saying that the rest did not fit.
func capViewBlocks(blocks []slack.Block) []slack.Block {
	if len(blocks) <= maxViewBlocks {
		return blocks
	}
	return append(blocks[:maxViewBlocks-1:maxViewBlocks-1], contextBlock("The rest did not fit in this tab: page back, or use "+code(ops.Ask("requests"))+"."))
}

// openPhases are the phases of a request that may still change.
var openPhases = []ops.Phase{ops.PhaseReceived, ops.PhasePlanned, ops.PhaseAwaitingApproval, ops.PhaseApproved,
	ops.PhaseExecuting, ops.PhaseInterrupted}

// running reports whether a request is under way: approved and starting, executing, or stopped halfway.
func running(p ops.Phase) bool {
	return p == ops.PhaseApproved || p == ops.PhaseExecuting || p == ops.PhaseInterrupted
}

// HomeSnapshot is what the Home tabs of one refresh are drawn from: one read shared by every viewer refreshed
// together.
type HomeSnapshot struct {
	// Open are the requests that may still change, newest first.
	Open []*ops.Record
	// Recent are the latest requests in any phase, newest first, for "Yours".
	Recent []*ops.Record
}

// newestOnce keeps each request once, at its newest version: Open and Recent are two reads, so a request that
// finished between them is in both, open in one and finished in the other, and would be drawn twice (one
// "executing", one "succeeded") with the same block_id, which Slack refuses for the whole view.
func (s *HomeSnapshot) newestOnce() (open, recent []*ops.Record) {
	newest := map[string]*ops.Record{}
	for _, rec := range append(slices.Clip(s.Open), s.Recent...) {
		if n, ok := newest[rec.ID()]; !ok || rec.Version > n.Version {
			newest[rec.ID()] = rec
		}
	}
	keep := func(recs []*ops.Record) []*ops.Record {
		var out []*ops.Record
		for _, rec := range recs {
			if newest[rec.ID()] == rec {
				out = append(out, rec)
				delete(newest, rec.ID()) // once, even if a read listed it twice
			}
		}
		return out
	}
	return keep(s.Open), keep(s.Recent)
}

// How many requests a Home refresh reads: every open one up to homeOpenScan, and the latest homeRecentScan.
const (
	homeOpenScan   = 5000
	homeRecentScan = 500
	homeYoursMax   = 40
)

// ReadHomeSnapshot reads the requests the Home tabs are drawn from.
func (h *Handler) ReadHomeSnapshot(ctx context.Context) (*HomeSnapshot, error) {
	open, err := h.engine.List(ctx, engine.ListQuery{Phases: openPhases, Limit: homeOpenScan})
	if err != nil {
		return nil, err
	}
	recent, err := h.engine.List(ctx, engine.ListQuery{Limit: homeRecentScan})
	if err != nil {
		return nil, err
	}
	return &HomeSnapshot{Open: open, Recent: recent}, nil
}

// VoterCheck is the part of the approval policy that says who may vote on a request (approvals.Policy
// implements it, as does the engine's Approve path).
type VoterCheck interface {
	CheckVoter(ctx context.Context, rec *ops.Record, voter ops.Initiator) error
}

// HomeData gathers one viewer's Home from snap. A succeeded request whose workload still runs is running now too.: only the requests they may see (CheckView); "Waiting for you" only
// those whose vote they may cast and have not cast for the current plan; "Running now" and "Agents" those they may
// act on (their own, or one whose vote they may cast: who may stop or take it over); on each the buttons the
// engine would let them use.
func (h *Handler) HomeData(ctx context.Context, who ops.Initiator, snap *HomeSnapshot, pages HomePages) HomeData {
	d := HomeData{Viewer: who, Pages: pages}
	if err := h.access.CheckAccess(ctx, who); err != nil {
		d.Notice = ErrorMessage(err).Text // who may not use HyperOps sees why, and nothing else
		return d
	}
	voters, _ := h.access.(VoterCheck)
	canVote := func(rec *ops.Record) bool { return voters != nil && voters.CheckVoter(ctx, rec, who) == nil }
	seen := map[string]bool{}
	open, recent := snap.newestOnce()
	for _, rec := range open {
		if h.access.CheckView(ctx, rec, who) != nil {
			continue
		}
		mine := rec.Request.Initiator.ID == who.ID || rec.Owner.ID == who.ID
		if mine {
			seen[rec.ID()] = true
			d.Yours = append(d.Yours, HomeItem{Rec: rec, Actions: homeActions(rec, []ops.Choice{ops.ChoiceCancel, ops.ChoiceStop, ops.ChoiceResume})})
		}
		// Running requests and agents' requests are shown to who may act on them (stop, take over: the approvers),
		// so a change of one redraws the Homes of the few who can, not of everyone who may read it.
		steward := mine || canVote(rec)
		switch {
		case rec.Phase == ops.PhaseAwaitingApproval && !mine && !votedFor(rec, who.ID) && canVote(rec):
			d.Waiting = append(d.Waiting, HomeItem{Rec: rec, Actions: homeActions(rec, []ops.Choice{ops.ChoiceApprove, ops.ChoiceDeny})})
		case running(rec.Phase) && steward:
			d.Running = append(d.Running, HomeItem{Rec: rec, Actions: homeActions(rec, []ops.Choice{ops.ChoiceStop, ops.ChoiceTakeOver})})
		}
		if rec.Request.Initiator.Kind == ops.Agent && rec.Owner.Kind == ops.Agent && steward && who.Kind == ops.Human {
			d.Agents = append(d.Agents, HomeItem{Rec: rec, Actions: homeActions(rec, []ops.Choice{ops.ChoiceTakeOver, ops.ChoiceStop})})
		}
	}
	for _, rec := range recent {
		mine := !seen[rec.ID()] && (rec.Request.Initiator.ID == who.ID || rec.Owner.ID == who.ID)
		if !watches(rec) && (!mine || len(d.Yours) >= homeYoursMax) {
			continue
		}
		if h.access.CheckView(ctx, rec, who) != nil {
			continue
		}
		it := HomeItem{Rec: rec, Actions: homeActions(rec, []ops.Choice{ops.ChoiceCancel, ops.ChoiceStop, ops.ChoiceResume}),
			Workloads: h.workloadStates(ctx, rec)}
		if mine && len(d.Yours) < homeYoursMax {
			d.Yours = append(d.Yours, it)
		}
		if live := slices.ContainsFunc(it.Workloads, func(w HomeWorkload) bool { return liveWorkload(w.State) }); live && (mine || canVote(rec)) {
			d.Running = append(d.Running, HomeItem{Rec: rec, Workloads: it.Workloads})
		}
	}
	sortNewest(d.Yours)
	sort.SliceStable(d.Running, func(i, j int) bool {
		return d.Running[i].Rec.Request.Target.Cluster < d.Running[j].Rec.Request.Target.Cluster
	})
	sort.SliceStable(d.Agents, func(i, j int) bool {
		return d.Agents[i].Rec.Request.Initiator.Name < d.Agents[j].Rec.Request.Initiator.Name
	})
	if br, ok := h.engine.(BudgetReader); ok {
		d.Budgets, d.BudgetsErr = br.BudgetsOf(ctx, who)
	}
	for _, s := range h.cfg.HomeSections {
		blocks, err := s.HomeBlocks(ctx, who)
		d.Extra = append(d.Extra, HomePart{Title: s.HomeTitle(), Blocks: blocks, Err: err})
	}
	return d
}

// workloadStates reads the states last told of the workloads rec watches (none when it watches none, or when
// nothing can read them).
func (h *Handler) workloadStates(ctx context.Context, rec *ops.Record) []HomeWorkload {
	if !watches(rec) || h.cfg.Workloads == nil {
		return nil
	}
	var out []HomeWorkload
	for _, obj := range rec.Result.Watch[:min(len(rec.Result.Watch), homeWorkloadsMax)] {
		state, err := h.cfg.Workloads.LastTold(ctx, obj)
		if err != nil {
			continue
		}
		out = append(out, HomeWorkload{Object: obj, State: state})
	}
	return out
}

func sortNewest(items []HomeItem) {
	sort.SliceStable(items, func(i, j int) bool { return items[i].Rec.CreatedAt.After(items[j].Rec.CreatedAt) })
}

// homeActions keeps, of want, the choices the request offers in its phase, as action ids in want's order.
func homeActions(rec *ops.Record, want []ops.Choice) []string {
	have := rec.Choices()
	var out []string
	for _, c := range want {
		if slices.Contains(have, c) {
			out = append(out, choiceActions[c])
		}
	}
	return out
}

// votedFor reports whether voter approved the request's current plan already: they cannot help its quorum more.
func votedFor(rec *ops.Record, voter string) bool {
	return slices.ContainsFunc(rec.Approval.Votes, func(v ops.Vote) bool {
		return v.Voter.ID == voter && v.Approve && v.PlanHash == rec.Approval.PlanHash
	})
}
