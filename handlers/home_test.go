package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// memViewers is the viewers' memory of the Home tabs, in memory.
type memViewers struct {
	mu        sync.Mutex
	opened    []string
	pages     map[string]string
	published map[string]string
	down      bool
}

func (m *memViewers) err() error {
	if m.down {
		return ops.ErrStateUnavailable
	}
	return nil
}

func (m *memViewers) HomeOpened(_ context.Context, user string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return m.err()
	}
	for _, u := range m.opened {
		if u == user {
			return nil
		}
	}
	m.opened = append(m.opened, user)
	return nil
}

func (m *memViewers) HomeViewers(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.opened...), m.err()
}

func (m *memViewers) HomeState(_ context.Context, user string) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pages[user], m.published[user], m.err()
}

func (m *memViewers) SetHomePages(_ context.Context, user, pages string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pages == nil {
		m.pages = map[string]string{}
	}
	m.pages[user] = pages
	return m.err()
}

func (m *memViewers) SetHomePublished(_ context.Context, user, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.published == nil {
		m.published = map[string]string{}
	}
	m.published[user] = hash
	return m.err()
}

// memPublisher records the views published, per user.
type memPublisher struct {
	mu    sync.Mutex
	views map[string]slack.HomeTabViewRequest
	count map[string]int
}

func (p *memPublisher) PublishHome(_ context.Context, user string, v slack.HomeTabViewRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.views == nil {
		p.views, p.count = map[string]slack.HomeTabViewRequest{}, map[string]int{}
	}
	p.views[user] = v
	p.count[user]++
	return nil
}

func (p *memPublisher) text(user string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, _ := json.Marshal(p.views[user])
	return string(b)
}

func (p *memPublisher) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.count {
		n += c
	}
	return n
}

// The people of the Home tests, from the access matrix: U0MLENG asked for request R in C0ML; U0LEAD leads and may
// approve it; U0ENG works in C0OPS and may not see R.
const (
	homeEngineer  = "U0MLENG"
	homeLead      = "U0LEAD"
	homeBystander = "U0ENG"
)

func homeFixture(t *testing.T) (*matrixFixture, *Homes, *memViewers, *memPublisher) {
	t.Helper()
	f := newMatrixFixture(t)
	v, p := &memViewers{}, &memPublisher{}
	return f, NewHomes(f.h, v, p, HomeOptions{}), v, p
}

func (f *matrixFixture) home(t *testing.T, user string) slack.HomeTabViewRequest {
	t.Helper()
	snap, err := f.h.ReadHomeSnapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := HomeView(f.h.catalog, f.h.HomeData(context.Background(), f.h.initiator(user, ""), snap, nil))
	checkView(t, v)
	return v
}

// checkView applies the limits of views.publish the fake Slack enforces too: at most 100 blocks, block ids unique.
func checkView(t *testing.T, v slack.HomeTabViewRequest) {
	t.Helper()
	if n := len(v.Blocks.BlockSet); n > maxViewBlocks {
		t.Errorf("%d blocks, Slack allows %d in a view", n, maxViewBlocks)
	}
	ids := map[string]bool{}
	for _, b := range v.Blocks.BlockSet {
		id := b.ID()
		if id != "" && ids[id] {
			t.Errorf("block id %q twice", id)
		}
		ids[id] = true
		if s, ok := b.(*slack.SectionBlock); ok && s.Text != nil && len([]rune(s.Text.Text)) > maxSectionText {
			t.Errorf("section of %d characters", len([]rune(s.Text.Text)))
		}
	}
}

func TestHomeGolden(t *testing.T) {
	f := newMatrixFixture(t)
	golden(t, "home_lead", f.home(t, homeLead))
	golden(t, "home_engineer", f.home(t, homeEngineer))
	golden(t, "home_bystander", f.home(t, homeBystander))
	t.Run("paged", func(t *testing.T) {
		v := HomeView(opSpecs, longHome())
		checkView(t, v)
		golden(t, "home_paged", v)
	})
}

// longHome is a busy lead's Home, paged on in "Waiting for you", with text people typed that must stay inert.
func longHome() HomeData {
	d := HomeData{Viewer: ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}, Pages: HomePages{HomeWaiting: homePageSize}}
	for i := range 30 {
		r := sampleRecord(ops.PhaseAwaitingApproval)
		r.Request.ID = fmt.Sprintf("req-wait-%02d", i)
		r.Request.Params["group"] = fmt.Sprintf("gpu-<!channel>-%d", i)
		d.Waiting = append(d.Waiting, HomeItem{Rec: r, Actions: []string{ActionApprove, ActionDeny}})
	}
	for i := range 12 {
		r := sampleRecord(ops.PhaseSucceeded)
		r.Request.ID = fmt.Sprintf("req-mine-%02d", i)
		r.Request.Initiator, r.Owner = d.Viewer, d.Viewer
		d.Yours = append(d.Yours, HomeItem{Rec: r})
	}
	for i := range 20 {
		r := sampleRecord(ops.PhaseExecuting)
		r.Request.ID = fmt.Sprintf("req-run-%02d", i)
		r.Request.Target.Cluster = []string{"ml-dev-eks", "ml-prod-eks"}[i/10]
		d.Running = append(d.Running, HomeItem{Rec: r})
	}
	for i := range 10 {
		r := sampleRecord(ops.PhaseAwaitingApproval)
		r.Request.ID = fmt.Sprintf("req-agent-%02d", i)
		r.Request.Initiator = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "tuner <!here>"}
		r.Owner = r.Request.Initiator
		d.Agents = append(d.Agents, HomeItem{Rec: r, Actions: []string{ActionTakeOver, ActionStop}})
	}
	d.Budgets = []ops.BudgetUse{{Budget: ops.BudgetLimit{Name: "team <b>ml</b>", Holder: "<!everyone>", Window: "week", Limit: ops.Amount{Cost: 500}},
		Start: t0, End: t0.Add(7 * 24 * time.Hour), Used: ops.Amount{Cost: 120}}}
	d.Extra = []HomePart{{Title: "Your grants"}}
	return d
}

func TestHomeShowsOnlyWhatTheViewerMaySee(t *testing.T) {
	f := newMatrixFixture(t)
	lead, _ := json.Marshal(f.home(t, homeLead))
	eng, _ := json.Marshal(f.home(t, homeEngineer))
	by, _ := json.Marshal(f.home(t, homeBystander))
	if !strings.Contains(string(lead), `"hp_approve"`) || !strings.Contains(string(lead), "req-r") {
		t.Errorf("the lead's Home does not offer to approve R: %s", lead)
	}
	if !strings.Contains(string(eng), "req-r") || strings.Contains(string(eng), `"hp_approve"`) {
		t.Errorf("the engineer's Home should show R as theirs, without Approve: %s", eng)
	}
	if !strings.Contains(string(eng), `"hp_cancel"`) {
		t.Errorf("the engineer's Home does not offer to cancel R: %s", eng)
	}
	if strings.Contains(string(by), "req-r") || strings.Contains(string(by), "web") {
		t.Errorf("the bystander's Home shows something of R: %s", by)
	}
	// Who may not use HyperOps at all is told why, and shown nothing.
	if s, _ := json.Marshal(f.home(t, "U0STRANGER")); !strings.Contains(string(s), "E_NOT_AUTHORIZED") || strings.Contains(string(s), "req-r") {
		t.Errorf("a stranger's Home: %s", s)
	}
}

// homeClick presses a button in user's Home tab: a view, with no channel or message.
func (f *matrixFixture) homeClick(ctx context.Context, user, action, value string) error {
	var cb slack.InteractionCallback
	cb.Type, cb.TriggerID, cb.User.ID = slack.InteractionTypeBlockActions, "trig-home", user
	cb.Container.Type, cb.View.Type, cb.View.ID = "view", slack.VTHomeTab, "V0HOME"
	cb.ActionCallback.BlockActions = []*slack.BlockAction{{ActionID: action, Value: value}}
	return f.h.Interaction(ctx, cb)
}

func TestHomeApproveWorksAsInTheChannel(t *testing.T) {
	f, homes, _, pub := homeFixture(t)
	ctx := context.Background()
	value := ApproveValue(f.r(t))
	// A bystander's click is refused in their own Home, and changes nothing.
	if err := f.homeClick(ctx, homeBystander, ActionApprove, value); err != nil {
		t.Fatal(err)
	}
	homes.Flush(ctx)
	if got := pub.text(homeBystander); !strings.Contains(got, "E_NOT_AUTHORIZED") {
		t.Errorf("the bystander was not told why, in Home: %s", got)
	}
	if f.r(t).Phase != ops.PhaseAwaitingApproval {
		t.Fatal("a bystander's click changed R")
	}
	// A button drawn for an older plan is refused (E_STALE_PLAN), told in Home.
	if err := f.homeClick(ctx, homeLead, ActionApprove, "req-r@0000"); err != nil {
		t.Fatal(err)
	}
	homes.Flush(ctx)
	if got := pub.text(homeLead); !strings.Contains(got, "E_STALE_PLAN") {
		t.Errorf("a stale click was not answered in Home: %s", got)
	}
	// The lead's two clicks: one vote, R approved, nobody told an error.
	for range 2 {
		if err := f.homeClick(ctx, homeLead, ActionApprove, value); err != nil {
			t.Fatal(err)
		}
	}
	if r := f.r(t); r.Phase == ops.PhaseAwaitingApproval || len(r.Approval.Votes) != 1 {
		t.Fatalf("R is %s with %d votes after the lead approved it twice from Home", r.Phase, len(r.Approval.Votes))
	}
	if n := pub.count[homeLead]; n != 1 {
		t.Errorf("the lead's Home was published %d times by the clicks, want only the stale one's notice", n)
	}
}

// A click in Home on a view drawn before a change it missed (Approve on a request the lead approved in the channel
// meanwhile, which changes nothing) redraws the clicker's Home; a refused click's notice stays through a redraw for
// a change the viewer did not make, and goes with their next click or visit.
func TestHomeClickOnAStaleViewAndItsNotice(t *testing.T) {
	f, homes, v, pub := homeFixture(t)
	ctx := context.Background()
	homes.Opened(ctx, homeLead)
	homes.Flush(ctx)
	stale := ApproveValue(f.r(t))
	if err := f.click(ctx, homeLead, ActionApprove); err != nil { // in the channel: nothing tells the Homes here
		t.Fatal(err)
	}
	homes.Flush(ctx)
	if got := pub.text(homeLead); !strings.Contains(got, "home:waiting:req-r") {
		t.Fatalf("the lead's Home was redrawn without a change told: %s", got)
	}
	if err := f.homeClick(ctx, homeLead, ActionApprove, stale); err != nil {
		t.Fatal(err)
	}
	homes.Flush(ctx)
	if got := pub.text(homeLead); strings.Contains(got, "home:waiting:req-r") || strings.Contains(got, ":warning:") {
		t.Errorf("after a click on a decided request the lead's Home still offers it, or warns: %s", got)
	}

	homes.Notice(homeLead, "E_TEST: refused")
	homes.Flush(ctx)
	homes.Changed(ctx, f.r(t), ops.PhaseExecuting)
	homes.Clicked(homeBystander) // another viewer's click leaves the lead's notice alone
	homes.Flush(ctx)
	if got := pub.text(homeLead); !strings.Contains(got, ":warning: E_TEST: refused") {
		t.Errorf("the notice went with a redraw the lead did not ask for: %s", got)
	}
	if got := decodeHomeMemo(v.pages[homeLead]); got.Notice != "E_TEST: refused" {
		t.Errorf("the notice is not kept for the other replicas: memo %+v", got)
	}
	homes.Opened(ctx, homeLead)
	homes.Flush(ctx)
	if got := pub.text(homeLead); strings.Contains(got, "E_TEST") {
		t.Errorf("the notice outlived the lead's next visit: %s", got)
	}
}

func TestHomeChangeRepublishesOnlyTouchedViewers(t *testing.T) {
	f, homes, _, pub := homeFixture(t)
	ctx := context.Background()
	for _, u := range []string{homeLead, homeEngineer, homeBystander} {
		homes.Opened(ctx, u)
	}
	homes.Flush(ctx)
	if n := pub.total(); n != 3 {
		t.Fatalf("opening Home published %d views, want 3", n)
	}
	rec := f.r(t)
	homes.Changed(ctx, rec, ops.PhasePlanned)
	homes.Changed(ctx, rec, ops.PhasePlanned)
	homes.Flush(ctx)
	// Nothing R shows changed since the Homes were published: the views are equal, nothing is sent.
	if n := pub.total(); n != 3 {
		t.Errorf("a change that alters no view published %d more", n-3)
	}
	if err := f.homeClick(ctx, homeLead, ActionApprove, ApproveValue(rec)); err != nil {
		t.Fatal(err)
	}
	homes.Changed(ctx, f.r(t), ops.PhaseAwaitingApproval)
	homes.Flush(ctx)
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if pub.count[homeBystander] != 1 {
		t.Errorf("the bystander's Home was published %d times, want only when opened", pub.count[homeBystander])
	}
	if pub.count[homeLead] != 2 || pub.count[homeEngineer] != 2 {
		t.Errorf("published lead %d, engineer %d times, want 2 each", pub.count[homeLead], pub.count[homeEngineer])
	}
}

func TestHomePaging(t *testing.T) {
	f, homes, v, pub := homeFixture(t)
	ctx := context.Background()
	var cb slack.InteractionCallback
	cb.Type, cb.User.ID, cb.Container.Type = slack.InteractionTypeBlockActions, homeLead, "view"
	cb.View.PrivateMetadata = `{"yours":8}`
	cb.ActionCallback.BlockActions = []*slack.BlockAction{{ActionID: ActionHomePage, Value: "waiting:8"}}
	if err := f.h.Interaction(ctx, cb); err != nil {
		t.Fatal(err)
	}
	homes.Flush(ctx)
	if got := decodeHomeMemo(v.pages[homeLead]).Pages; got[HomeWaiting] != 8 || got[HomeYours] != 8 {
		t.Errorf("pages %v, want waiting and yours at 8", got)
	}
	if pub.total() != 1 {
		t.Errorf("a page click published %d views", pub.total())
	}
	if got := DecodeHomePages(`{"waiting":-3,"bogus":2}`); len(got) != 0 {
		t.Errorf("bad metadata read as %v", got)
	}
}

// TestHomeFailsSoft: without the viewers' memory (Redis down) the Home is still published when opened, and a
// request's telling never waits on it.
func TestHomeFailsSoft(t *testing.T) {
	f, homes, v, pub := homeFixture(t)
	ctx := context.Background()
	v.down = true
	homes.Opened(ctx, homeLead)
	homes.Changed(ctx, f.r(t), ops.PhasePlanned)
	homes.Flush(ctx)
	if pub.total() != 1 {
		t.Errorf("published %d views with the viewers' memory down, want the one opened", pub.total())
	}
}

// failingPublisher refuses the first n publishes, as a views.publish that timed out or failed would.
type failingPublisher struct {
	memPublisher
	fail int
}

func (p *failingPublisher) PublishHome(ctx context.Context, user string, v slack.HomeTabViewRequest) error {
	p.mu.Lock()
	if p.fail > 0 {
		p.fail--
		p.mu.Unlock()
		return fmt.Errorf("views.publish: %w", context.DeadlineExceeded)
	}
	p.mu.Unlock()
	return p.memPublisher.PublishHome(ctx, user, v)
}

// TestHomePublishFailureIsRetriedByTheNextChange: a publish that failed is not remembered as published, so the
// next change sends the view even though it draws the same.
func TestHomePublishFailureIsRetriedByTheNextChange(t *testing.T) {
	f := newMatrixFixture(t)
	v, p := &memViewers{}, &failingPublisher{fail: 1}
	homes := NewHomes(f.h, v, p, HomeOptions{})
	ctx := context.Background()
	homes.Opened(ctx, homeLead)
	homes.Flush(ctx)
	if p.total() != 0 || v.published[homeLead] != "" {
		t.Fatalf("a failed publish was recorded: %d views, hash %q", p.total(), v.published[homeLead])
	}
	homes.Changed(ctx, f.r(t), ops.PhasePlanned)
	homes.Flush(ctx)
	if p.total() != 1 {
		t.Errorf("after a failed publish the next change published %d views, want 1", p.total())
	}
}

// grantsSection stands in for the standing grants that will fill the Home's slot for more sections.
type grantsSection struct{ err error }

func (grantsSection) HomeTitle() string { return "Your grants <!here>" }
func (g grantsSection) HomeBlocks(_ context.Context, who ops.Initiator) ([]slack.Block, error) {
	var out []slack.Block
	for i := range 12 {
		out = append(out, section(fmt.Sprintf("grant %d of %s", i, mention(who.ID))))
	}
	return out, g.err
}

// TestHomeSectionsSlot: a section another feature adds is drawn after the budgets, its title escaped, cut to its
// share of the view's blocks; one that cannot be read says so and the rest of the Home is drawn.
func TestHomeSectionsSlot(t *testing.T) {
	f := newMatrixFixture(t)
	f.h.cfg.HomeSections = []HomeSection{grantsSection{}, grantsSection{err: ops.ErrStateUnavailable}}
	v := f.home(t, homeLead)
	raw, _ := json.Marshal(v)
	s := string(raw)
	if strings.Contains(s, `\u003c!here`) || !strings.Contains(s, `Your grants \u0026lt;!here\u0026gt;`) {
		t.Errorf("the section's title is not escaped: %s", s)
	}
	if !strings.Contains(s, "grant 6 of") || strings.Contains(s, "grant 7 of") || !strings.Contains(s, "and more that does not fit here") {
		t.Errorf("the section was not cut to its share: %s", s)
	}
	if !strings.Contains(s, "Could not be read just now") || !strings.Contains(s, "req-r") {
		t.Errorf("a section that failed broke the Home: %s", s)
	}
	if i, j := strings.Index(s, "Your budgets"), strings.Index(s, "Your grants"); i < 0 || j < i {
		t.Errorf("the added section is not after the budgets")
	}
}

// Open and Recent are two reads: a request that finished between them is in both, "executing" in one and
// "succeeded" with a running workload in the other. Each Home section shows it once, at its newest version, and
// the view's block ids stay unique (Slack refuses the whole view otherwise, and that Home stops updating).
func TestHomeShowsARequestOnceWhenItFinishedBetweenReads(t *testing.T) {
	f := newMatrixFixture(t)
	told := &toldMap{}
	f.h.cfg.Workloads = told
	running := f.r(t)
	running.Phase, running.Version = ops.PhaseExecuting, 3
	done := running.Clone()
	done.Phase, done.Version = ops.PhaseSucceeded, 5
	job := ops.ObjectRef{Cluster: "c", Namespace: "n", Kind: "Job", Name: "web-train"}
	done.Result = &ops.Result{Summary: "Job web-train created", Watch: []ops.ObjectRef{job}}
	told.set(job, "running")
	snap := &HomeSnapshot{Open: []*ops.Record{running}, Recent: []*ops.Record{done}}
	for _, user := range []string{homeEngineer, homeLead} {
		d := f.h.HomeData(context.Background(), f.h.initiator(user, ""), snap, nil)
		for name, items := range map[string][]HomeItem{"Yours": d.Yours, "Running now": d.Running} {
			n := 0
			for _, it := range items {
				if it.Rec.ID() == "req-r" {
					n++
					if it.Rec.Phase != ops.PhaseSucceeded {
						t.Errorf("%s's %s shows req-r %s, want its newest version (succeeded)", user, name, it.Rec.Phase)
					}
				}
			}
			if n > 1 {
				t.Errorf("%s's %s shows req-r %d times", user, name, n)
			}
		}
		if len(d.Running) != 1 {
			t.Errorf("%s's Running now holds %d requests, want req-r, whose job runs", user, len(d.Running))
		}
		checkView(t, HomeView(f.h.catalog, d))
	}
}
