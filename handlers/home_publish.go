package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// HomeViewers remembers, across replicas, who opened their Home tab lately, what the Homes keep for each of them
// (the "pages" string: where they paged it and the notice of their last click, homeMemo) and what was last
// published to them (ops/state's Store implements it). It is a read-only surface's memory: the Homes fail soft
// when it is unreachable, and nothing a request does waits on it.
type HomeViewers interface {
	HomeOpened(ctx context.Context, user string) error
	HomeViewers(ctx context.Context) ([]string, error)
	HomeState(ctx context.Context, user string) (pages, published string, err error)
	SetHomePages(ctx context.Context, user, pages string) error
	SetHomePublished(ctx context.Context, user, hash string) error
}

// HomePublisher publishes a user's Home tab (views.publish; the bot's SlackClient implements it, within the
// method's rate tier).
type HomePublisher interface {
	PublishHome(ctx context.Context, user string, v slack.HomeTabViewRequest) error
}

// HomeOptions count what the Homes do; every field may be nil.
type HomeOptions struct {
	// OnPublish is told about every views.publish sent (err nil when Slack took it).
	OnPublish func(err error)
	// OnSkip is told about a refresh whose view equals the one last published: nothing is sent.
	OnSkip func()
	// OnCoalesce is told about a refresh asked for a viewer who already waits for one: the two go as one.
	OnCoalesce func()
	// OnChange is told, for every change of a request resolved, how many viewers' Homes it touches.
	OnChange func(touched int)
	// OnError is told about failures of the viewers' memory (Redis), which the Homes ride over.
	OnError func(error)
	// Workers publish at once, each to a different viewer (default 4).
	Workers int
}

// Homes keeps the Home tabs of the viewers who opened theirs up to date: on app_home_opened, on a click in Home,
// and on every change of a request, for exactly the viewers the change touches. Refreshes are coalesced per
// viewer: while one is pending or in flight, later ones join it, and the view drawn last is the one sent; a view
// equal to the one last published is not sent again.
type Homes struct {
	h       *Handler
	viewers HomeViewers
	pub     HomePublisher
	opts    HomeOptions

	mu sync.Mutex
	// pending are the viewers waiting for a refresh, in order; inFlight are being drawn or published.
	pending  map[string]*homeRefresh
	order    []string
	inFlight map[string]bool
	wake     chan struct{}
	// changes are the requests changed since the last round, by id, with the phase each was in before.
	changes map[string]homeChange
}

type homeChange struct {
	rec  *ops.Record
	from ops.Phase
}

// homeRefresh is a refresh waiting for a viewer.
type homeRefresh struct {
	// force sends the view even when it equals the last one published (Slack shows nothing until the first publish).
	force bool
	// acted is set when the viewer clicked in Home or opened it again: the notice of their last click goes.
	acted bool
	// notice is why the viewer's click was refused, kept at the top of their Home until they act again.
	notice string
}

// join adds a later refresh r to p: what the viewer did last decides the notice.
func (p *homeRefresh) join(r homeRefresh) {
	p.force = p.force || r.force
	if r.acted {
		p.acted, p.notice = true, ""
	}
	if r.notice != "" {
		p.notice = r.notice
	}
}

// homeMemo is what the Homes keep for one viewer between refreshes, in Redis (HomeViewers' "pages" string) so every
// replica draws the same: where they paged each section, and the notice of their last click in Home. A refusal told
// in Home stands in for the ephemeral message a click in a channel gets, which stays until the person moves on: so
// the notice stays while changes they did not make redraw their Home, and goes when they click in Home again or
// open it again.
type homeMemo struct {
	Pages  HomePages `json:"pages,omitempty"`
	Notice string    `json:"notice,omitempty"`
}

func (m homeMemo) encode() string {
	if len(m.Pages) == 0 && m.Notice == "" {
		return ""
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// decodeHomeMemo reads a viewer's memo; a string kept before notices were (the pages alone) is read as such, and
// anything unreadable is the first pages and no notice.
func decodeHomeMemo(s string) homeMemo {
	var raw struct {
		Pages  json.RawMessage `json:"pages"`
		Notice string          `json:"notice"`
	}
	if json.Unmarshal([]byte(s), &raw) == nil && (raw.Pages != nil || raw.Notice != "") {
		return homeMemo{Pages: DecodeHomePages(string(raw.Pages)), Notice: raw.Notice}
	}
	return homeMemo{Pages: DecodeHomePages(s)}
}

// NewHomes returns the Home tabs of h's viewers.
func NewHomes(h *Handler, viewers HomeViewers, pub HomePublisher, opts HomeOptions) *Homes {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	hs := &Homes{h: h, viewers: viewers, pub: pub, opts: opts, pending: map[string]*homeRefresh{},
		inFlight: map[string]bool{}, wake: make(chan struct{}, 1), changes: map[string]homeChange{}}
	h.homes = hs
	return hs
}

func (hs *Homes) fail(err error) {
	if err != nil && hs.opts.OnError != nil {
		hs.opts.OnError(err)
	}
}

// Opened handles app_home_opened: their Home is published and, when they may use HyperOps (CheckAccess), the viewer
// is remembered (failing soft) to be kept up to date. Anybody in the workspace can open the app's Home, and every
// change of a request is resolved against every viewer remembered: who may use nothing is shown why, once per
// opening, and never remembered. A visit takes away the notice of their last click.
func (hs *Homes) Opened(ctx context.Context, user string) {
	if hs.h.access.CheckAccess(ctx, hs.h.initiator(user, "")) == nil {
		hs.fail(hs.viewers.HomeOpened(ctx, user))
	}
	hs.refresh(user, homeRefresh{force: true, acted: true})
}

// Notice shows the viewer a line (mrkdwn, escaped by the caller) at the top of their Home: why their click in Home
// was refused, or that it was not recorded. It stays there, whichever replica redraws their Home, until they click
// in Home or open it again. It returns at once: the Homes' workers keep it and publish it.
func (hs *Homes) Notice(user, notice string) {
	hs.refresh(user, homeRefresh{force: true, notice: notice})
}

// Clicked is told of every click in the viewer's Home, before it is handled: the notice of their previous click
// goes, and their Home is drawn again, so a click on a button drawn before a change it missed (Approve on a request
// decided meanwhile, which changes nothing) still shows them where things stand. A notice the click earns is
// shown after it.
func (hs *Homes) Clicked(user string) {
	hs.refresh(user, homeRefresh{acted: true})
}

// page moves a section of the viewer's Home to offset and publishes it.
func (hs *Homes) page(ctx context.Context, user, metadata, value string) {
	pages := DecodeHomePages(metadata)
	if sec, off, ok := parsePage(value); ok {
		pages[sec] = off
	}
	// A click: the memo keeps the pages and loses the notice of the viewer's previous click.
	hs.fail(hs.viewers.SetHomePages(ctx, user, homeMemo{Pages: pages}.encode()))
	hs.refresh(user, homeRefresh{force: true, acted: true})
}

// Changed asks for the refresh of every viewer whose Home the change of rec touches: those it showed rec to before
// (from, the phase rec was in before the entries just told) or shows it to now. It returns at once (the outbox
// calls it); the next round works out whose Home that is.
func (hs *Homes) Changed(_ context.Context, rec *ops.Record, from ops.Phase) {
	hs.mu.Lock()
	if c, ok := hs.changes[rec.ID()]; ok {
		from = c.from
		if c.rec.Version > rec.Version {
			rec = c.rec
		}
	}
	hs.changes[rec.ID()] = homeChange{rec: rec, from: from}
	hs.mu.Unlock()
	hs.poke()
}

func (hs *Homes) poke() {
	select {
	case hs.wake <- struct{}{}:
	default:
	}
}

// resolve turns the changes since the last round into refreshes of the viewers they touch.
func (hs *Homes) resolve(ctx context.Context) {
	hs.mu.Lock()
	changes := hs.changes
	hs.changes = map[string]homeChange{}
	hs.mu.Unlock()
	if len(changes) == 0 {
		return
	}
	users, err := hs.viewers.HomeViewers(ctx)
	if err != nil {
		hs.fail(err)
		return
	}
	for _, c := range changes {
		touched := hs.Touched(ctx, c.rec, c.from, users)
		if hs.opts.OnChange != nil {
			hs.opts.OnChange(len(touched))
		}
		for _, u := range touched {
			hs.refresh(u, homeRefresh{})
		}
	}
}

// Touched returns the viewers, of users, whose Home the change of rec from phase from touches.
func (hs *Homes) Touched(ctx context.Context, rec *ops.Record, from ops.Phase, users []string) []string {
	var out []string
	for _, u := range users {
		if hs.h.HomeTouches(ctx, rec, from, hs.h.initiator(u, "")) {
			out = append(out, u)
		}
	}
	return out
}

// HomeTouches reports whether the Home of who shows rec, in its phase now or in phase from (HomeData's rules): as
// theirs, or, while it is open or its workloads are watched, as one they may see and act on (vote, stop, take
// over).
func (h *Handler) HomeTouches(ctx context.Context, rec *ops.Record, from ops.Phase, who ops.Initiator) bool {
	if rec.Request.Initiator.ID == who.ID || rec.Owner.ID == who.ID {
		return true
	}
	open := func(p ops.Phase) bool { return p != "" && !p.Terminal() }
	if !open(rec.Phase) && !open(from) && !watches(rec) {
		return false
	}
	if h.access.CheckView(ctx, rec, who) != nil {
		return false
	}
	voters, ok := h.access.(VoterCheck)
	return ok && voters.CheckVoter(ctx, rec, who) == nil
}

// refresh queues a refresh of user's Home, joining one already pending.
func (hs *Homes) refresh(user string, r homeRefresh) {
	hs.mu.Lock()
	if p, ok := hs.pending[user]; ok {
		p.join(r)
		hs.mu.Unlock()
		if hs.opts.OnCoalesce != nil {
			hs.opts.OnCoalesce()
		}
		return
	}
	hs.pending[user] = &r
	hs.order = append(hs.order, user)
	hs.mu.Unlock()
	hs.poke()
}

// Run publishes the pending refreshes until ctx ends: each round reads the requests once for every viewer it
// draws, and no viewer has two publishes in flight.
func (hs *Homes) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hs.wake:
		}
		for hs.round(ctx) {
		}
	}
}

// Flush publishes every pending refresh now (tests and benchmarks; Run does the same in the background).
func (hs *Homes) Flush(ctx context.Context) {
	for hs.round(ctx) {
	}
}

// round takes the pending viewers not in flight and publishes their Homes; false when there were none.
func (hs *Homes) round(ctx context.Context) bool {
	hs.resolve(ctx)
	hs.mu.Lock()
	var batch []string
	refreshes := map[string]homeRefresh{}
	rest := hs.order[:0:0]
	for _, u := range hs.order {
		if hs.inFlight[u] {
			rest = append(rest, u)
			continue
		}
		batch = append(batch, u)
		refreshes[u] = *hs.pending[u]
		delete(hs.pending, u)
		hs.inFlight[u] = true
	}
	hs.order = rest
	hs.mu.Unlock()
	if len(batch) == 0 {
		return false
	}
	defer func() {
		hs.mu.Lock()
		for _, u := range batch {
			delete(hs.inFlight, u)
		}
		hs.mu.Unlock()
	}()
	snap, err := hs.h.ReadHomeSnapshot(ctx)
	if err != nil {
		// Nothing to draw from: the next change or visit tries again, and nobody's request waits on it.
		hs.fail(fmt.Errorf("read the requests for Home: %w", err))
		return true
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(hs.opts.Workers, len(batch)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				hs.publish(ctx, u, refreshes[u], snap)
			}
		}()
	}
	for _, u := range batch {
		work <- u
	}
	close(work)
	wg.Wait()
	return true
}

// publish draws user's Home from snap and sends it unless it equals the view last published to them.
func (hs *Homes) publish(ctx context.Context, user string, r homeRefresh, snap *HomeSnapshot) {
	kept, published, err := hs.viewers.HomeState(ctx, user)
	hs.fail(err)
	memo := decodeHomeMemo(kept)
	if r.acted || r.notice != "" {
		if r.acted {
			memo.Notice = ""
		}
		if r.notice != "" {
			memo.Notice = r.notice
		}
		if next := memo.encode(); next != kept {
			hs.fail(hs.viewers.SetHomePages(ctx, user, next))
		}
	}
	d := hs.h.HomeData(ctx, hs.h.initiator(user, ""), snap, memo.Pages)
	if memo.Notice != "" {
		d.Notice = memo.Notice
	}
	v := HomeView(hs.h.catalog, d)
	v.Blocks.BlockSet = withCommandBlocks(v.Blocks.BlockSet, hs.h.cfg.Command) // the workspace's own slash command
	sum := viewHash(v)
	if !r.force && sum == published {
		if hs.opts.OnSkip != nil {
			hs.opts.OnSkip()
		}
		return
	}
	err = hs.pub.PublishHome(ctx, user, v)
	if hs.opts.OnPublish != nil {
		hs.opts.OnPublish(err)
	}
	if err != nil {
		hs.fail(fmt.Errorf("publish the Home of %s: %w", user, err))
		return
	}
	hs.fail(hs.viewers.SetHomePublished(ctx, user, sum))
}

// viewHash identifies what a view shows.
func viewHash(v slack.HomeTabViewRequest) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// parsePage reads a paging button's value, "<section>:<offset>".
func parsePage(value string) (section string, offset int, ok bool) {
	section, off, found := strings.Cut(value, ":")
	n, err := strconv.Atoi(off)
	if !found || err != nil || n < 0 {
		return "", 0, false
	}
	return section, n, true
}
