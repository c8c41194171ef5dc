package state_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/grants"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// TestModel is the model-based test of the features in combination (issue 32 point 5): rapid walks random sequences
// of submits (people, the agent, the on-call person; sizes and namespaces that make the $250 monthly budget
// matter), votes by anyone on the plan they saw (sometimes stale), grants given, used and revoked, break-glass and
// its acknowledgement, the world changing under an approved plan, reverts, cancels and stops, time passing (the
// sweep's reminders, escalations, expiries; budget windows' edges), executions delivered to either replica, a
// replica dying mid-step (the other resumes), and Redis answers lost after the command ran. It runs them through
// two real ops.Engines (two replicas with their own connections) on one real redis-server, the real approvals
// policy of modelConfig and a fake clock, and after every step checks, reading Redis:
//
//	(a) nothing reached approved without an authorized decision: a quorum of votes on that plan by people the
//	    policy lets vote on that request then; a live grant, within its bounds and uses, whose giver could
//	    approve the request and did not ask for it; a break-glass by its on-call requester with no earlier one
//	    unacknowledged; or a rule that asks for none. Every write carries a plan so decided.
//	(b) every budget window's use in the ledger is what the holds add up to; a request that is approved or
//	    running holds exactly its plan's cost, in the window of its approval; no window is past its limit but
//	    by a request approved over budget by its rule's overBudget approvers.
//	(c) a request that ended without a write (denied, cancelled, expired, rejected, failed before its write)
//	    or waits for approval holds nothing.
//	(d) at most one effective write per request.
//	(e) every transition of every request (every decision among them) is in the audit stream, a grant's and a
//	    break-glass's approval with them.
//
// A failure prints the shortest sequence rapid found, each step as the test logged it, and the seed
// (-rapid.seed); a pass logs the seed it walked from (chosen from the clock unless -rapid.seed or RAPID_SEED is set). Bounded here to modelChecks × modelSteps; `make model` runs 100,000 steps.
func TestModel(t *testing.T) {
	setRapidDefault(t, "rapid.checks", "RAPID_CHECKS", modelChecks)
	setRapidDefault(t, "rapid.steps", "RAPID_STEPS", modelSteps)
	setRapidDefault(t, "rapid.seed", "RAPID_SEED", strconv.FormatUint(uint64(time.Now().UnixNano()), 10))
	cfg, err := config.Parse([]byte(modelConfig), "model.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	admin := dial(t, srv.URL())
	var checks, steps atomic.Int64
	tolerated, covered := &tally{n: map[string]int{}}, &tally{n: map[string]int{}}
	start := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		m := newModel(rt, cfg, srv, admin, &steps)
		defer m.close()
		defer tolerated.add(m.tolerated)
		defer covered.add(m.covered)
		checks.Add(1)
		rt.Repeat(m.actions())
	})
	t.Logf("model: %d runs, %d steps in %s (-rapid.checks=%s -rapid.steps=%s -rapid.seed=%s)", checks.Load(), steps.Load(),
		time.Since(start).Round(time.Millisecond), rapidSetting("rapid.checks", "RAPID_CHECKS"),
		rapidSetting("rapid.steps", "RAPID_STEPS"), rapidSetting("rapid.seed", "RAPID_SEED"))
	for _, k := range slices.Sorted(maps.Keys(covered.n)) {
		t.Logf("model: seen %d times: %s", covered.n[k], k)
	}
	for _, k := range slices.Sorted(maps.Keys(tolerated.n)) {
		t.Logf("model: allowed %d times: %s", tolerated.n[k], k)
	}
}

// The bounded run of `go test ./ops/state`: about modelChecks × modelSteps steps (rapid.steps is an average).
const (
	modelChecks = "12"
	modelSteps  = "40"
)

// setRapidDefault sets rapid's flag name to value for this test unless the command line or the environment set it.
func setRapidDefault(t *testing.T, name, env, value string) {
	if _, ok := os.LookupEnv(env); ok {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if set {
		return
	}
	f := flag.Lookup(name)
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(name, old) })
}

// rapidSetting is the value rapid runs with: the environment's, else the flag's.
func rapidSetting(name, env string) string {
	if v, ok := os.LookupEnv(env); ok {
		return v
	}
	return flag.Lookup(name).Value.String()
}

// tally counts, across runs, what the invariants allowed by design (erring towards refusing).
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(n map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range n {
		t.n[k] += v
	}
}

const modelPrefix = "model"

var modelStart = time.Date(2030, 1, 30, 21, 0, 0, 0, time.UTC)

// replica is one engine with its own connection, which the test can cut (its process died) or make lose answers.
type replica struct {
	name   string
	client redis.UniversalClient
	hook   *faultHook
	store  *state.Store
	e      *engine.Engine
}

// model is one run: the system under test and what the test knows of it.
type model struct {
	cfg   *config.Config
	srv   *redistest.Server
	admin *state.Store // reads Redis as it is, with no fault
	rdb   redis.UniversalClient
	clock *clockwork.FakeClock
	world *worldOp
	queue *modelQueue
	reps  [2]*replica
	gens  [2]int
	steps *atomic.Int64

	closeMu sync.Mutex
	clients []redis.UniversalClient

	next int // request ids made so far
	step int

	recs    map[string]*ops.Record // as of the last check
	ids     []string               // sorted
	inc     map[string]*incarnation
	hashes  map[string][]string // every plan hash seen per request id
	expired []string            // ids whose record expired (may be reused)

	grants     map[string]grants.Grant
	revokedAt  map[string]int             // grant → the step whose revocation the engine confirmed
	grantUses  map[string]int             // grant → approvals by it seen
	grantCalls map[string]map[string]bool // request → who called ApproveAndGrant on it
	votes      map[string]bool            // id|voter|hash of every Approve and ApproveAndGrant call
	forced     map[string]bool            // request ids approved over budget
	glass      []*glassEvent

	auditCursor string
	audit       map[string]state.AuditLine

	reportMu sync.Mutex
	reports  []string

	pendingTouch []string // ids an action lost an answer on, for their incarnation once it is seen

	holds  map[string]heldBy  // the holds as of the last check
	frozen map[string]float64 // per window, what holds replaced by a reused id's counted

	tolerated map[string]int
	covered   map[string]int // what happened, for the run's summary
}

// incarnation is one life of a request id: a record expired and its id reused is a new one.
type incarnation struct {
	created        time.Time
	validated      int // history entries whose decisions were checked
	audited        int // history entries found in the audit stream
	approvedHashes map[string]bool
	effective      map[int]int // effective writes per resume: a person's Resume after an unknown outcome runs it anew
	settled        bool
	touched        bool // an action on it lost a Redis answer
}

type glassEvent struct {
	id, by string
	at     time.Time
	ackAt  time.Time
}

func newModel(t *rapid.T, cfg *config.Config, srv *redistest.Server, admin redis.UniversalClient, steps *atomic.Int64) *model {
	ctx := context.Background()
	// Scripts too: a replica's first use of a script is then always EVALSHA and EVAL, so the n-th command whose
	// answer is lost is the same command in every replay of a sequence.
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("flush scripts: %v", err)
	}
	m := &model{cfg: cfg, srv: srv, rdb: admin, admin: state.New(admin, state.Options{KeyPrefix: modelPrefix}),
		clock: clockwork.NewFakeClockAt(modelStart), world: newWorldOp(), queue: &modelQueue{}, steps: steps,
		recs: map[string]*ops.Record{}, inc: map[string]*incarnation{}, hashes: map[string][]string{},
		grants: map[string]grants.Grant{}, revokedAt: map[string]int{}, grantUses: map[string]int{},
		grantCalls: map[string]map[string]bool{}, votes: map[string]bool{}, forced: map[string]bool{},
		audit: map[string]state.AuditLine{}, tolerated: map[string]int{}, holds: map[string]heldBy{}, frozen: map[string]float64{}, covered: map[string]int{}}
	m.world.die = m.kill
	for i := range m.reps {
		m.reps[i] = m.newReplica(t, i)
	}
	return m
}

func (m *model) newReplica(t *rapid.T, slot int) *replica {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := state.Dial(ctx, m.srv.URL())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	m.closeMu.Lock()
	m.clients = append(m.clients, c)
	m.closeMu.Unlock()
	h := newFaultHook()
	c.AddHook(h)
	name := fmt.Sprintf("r%d", slot+1)
	if m.gens[slot] > 0 {
		name = fmt.Sprintf("r%d.%d", slot+1, m.gens[slot])
	}
	m.gens[slot]++
	catalog := ops.NewCatalog()
	catalog.Register(m.world)
	s := state.New(c, state.Options{KeyPrefix: modelPrefix})
	p := approvals.New(m.cfg, modelDirectory{}, m.clock)
	e := engine.New(catalog, s, s, p, engine.Options{Replica: name, Clock: m.clock, Risk: ops.RiskPolicy{},
		Queue: m.queue, Ledger: s, Glass: s, Grants: s, OnError: m.report})
	return &replica{name: name, client: c, hook: h, store: s, e: e}
}

func (m *model) close() {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	for _, c := range m.clients {
		_ = c.Close()
	}
}

// kill cuts the connection of the replica named name: its process died.
func (m *model) kill(name string) {
	for _, r := range m.reps {
		if r.name == name {
			r.hook.kill()
		}
	}
}

func (m *model) report(id string, err error) {
	m.reportMu.Lock()
	defer m.reportMu.Unlock()
	m.reports = append(m.reports, fmt.Sprintf("%s: %v", id, err))
}

func (m *model) logf(t *rapid.T, format string, args ...any) {
	t.Logf("#%d %s: "+format, append([]any{m.step, m.clock.Now().Format("01-02 15:04:05")}, args...)...)
}

func ctxModel() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// --- actions -----------------------------------------------------------------------------------------------------

// act is an action on the replica the step chose; it returns the request ids it acted on (for lost answers).
type act func(t *rapid.T, r *replica) []string

// step is one kind of action: ready says whether it can be taken now (checked before anything is drawn, so
// rapid tries another), run takes it.
type step struct {
	ready func() bool
	run   act
}

func (m *model) steps_() map[string]step {
	always := func() bool { return true }
	has := func(ok func(*ops.Record) bool) func() bool {
		return func() bool { return slices.ContainsFunc(m.ids, func(id string) bool { return ok(m.recs[id]) }) }
	}
	awaiting := has(phaseIs(ops.PhaseAwaitingApproval))
	return map[string]step{
		"submit":        {always, m.submit},
		"submitSimilar": {m.similarReady, m.submitSimilar},
		"vote":          {has(anyRecord), m.vote},
		"approve":       {awaiting, m.approve},
		"grant":         {awaiting, m.give},
		"revoke":        {func() bool { return len(m.grants) > 0 }, m.revoke},
		"breakGlass":    {awaiting, m.breakGlass},
		"acknowledge":   {has(func(r *ops.Record) bool { return r.BreakGlass != nil }), m.acknowledge},
		"changeWorld":   {always, m.changeWorld},
		"revert":        {has(phaseIs(ops.PhaseSucceeded)), m.revert},
		"cancel":        {has(anyRecord), m.cancel},
		"steward":       {has(phaseIs(ops.PhaseInterrupted)), m.steward},
		"wait":          {always, m.wait},
		"execute":       {m.executionReady, m.execute},
		"settle":        {has(phaseIs(ops.PhaseSucceeded)), m.settle},
		"expireRecord":  {has(func(r *ops.Record) bool { return r.Phase.Terminal() }), m.expireRecord},
	}
}

func (m *model) actions() map[string]func(*rapid.T) {
	out := map[string]func(*rapid.T){"": m.check}
	for name, s := range m.steps_() {
		out[name] = func(t *rapid.T) {
			if !s.ready() {
				t.SkipNow()
			}
			m.begin()
			s.run(t, m.pickReplica(t))
			m.flushReports(t)
		}
	}
	out["crash"] = func(t *rapid.T) {
		if !m.executionReady() {
			t.SkipNow()
		}
		m.begin()
		m.crash(t)
		m.flushReports(t)
	}
	out["loseAnswer"] = func(t *rapid.T) {
		m.begin()
		m.loseAnswer(t)
		m.flushReports(t)
	}
	return out
}

// begin counts a step.
func (m *model) begin() {
	m.step++
	m.steps.Add(1)
}

func (m *model) flushReports(t *rapid.T) {
	m.reportMu.Lock()
	rs := m.reports
	m.reports = nil
	m.reportMu.Unlock()
	for _, r := range rs {
		m.logf(t, "  engine reported: %s", r)
	}
}

func (m *model) pickReplica(t *rapid.T) *replica {
	return m.reps[rapid.IntRange(0, 1).Draw(t, "replica")]
}

var (
	modelRequesters = []ops.Initiator{alice, bob, opsAgent, lead1, lead2}
	modelVoters     = []ops.Initiator{lead1, lead2, lead1, lead2, modelMgr, alice, bob, modelEve, opsAgent}
	modelNamespaces = []string{"ml", "ml", "ml", "ml-x", "ml-q", "ml-dev"}
	modelGroups     = []string{"g1", "g2", "g3"}
)

// pick draws one of the requests of the last check that satisfy ok, the newest first: rapid shrinks a draw towards
// 0, and "the newest" keeps its meaning when shrinking drops an earlier step.
func (m *model) pick(t *rapid.T, what string, ok func(*ops.Record) bool) *ops.Record {
	var recs []*ops.Record
	for _, id := range m.ids {
		if ok(m.recs[id]) {
			recs = append(recs, m.recs[id])
		}
	}
	if len(recs) == 0 {
		t.Fatalf("model: no request %s, and the step was ready", what)
	}
	return recs[rapid.IntRange(0, len(recs)-1).Draw(t, "request")]
}

// newestFirst orders records by when they were created, the newest first (ties by id, the later first).
func newestFirst(recs map[string]*ops.Record) []string {
	ids := slices.Sorted(maps.Keys(recs))
	slices.SortStableFunc(ids, func(a, b string) int {
		if c := recs[b].CreatedAt.Compare(recs[a].CreatedAt); c != 0 {
			return c
		}
		return idOrder(b, a)
	})
	return ids
}

// idOrder orders r2 before r10.
func idOrder(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func anyRecord(*ops.Record) bool { return true }

func phaseIs(ps ...ops.Phase) func(*ops.Record) bool {
	return func(r *ops.Record) bool { return slices.Contains(ps, r.Phase) }
}

func (m *model) newID() string {
	m.next++
	return fmt.Sprintf("r%d", m.next)
}

func outcome(rec *ops.Record, err error) string {
	s := "no record"
	if rec != nil {
		s = fmt.Sprintf("%s %s", rec.ID(), rec.Phase)
	}
	if err != nil {
		ue := ops.AsError(err)
		s += fmt.Sprintf(" (%s: %s)", ue.Code, ue.Message)
	}
	return s
}

func (m *model) submit(t *rapid.T, r *replica) []string {
	who := rapid.SampledFrom(modelRequesters).Draw(t, "who")
	ns := rapid.SampledFrom(modelNamespaces).Draw(t, "namespace")
	g := rapid.SampledFrom(modelGroups).Draw(t, "group")
	size := rapid.SampledFrom([]int{1, 1, 2, 2, 3, 4, -1}).Draw(t, "size")
	req := ops.Request{Operation: "test-scale", Target: ops.Target{Cluster: "c1", Namespace: ns},
		Params: ops.Params{"group": g, "count": int64(max(m.world.count(g)+size, 0))}, Initiator: who}
	how := "new"
	switch rapid.IntRange(0, 11).Draw(t, "mode") {
	case 0:
		req.RequiresApproval, how = true, "new, asking for approval"
	case 1:
		req.DryRun, how = true, "new dry run"
	case 2, 3:
		if len(m.ids) > 0 {
			prev := m.recs[m.ids[rapid.IntRange(0, len(m.ids)-1).Draw(t, "resend")]]
			req, how = prev.Request, "sent again"
			req.DryRun = false
		}
	case 4:
		if len(m.expired) > 0 {
			req.ID, how = m.expired[len(m.expired)-1-rapid.IntRange(0, len(m.expired)-1).Draw(t, "reuse")], "reusing the id of an expired record"
		}
	}
	if req.ID == "" {
		req.ID = m.newID()
	}
	return m.doSubmit(t, r, req, how)
}

func (m *model) doSubmit(t *rapid.T, r *replica, req ops.Request, how string) []string {
	ctx, cancel := ctxModel()
	defer cancel()
	rec, err := r.e.Submit(ctx, req)
	m.logf(t, "submit on %s (%s) %s by %s: %s/%s %s→%d%s → %s", r.name, how, req.ID, req.Initiator.Name,
		req.Target.Namespace, req.Params.String("group"), "", req.Params.IntOr("count", 0), flags(req), outcome(rec, err))
	ids := []string{req.ID}
	if rec != nil {
		ids = append(ids, rec.ID())
	}
	return ids
}

func flags(req ops.Request) string {
	s := ""
	if req.RequiresApproval {
		s += " requiresApproval"
	}
	if req.DryRun {
		s += " dryRun"
	}
	return s
}

// submitSimilar asks for what a grant the model knows may approve: its requester, a group its pattern matches,
// within its size cap.
func (m *model) submitSimilar(t *rapid.T, r *replica) []string {
	var ids []string
	for _, id := range m.grantIDs() {
		if slices.ContainsFunc(modelGroups, func(x string) bool { ok, _ := path.Match(m.grants[id].Target, x); return ok }) {
			ids = append(ids, id)
		}
	}
	g := m.grants[ids[rapid.IntRange(0, len(ids)-1).Draw(t, "grant")]]
	var groups []string
	for _, x := range modelGroups {
		if ok, _ := path.Match(g.Target, x); ok {
			groups = append(groups, x)
		}
	}
	grp := rapid.SampledFrom(groups).Draw(t, "group")
	size := rapid.IntRange(1, max(g.MaxSize, 1)).Draw(t, "size")
	ns := rapid.SampledFrom([]string{"ml", "ml", "ml-x", "ml-q"}).Draw(t, "namespace")
	req := ops.Request{ID: m.newID(), Operation: g.Operation, Target: ops.Target{Cluster: g.Cluster, Namespace: ns},
		Params: ops.Params{"group": grp, "count": int64(m.world.count(grp) + size)}, Initiator: g.Requester}
	return m.doSubmit(t, r, req, "like grant "+g.ID)
}

// seenHash is the plan hash a voter saw: the current one (as of the last check), an older one, or none.
func (m *model) seenHash(t *rapid.T, rec *ops.Record) (string, string) {
	switch rapid.IntRange(0, 5).Draw(t, "hash") {
	case 0:
		if hs := m.hashes[rec.ID()]; len(hs) > 0 {
			h := hs[len(hs)-1-rapid.IntRange(0, len(hs)-1).Draw(t, "old hash")]
			return h, "an older plan " + ops.ShortHash(h)
		}
	case 1:
		return "", "no plan"
	}
	return rec.Approval.PlanHash, "the plan " + ops.ShortHash(rec.Approval.PlanHash)
}

func (m *model) castVote(rec *ops.Record, who ops.Initiator, hash string) {
	m.votes[rec.ID()+"|"+who.ID+"|"+hash] = true
}

// vote: anyone approves or denies anything, on the plan they saw.
func (m *model) vote(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "", anyRecord)
	who := rapid.SampledFrom(modelVoters).Draw(t, "voter")
	return m.doVote(t, r, rec, who, rapid.IntRange(0, 3).Draw(t, "deny") != 0)
}

// approve: a likely approver approves a request waiting for approval.
func (m *model) approve(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "awaiting approval", phaseIs(ops.PhaseAwaitingApproval))
	who := rapid.SampledFrom([]ops.Initiator{lead1, lead2, lead2, modelMgr}).Draw(t, "voter")
	return m.doVote(t, r, rec, who, true)
}

func (m *model) doVote(t *rapid.T, r *replica, rec *ops.Record, who ops.Initiator, approve bool) []string {
	ctx, cancel := ctxModel()
	defer cancel()
	if !approve {
		got, err := r.e.DenyWithReason(ctx, rec.ID(), who, "model")
		m.logf(t, "deny on %s: %s denies %s → %s", r.name, who.Name, rec.ID(), outcome(got, err))
		return []string{rec.ID()}
	}
	hash, saw := m.seenHash(t, rec)
	m.castVote(rec, who, hash)
	got, err := r.e.Approve(ctx, rec.ID(), who, hash)
	m.logf(t, "approve on %s: %s approves %s, having seen %s → %s", r.name, who.Name, rec.ID(), saw, outcome(got, err))
	return []string{rec.ID()}
}

// give: Approve and allow similar…, by anyone, with bounds around the request's.
func (m *model) give(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "awaiting approval", phaseIs(ops.PhaseAwaitingApproval))
	who := rapid.SampledFrom([]ops.Initiator{lead1, lead2, lead1, lead2, alice, modelMgr}).Draw(t, "giver")
	hash, saw := m.seenHash(t, rec)
	g := rec.Request.Params.String("group")
	spec := grants.Spec{
		Target:    rapid.SampledFrom([]string{g, "g*", "g*", "g[12]", "h*"}).Draw(t, "target"),
		MaxSize:   rapid.SampledFrom([]int{1, 2, 2, 3, 4, 0}).Draw(t, "maxSize"),
		MaxHourly: rapid.SampledFrom([]float64{40, 80, 160, 160, 0}).Draw(t, "maxHourly"),
		MaxTotal:  rapid.SampledFrom([]float64{0, 160, 320}).Draw(t, "maxTotal"),
		Uses:      rapid.IntRange(1, 3).Draw(t, "uses"),
		Hours:     rapid.SampledFrom([]float64{1, 2, 8, 8, 9}).Draw(t, "hours"),
		Thread:    map[string]string{"channel": "C0OPS", "ts": "1.000"},
	}
	m.castVote(rec, who, hash)
	if m.grantCalls[rec.ID()] == nil {
		m.grantCalls[rec.ID()] = map[string]bool{}
	}
	m.grantCalls[rec.ID()][who.ID] = true
	ctx, cancel := ctxModel()
	defer cancel()
	got, gr, err := r.e.ApproveAndGrant(ctx, rec.ID(), who, hash, spec)
	given := "no grant"
	if gr != nil {
		given = fmt.Sprintf("grant %s (%s, %d uses, until %s)", gr.ID, gr.Bounds(), gr.Uses, gr.ExpiresAt.Format("01-02 15:04"))
		if _, ok := m.grants[gr.ID]; !ok {
			m.grants[gr.ID] = *gr
		}
	}
	m.logf(t, "grant on %s: %s approves %s having seen %s and allows similar (target %s, size ≤ %d, ≤ $%g/h, ≤ $%g, %d uses, %gh) → %s; %s",
		r.name, who.Name, rec.ID(), saw, spec.Target, spec.MaxSize, spec.MaxHourly, spec.MaxTotal, spec.Uses, spec.Hours, outcome(got, err), given)
	return []string{rec.ID()}
}

func (m *model) revoke(t *rapid.T, r *replica) []string {
	ids := m.grantIDs()
	id := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "grant")]
	who := rapid.SampledFrom([]ops.Initiator{lead1, lead2, alice, bob, modelMgr}).Draw(t, "who")
	ctx, cancel := ctxModel()
	defer cancel()
	g, revoked, err := r.e.RevokeGrant(ctx, id, who)
	if err == nil && g.RevokedBy != nil {
		if _, ok := m.revokedAt[id]; !ok {
			m.revokedAt[id] = m.step
		}
	}
	m.logf(t, "revoke on %s: %s revokes %s → revoked %v, %v", r.name, who.Name, id, revoked, errText(err))
	return []string{m.grants[id].GivenIn}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	ue := ops.AsError(err)
	return fmt.Sprintf("%s: %s", ue.Code, ue.Message)
}

func (m *model) breakGlass(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "awaiting approval", phaseIs(ops.PhaseAwaitingApproval))
	who := rec.Request.Initiator
	if rapid.IntRange(0, 4).Draw(t, "someone else") == 0 {
		who = rapid.SampledFrom([]ops.Initiator{alice, bob, lead1}).Draw(t, "who")
	}
	ctx, cancel := ctxModel()
	defer cancel()
	got, err := r.e.BreakGlass(ctx, rec.ID(), who, "model: it cannot wait")
	m.logf(t, "break glass on %s: %s on %s → %s", r.name, who.Name, rec.ID(), outcome(got, err))
	return []string{rec.ID()}
}

func (m *model) acknowledge(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "that broke glass", func(r *ops.Record) bool { return r.BreakGlass != nil })
	who := rapid.SampledFrom([]ops.Initiator{lead1, lead2, alice, modelMgr, bob}).Draw(t, "who")
	ctx, cancel := ctxModel()
	defer cancel()
	got, err := r.e.AcknowledgeBreakGlass(ctx, rec.ID(), who)
	m.logf(t, "acknowledge on %s: %s acknowledges the break-glass of %s → %s", r.name, who.Name, rec.ID(), outcome(got, err))
	return []string{rec.ID()}
}

// changeWorld: someone scales a group outside HyperOps, so plans made against it go stale.
func (m *model) changeWorld(t *rapid.T, _ *replica) []string {
	g := rapid.SampledFrom(modelGroups).Draw(t, "group")
	n := rapid.IntRange(0, 6).Draw(t, "count")
	m.logf(t, "the world changes: %s has %d nodes (was %d)", g, n, m.world.count(g))
	m.world.setCount(g, n)
	return nil
}

func (m *model) revert(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "succeeded", phaseIs(ops.PhaseSucceeded))
	who := rec.Request.Initiator
	if rapid.Bool().Draw(t, "someone else") {
		who = rapid.SampledFrom(modelRequesters).Draw(t, "who")
	}
	ctx, cancel := ctxModel()
	defer cancel()
	got, err := r.e.Revert(ctx, rec.ID(), ops.Request{Initiator: who})
	m.logf(t, "revert on %s: %s reverts %s → %s", r.name, who.Name, rec.ID(), outcome(got, err))
	ids := []string{rec.ID()}
	if got != nil {
		ids = append(ids, got.ID())
	}
	return ids
}

func (m *model) cancel(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "", anyRecord)
	ctx, cancel := ctxModel()
	defer cancel()
	if rapid.Bool().Draw(t, "stop") {
		who := rapid.SampledFrom([]ops.Initiator{lead1, lead2, rec.Owner, bob}).Draw(t, "who")
		got, err := r.e.Stop(ctx, rec.ID(), who)
		m.logf(t, "stop on %s: %s stops %s → %s", r.name, who.Name, rec.ID(), outcome(got, err))
		return []string{rec.ID()}
	}
	who := rec.Owner
	if rapid.IntRange(0, 3).Draw(t, "someone else") == 0 {
		who = rapid.SampledFrom(modelVoters).Draw(t, "who")
	}
	got, err := r.e.Cancel(ctx, rec.ID(), who)
	m.logf(t, "cancel on %s: %s cancels %s → %s", r.name, who.Name, rec.ID(), outcome(got, err))
	return []string{rec.ID()}
}

// steward: a person takes over an interrupted request and resumes it, or its owner resumes it.
func (m *model) steward(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "interrupted", phaseIs(ops.PhaseInterrupted))
	who := rapid.SampledFrom([]ops.Initiator{lead1, lead2, rec.Owner}).Draw(t, "who")
	ctx, cancel := ctxModel()
	defer cancel()
	got, err := r.e.TakeOver(ctx, rec.ID(), who)
	m.logf(t, "take over on %s: %s takes %s over → %s", r.name, who.Name, rec.ID(), outcome(got, err))
	if err == nil {
		got, err = r.e.Resume(ctx, rec.ID(), who)
		m.logf(t, "resume on %s: %s resumes %s → %s", r.name, who.Name, rec.ID(), outcome(got, err))
	}
	return []string{rec.ID()}
}

// wait lets time pass (minutes to days, or to just before or after a budget window's edge), forgets the locks a
// dead replica or a lost answer left (their TTL runs out: nobody renews them), and sweeps.
func (m *model) wait(t *rapid.T, r *replica) []string {
	now := m.clock.Now()
	day := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	month := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	choices := []time.Duration{30 * time.Second, 30 * time.Second, 3 * time.Minute, 3 * time.Minute, 21 * time.Minute,
		21 * time.Minute, 41 * time.Minute, 61 * time.Minute, 3 * time.Hour, 26 * time.Hour, 8 * 24 * time.Hour,
		day.Sub(now) - time.Second, day.Sub(now) + time.Second, month.Sub(now) - time.Second, month.Sub(now) + time.Second}
	d := choices[rapid.IntRange(0, len(choices)-1).Draw(t, "wait")]
	d = max(d, time.Second)
	m.clock.Advance(d)
	if d >= 2*time.Minute {
		m.dropLocks(t)
	}
	ctx, cancel := ctxModel()
	defer cancel()
	changed, err := r.e.Sweep(ctx)
	var what []string
	for _, c := range changed {
		what = append(what, fmt.Sprintf("%s %s", c.ID(), c.Phase))
	}
	m.logf(t, "wait %s, then sweep on %s: changed [%s] %s", d, r.name, strings.Join(what, ", "), errText(err))
	var active []string
	for _, id := range m.ids {
		if !m.recs[id].Phase.Terminal() {
			active = append(active, id)
		}
	}
	return active
}

// dropLocks deletes every lock: between steps no execution runs, so a lock still held is a dead replica's or one
// whose release answer was lost, and its TTL (lock 30s, planning 2m) has run out.
func (m *model) dropLocks(t *rapid.T) {
	ctx, cancel := ctxModel()
	defer cancel()
	keys := m.keys(t, ctx, "locks", "lock", "*")
	if len(keys) > 0 {
		if err := m.rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatalf("drop locks: %v", err)
		}
	}
}

// execute delivers a queued request (or any approved or executing one) to an executor of the chosen replica.
func (m *model) execute(t *rapid.T, r *replica) []string {
	id := m.pickExecution(t)
	m.exec(t, r, id)
	return []string{id}
}

func (m *model) pickExecution(t *rapid.T) string {
	ids := m.queue.pending()
	if len(ids) == 0 || (m.unqueuedReady() && rapid.IntRange(0, 5).Draw(t, "unqueued") == 0) {
		return m.pick(t, "to execute", phaseIs(ops.PhaseApproved, ops.PhaseExecuting)).ID()
	}
	var ordered []string // the newest request first, as pick does
	for _, id := range m.ids {
		if slices.Contains(ids, id) {
			ordered = append(ordered, id)
		}
	}
	for _, id := range ids {
		if !slices.Contains(ordered, id) {
			ordered = append(ordered, id)
		}
	}
	return ordered[rapid.IntRange(0, len(ordered)-1).Draw(t, "queued")]
}

func (m *model) unqueuedReady() bool {
	return slices.ContainsFunc(m.ids, func(id string) bool { return phaseIs(ops.PhaseApproved, ops.PhaseExecuting)(m.recs[id]) })
}

func (m *model) executionReady() bool { return len(m.queue.pending()) > 0 || m.unqueuedReady() }

// grantIDs are the grants the model knows, the latest given first.
func (m *model) grantIDs() []string {
	ids := slices.Sorted(maps.Keys(m.grants))
	slices.SortStableFunc(ids, func(a, b string) int { return m.grants[b].GivenAt.Compare(m.grants[a].GivenAt) })
	return ids
}

// similarReady: some grant's pattern matches a group of the world.
func (m *model) similarReady() bool {
	for _, g := range m.grants {
		for _, x := range modelGroups {
			if ok, _ := path.Match(g.Target, x); ok {
				return true
			}
		}
	}
	return false
}

// exec runs one execution of id on r, in a goroutine of its own that dies with the replica if it was asked to.
func (m *model) exec(t *rapid.T, r *replica, id string) {
	m.queue.take(id)
	ctx, cancel := ctxModel()
	defer cancel()
	var rec *ops.Record
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec, err = r.e.Execute(ctx, id)
	}()
	<-done
	if m.world.died(r.name) {
		m.covered["replica died"]++
		m.logf(t, "execute %s on %s: the replica died", id, r.name)
		m.restart(t, r)
		return
	}
	m.logf(t, "execute %s on %s → %s", id, r.name, outcome(rec, err))
}

// restart replaces a dead replica with a new process (a new engine, connection and name).
func (m *model) restart(t *rapid.T, dead *replica) {
	for i, r := range m.reps {
		if r == dead {
			m.reps[i] = m.newReplica(t, i)
			m.logf(t, "%s restarted as %s", dead.name, m.reps[i].name)
		}
	}
}

// crash: the chosen replica dies in the execution it is given, before its write reaches the world, after it did,
// or while it awaits the outcome; the other replica resumes it once its lease has run out (wait, then execute).
func (m *model) crash(t *rapid.T) {
	r := m.pickReplica(t)
	at := rapid.SampledFrom([]crashPoint{crashBeforeSend, crashAfterSend, crashInAwait}).Draw(t, "crash")
	id := m.pickExecution(t)
	m.logf(t, "crash: %s is to die %s", r.name, at)
	m.world.arm(r.name, at)
	m.exec(t, r, id)
	m.world.arm(r.name, noCrash)
}

// loseAnswer: the chosen replica loses the answer to one of its next Redis commands (the command ran) while it
// does one more step.
func (m *model) loseAnswer(t *rapid.T) {
	r := m.pickReplica(t)
	n := rapid.IntRange(0, 14).Draw(t, "lose")
	steps := m.steps_()
	var names []string
	for _, name := range slices.Sorted(maps.Keys(steps)) {
		if name != "changeWorld" && name != "expireRecord" && steps[name].ready() {
			names = append(names, name)
		}
	}
	name := rapid.SampledFrom(names).Draw(t, "step")
	m.logf(t, "lose answer: %s is to lose the answer to its command %d from now, in a %s", r.name, n, name)
	r.hook.arm(n)
	ids := steps[name].run(t, r)
	if lost := r.hook.disarm(); lost != "" {
		m.logf(t, "  the answer to %s was lost (touches %v)", lost, ids)
		m.covered["lost answer: "+strings.Fields(lost)[0]]++
		for _, id := range ids {
			if inc := m.inc[id]; inc != nil {
				inc.touched = true
			}
			m.pendingTouch = append(m.pendingTouch, id)
		}
	}
}

// settle: the run of a succeeded request ends (its watcher saw it), and its budget is settled.
func (m *model) settle(t *rapid.T, r *replica) []string {
	rec := m.pick(t, "succeeded", phaseIs(ops.PhaseSucceeded))
	ctx, cancel := ctxModel()
	defer cancel()
	err := r.e.SettleRun(ctx, rec.ID(), m.clock.Now())
	if err == nil {
		if inc := m.inc[rec.ID()]; inc != nil {
			inc.settled = true
		}
	}
	m.logf(t, "settle on %s: the run of %s ended → %s", r.name, rec.ID(), errText(err))
	return []string{rec.ID()}
}

// expireRecord: a finished request's record reaches its TTL (redis.requestTTL) and Redis drops it; its id may be
// sent again.
func (m *model) expireRecord(t *rapid.T, _ *replica) []string {
	rec := m.pick(t, "finished", func(r *ops.Record) bool { return r.Phase.Terminal() })
	ctx, cancel := ctxModel()
	defer cancel()
	key := func(parts ...string) string { return "{" + modelPrefix + "}:" + strings.Join(parts, ":") }
	if err := m.rdb.Del(ctx, key("req", rec.ID())).Err(); err != nil {
		t.Fatalf("expire %s: %v", rec.ID(), err)
	}
	m.rdb.ZRem(ctx, key("idx"), rec.ID())
	m.rdb.ZRem(ctx, key("phase", string(rec.Phase)), rec.ID())
	for _, g := range m.glass {
		if g.id == rec.ID() && g.ackAt.IsZero() {
			g.ackAt = m.clock.Now() // its claim is stale once its request is gone
		}
	}
	if !slices.Contains(m.expired, rec.ID()) {
		m.expired = append(m.expired, rec.ID())
	}
	delete(m.inc, rec.ID())
	// A record expires long after it was written: a request reusing its id is never created at the same instant.
	m.clock.Advance(time.Second)
	m.logf(t, "the record of %s (%s) expires", rec.ID(), rec.Phase)
	return nil
}

// --- invariants ----------------------------------------------------------------------------------------------------

// check reads every record, the ledger and the audit stream from Redis and checks (a) to (e).
func (m *model) check(t *rapid.T) {
	ctx, cancel := ctxModel()
	defer cancel()
	recs := m.readRecords(t, ctx)
	ids := slices.Sorted(maps.Keys(recs))
	for _, id := range ids {
		rec := recs[id]
		if inc := m.inc[id]; inc == nil || !inc.created.Equal(rec.CreatedAt) {
			m.inc[id] = &incarnation{created: rec.CreatedAt, approvedHashes: map[string]bool{}, effective: map[int]int{}}
		}
	}
	for _, id := range m.pendingTouch {
		if inc := m.inc[id]; inc != nil {
			inc.touched = true
		}
	}
	m.pendingTouch = nil
	writes := m.world.takeWrites()
	for _, w := range writes {
		inc := m.inc[w.ID]
		if inc == nil || recs[w.ID] == nil {
			m.fail(t, nil, "(d) %s wrote %s %d→%d on %s, and has no record", w.ID, w.Group, w.From, w.To, w.Replica)
		}
		if w.Effective {
			n := resumes(recs[w.ID])
			inc.effective[n]++
			m.covered["effective write"]++
			if inc.effective[n] > 1 {
				m.fail(t, recs[w.ID], "(d) %s changed the world %d times (this time %s %d→%d, on %s)", w.ID, inc.effective[n], w.Group, w.From, w.To, w.Replica)
			}
		}
	}
	for _, id := range ids {
		m.checkDecisions(t, recs[id], m.inc[id])
	}
	for _, w := range writes {
		if !m.inc[w.ID].approvedHashes[w.Hash] {
			m.fail(t, recs[w.ID], "(a) %s wrote the plan %s on %s, which no authorized decision approved", w.ID, ops.ShortHash(w.Hash), w.Replica)
		}
	}
	m.checkBudgets(t, ctx, recs)
	m.checkAudit(t, ctx, recs)
	for _, id := range ids {
		rec := recs[id]
		for _, h := range []string{rec.Approval.PlanHash, planHash(rec)} {
			if h != "" && !slices.Contains(m.hashes[id], h) {
				m.hashes[id] = append(m.hashes[id], h)
			}
		}
	}
	m.recs, m.ids = recs, newestFirst(recs)
}

// resumes counts the times a person resumed rec after an interruption.
func resumes(rec *ops.Record) int {
	n := 0
	for _, h := range rec.History {
		if h.Kind == ops.KindPhase && strings.HasPrefix(h.Note, "resumed by ") {
			n++
		}
	}
	return n
}

func planHash(rec *ops.Record) string {
	if rec.Plan == nil {
		return ""
	}
	return rec.Plan.Hash
}

func (m *model) key(parts ...string) string {
	return "{" + modelPrefix + "}:" + strings.Join(parts, ":")
}

// keys lists the keys matching the pattern m.key(parts...), failing the test (naming what it lists) if Redis does not
// answer.
func (m *model) keys(t *rapid.T, ctx context.Context, what string, parts ...string) []string {
	keys, err := m.rdb.Keys(ctx, m.key(parts...)).Result()
	if err != nil {
		t.Fatalf("list %s: %v", what, err)
	}
	return keys
}

// readRecords reads every record in one round trip.
func (m *model) readRecords(t *rapid.T, ctx context.Context) map[string]*ops.Record {
	keys := m.keys(t, ctx, "records", "req", "*")
	pipe := m.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGet(ctx, k, "data")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("read records: %v", err)
	}
	out := map[string]*ops.Record{}
	for i, k := range keys {
		var rec ops.Record
		if err := json.Unmarshal([]byte(cmds[i].Val()), &rec); err != nil {
			t.Fatalf("decode %s: %v", k, err)
		}
		out[strings.TrimPrefix(k, m.key("req", ""))] = &rec
	}
	return out
}

// fail reports a violated invariant with the record it is about.
func (m *model) fail(t *rapid.T, rec *ops.Record, format string, args ...any) {
	msg := "VIOLATION " + fmt.Sprintf(format, args...)
	if rec != nil {
		msg += "\n" + describe(rec)
	}
	t.Fatalf("%s", msg)
}

// describe is a record's history, one line per entry, for a failure.
func describe(rec *ops.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s (%s/%s by %s) is %s; approval %d of %s on %s, over budget %v", rec.ID(), rec.Request.Target.Namespace,
		rec.Request.Params.String("group"), rec.Request.Initiator.Name, rec.Phase, rec.Approval.Required, rec.Approval.Approvers,
		ops.ShortHash(rec.Approval.PlanHash), rec.Approval.OverBudget)
	if rec.Plan != nil {
		fmt.Fprintf(&b, "; plan %s: %s, $%g", ops.ShortHash(rec.Plan.Hash), rec.Plan.Summary, rec.Plan.Cost.Total)
	}
	for i, h := range rec.History {
		fmt.Fprintf(&b, "\n    %d %s %s→%s %s by %s: %s", i, h.At.Format("01-02 15:04:05"), h.From, h.To, h.Kind, h.By.ID, h.Note)
	}
	return b.String()
}

// modelRule is what the model expects of modelConfig's rule for a request.
type modelRule struct {
	group      string
	required   int
	self       bool
	breakGlass bool
	escalate   bool
	overBudget bool
	expires    time.Duration
}

var modelMembers = map[string][]string{
	"leads": {lead1.ID, lead2.ID}, "seniors": {lead2.ID}, "managers": {modelMgr.ID}, "oncall": {alice.ID},
}

func isAgent(who ops.Initiator) bool { return who.Kind != ops.Human || who.ID == opsAgent.ID }

func ruleOf(req ops.Request) modelRule {
	switch ns := req.Target.Namespace; {
	case ns == "ml-dev" && !isAgent(req.Initiator):
		return modelRule{}
	case ns == "ml-q":
		return modelRule{group: "leads", required: 2, expires: 2 * time.Hour}
	case ns == "ml-x":
		return modelRule{group: "seniors", required: 1, self: true, overBudget: true, expires: time.Hour}
	}
	return modelRule{group: "leads", required: 1, breakGlass: true, escalate: true, overBudget: true, expires: time.Hour}
}

// requirement is the approval the model expects rec to need: its rule's, raised by requiresApproval, or the
// rule's overBudget approval when the plan was over a budget.
func (m *model) requirement(t *rapid.T, rec *ops.Record) modelRule {
	r := ruleOf(rec.Request)
	switch {
	case rec.Approval.OverBudget:
		if !r.overBudget {
			m.fail(t, rec, "(a) %s was given an over-budget approval under a rule that has none", rec.ID())
		}
		return modelRule{group: "leads", required: 2, escalate: r.escalate, expires: r.expires}
	case r.required == 0 && rec.Request.RequiresApproval:
		return modelRule{group: "leads", required: 1, expires: time.Hour}
	}
	return r
}

// change is the plan's from and to counts.
func change(rec *ops.Record) (from, to int) {
	if rec.Plan == nil || len(rec.Plan.Changes) == 0 || len(rec.Plan.Changes[0].Fields) == 0 {
		return 0, 0
	}
	f := rec.Plan.Changes[0].Fields[0]
	from, _ = strconv.Atoi(f.From)
	to, _ = strconv.Atoi(f.To)
	return from, to
}

// mayVote says whether the policy lets who approve rec at time at, its approval having begun at start, and why not.
func (m *model) mayVote(rec *ops.Record, req modelRule, who ops.Initiator, at, start time.Time) (bool, string) {
	if isAgent(who) {
		return false, "agents never approve"
	}
	if who.ID == rec.Request.Initiator.ID {
		from, to := change(rec)
		if !req.self {
			return false, "the rule does not allow self-approval"
		}
		if to < from {
			return false, "nobody approves their own high-risk request"
		}
	}
	if slices.Contains(modelMembers[req.group], who.ID) {
		return true, ""
	}
	if req.escalate && slices.Contains(modelMembers["managers"], who.ID) {
		for _, h := range rec.History {
			if h.Kind == ops.KindEscalation && !h.At.Before(start.Add(40*time.Minute)) && !h.At.After(at) {
				m.covered["vote: a manager after the escalation"]++
				return true, ""
			}
		}
		return false, "managers vote only once the request was escalated, 40m after it began waiting"
	}
	return false, fmt.Sprintf("%s is not in %s", who.Name, req.group)
}

func (m *model) checkDecisions(t *rapid.T, rec *ops.Record, inc *incarnation) {
	for i := inc.validated; i < len(rec.History); i++ {
		h := rec.History[i]
		switch {
		case h.Kind == ops.KindPhase && h.To == ops.PhaseApproved && h.From != ops.PhaseApproved:
			m.checkApproval(t, rec, inc, i)
		case h.Kind == ops.KindStep && h.Note == "plan refreshed":
			m.covered["executed: a new plan that needs no approval (plan refreshed)"]++
			if r := m.requirement(t, rec); r.required != 0 || rec.Plan == nil {
				m.fail(t, rec, "(a) %s ran a re-made plan without approval, under a rule that asks for %d", rec.ID(), r.required)
			}
			inc.approvedHashes[rec.Plan.Hash] = true
		case h.Kind == ops.KindBreakGlassAck:
			m.covered["break-glass acknowledged"]++
			m.checkAck(t, rec, h)
		case h.Kind == ops.KindPhase && h.From != h.To:
			m.covered["reached "+string(h.To)]++
			if h.To == ops.PhaseAwaitingApproval && h.From == ops.PhaseExecuting {
				m.covered["went back to approval: the plan was stale at execution"]++
			}
		case h.Kind == ops.KindEscalation, h.Kind == ops.KindReminder, h.Kind == ops.KindGrantRevoked:
			m.covered[string(h.Kind)]++
		}
	}
	inc.validated = len(rec.History)
}

// approvalStart is when rec's approval that entry i ended began: when it last went to awaiting approval.
func approvalStart(rec *ops.Record, i int) time.Time {
	for j := i - 1; j >= 0; j-- {
		h := rec.History[j]
		if h.Kind == ops.KindPhase && h.To == ops.PhaseAwaitingApproval && h.From != ops.PhaseAwaitingApproval {
			return h.At
		}
	}
	return rec.History[i].At
}

func (m *model) checkApproval(t *rapid.T, rec *ops.Record, inc *incarnation, i int) {
	h := rec.History[i]
	for _, later := range rec.History[i+1:] {
		if later.Kind == ops.KindPhase && later.To == ops.PhaseAwaitingApproval {
			t.Fatalf("model: the approval %d of %s was replaced before it was checked\n%s", i, rec.ID(), describe(rec))
		}
	}
	req := m.requirement(t, rec)
	start := approvalStart(rec, i)
	a := rec.Approval
	switch {
	case h.Note == "no approval required by policy":
		m.covered["approved: no approval required"]++
		if req.required != 0 {
			m.fail(t, rec, "(a) %s went ahead without approval, and its rule asks for %d of %s", rec.ID(), req.required, req.group)
		}
	case strings.HasPrefix(h.Note, "resumed by "):
		m.covered["approved: resumed by its owner"]++
		if h.From != ops.PhaseInterrupted || !inc.approvedHashes[a.PlanHash] {
			m.fail(t, rec, "(a) %s was resumed from %s on a plan nobody approved", rec.ID(), h.From)
		}
		return
	case strings.HasPrefix(h.Note, "approved by grant "):
		m.covered["approved: by a grant"]++
		m.checkGrantApproval(t, rec, req, h, start)
	case strings.HasPrefix(h.Note, "BREAK-GLASS by "):
		m.covered["approved: break-glass"]++
		m.checkBreakGlass(t, rec, req, h, start)
	case strings.HasPrefix(h.Note, "approved by "):
		m.covered[fmt.Sprintf("approved: by %d vote(s)", req.required)]++
		m.checkQuorum(t, rec, req, start)
	default:
		m.fail(t, rec, "(a) %s was approved by a path the model does not know: %q", rec.ID(), h.Note)
	}
	if a.Required != req.required || (req.required > 0 && a.Approvers != req.group) {
		m.fail(t, rec, "(a) %s needed %d of %s under its rule, and its approval asked for %d of %s", rec.ID(), req.required, req.group, a.Required, a.Approvers)
	}
	if req.required > 0 && !h.At.Before(start.Add(req.expires)) {
		m.fail(t, rec, "(a) %s was approved at %s, after its approval expired (%s)", rec.ID(), h.At.Format(time.TimeOnly), start.Add(req.expires).Format(time.TimeOnly))
	}
	inc.approvedHashes[a.PlanHash] = true
	if a.OverBudget {
		m.forced[rec.ID()] = true
		m.covered["approved: over budget, by its rule's overBudget approvers"]++
	}
	if rec.Request.RequiresApproval {
		m.covered["approved: asked for approval (requiresApproval)"]++
	}
}

func (m *model) checkQuorum(t *rapid.T, rec *ops.Record, req modelRule, start time.Time) {
	a := rec.Approval
	voters := map[string]bool{}
	for _, v := range a.Votes {
		if !v.Approve || v.PlanHash != a.PlanHash || v.BreakGlass {
			continue
		}
		if !m.votes[rec.ID()+"|"+v.Voter.ID+"|"+a.PlanHash] {
			m.fail(t, rec, "(a) %s counts a vote of %s on %s that nobody cast", rec.ID(), v.Voter.ID, ops.ShortHash(a.PlanHash))
		}
		if ok, why := m.mayVote(rec, req, v.Voter, v.At, start); !ok {
			m.fail(t, rec, "(a) %s counts the approval of %s, whom the policy does not let approve it: %s", rec.ID(), v.Voter.Name, why)
		}
		if !v.At.Before(start.Add(req.expires)) {
			m.fail(t, rec, "(a) %s counts a vote of %s cast after its approval expired", rec.ID(), v.Voter.Name)
		}
		voters[v.Voter.ID] = true
	}
	if len(voters) < req.required {
		m.fail(t, rec, "(a) %s was approved with %d valid approvals of the %d its rule needs", rec.ID(), len(voters), req.required)
	}
}

func (m *model) checkGrantApproval(t *rapid.T, rec *ops.Record, req modelRule, h ops.Transition, start time.Time) {
	gid, _, _ := strings.Cut(strings.TrimPrefix(h.Note, "approved by grant "), ",")
	g, ok := m.grants[gid]
	if !ok {
		ctx, cancel := ctxModel()
		defer cancel()
		stored, err := m.admin.Grant(ctx, gid)
		if err != nil {
			m.fail(t, rec, "(a) %s was approved by grant %s, which does not exist: %v", rec.ID(), gid, err)
		}
		if !m.grantCalls[stored.GivenIn][stored.GivenBy.ID] {
			m.fail(t, rec, "(a) %s was approved by grant %s, which %s never gave", rec.ID(), gid, stored.GivenBy.Name)
		}
		g = stored
		m.grants[gid] = g
	}
	from, to := change(rec)
	p := rec.Plan
	size := int(math.Abs(float64(to - from)))
	matched, _ := path.Match(g.Target, rec.Request.Params.String("group"))
	m.grantUses[gid]++
	switch rev, revoked := m.revokedAt[gid]; {
	case rec.Grant == nil || rec.Grant.Grant != gid:
		m.fail(t, rec, "(a) %s says it was approved by grant %s and its record names %+v", rec.ID(), gid, rec.Grant)
	case revoked && rev < m.step:
		m.fail(t, rec, "(a) %s was approved by grant %s, revoked at step %d", rec.ID(), gid, rev)
	case !h.At.Before(g.ExpiresAt):
		m.fail(t, rec, "(a) %s was approved by grant %s after it expired (%s)", rec.ID(), gid, g.ExpiresAt)
	case m.grantUses[gid] > g.Uses:
		m.fail(t, rec, "(a) %s is use %d of grant %s, which has %d", rec.ID(), m.grantUses[gid], gid, g.Uses)
	case g.GivenBy.ID == rec.Request.Initiator.ID:
		m.fail(t, rec, "(a) %s was approved by a grant its own requester gave", rec.ID())
	case g.Requester.ID != rec.Request.Initiator.ID || g.Operation != rec.Request.Operation || g.Cluster != rec.Request.Target.Cluster || !matched:
		m.fail(t, rec, "(a) %s is outside grant %s (%s)", rec.ID(), gid, g.Bounds())
	case g.MaxSize > 0 && size > g.MaxSize, p.Cost.HourlyDelta > g.MaxHourly+1e-9, g.MaxTotal > 0 && p.Cost.Total > g.MaxTotal+1e-9:
		m.fail(t, rec, "(a) %s (size %d, $%g/h, $%g) is past the caps of grant %s (%s)", rec.ID(), size, p.Cost.HourlyDelta, p.Cost.Total, gid, g.Bounds())
	case req.required != 1 || rec.Approval.OverBudget || rec.Request.RequiresApproval || p.Risk.Level >= ops.RiskCritical:
		m.fail(t, rec, "(a) %s was approved by a grant, and grants never approve it (%d approvals, over budget %v, requiresApproval %v)",
			rec.ID(), req.required, rec.Approval.OverBudget, rec.Request.RequiresApproval)
	}
	if ok, why := m.mayVote(rec, req, g.GivenBy, h.At, start); !ok {
		m.fail(t, rec, "(a) %s was approved by grant %s of %s, who could not approve it: %s", rec.ID(), gid, g.GivenBy.Name, why)
	}
}

func (m *model) checkBreakGlass(t *rapid.T, rec *ops.Record, req modelRule, h ops.Transition, start time.Time) {
	bg := rec.BreakGlass
	rule := ruleOf(rec.Request)
	switch {
	case bg == nil || bg.By.ID != h.By.ID:
		m.fail(t, rec, "(a) %s broke glass and its record says %+v", rec.ID(), bg)
	case h.By.ID != rec.Request.Initiator.ID || isAgent(h.By):
		m.fail(t, rec, "(a) %s broke glass on a request of %s", h.By.Name, rec.Request.Initiator.Name)
	case !rule.breakGlass || rec.Approval.OverBudget:
		m.fail(t, rec, "(a) %s broke glass on %s, whose rule offers none (over budget %v)", h.By.Name, rec.ID(), rec.Approval.OverBudget)
	case !slices.Contains(modelMembers["oncall"], h.By.ID):
		m.fail(t, rec, "(a) %s broke glass on %s and is not on call", h.By.Name, rec.ID())
	}
	for _, e := range m.glass {
		if e.by == h.By.ID && e.id != rec.ID() && !e.at.After(h.At) && (e.ackAt.IsZero() || e.ackAt.After(h.At)) {
			m.fail(t, rec, "(a) %s broke glass on %s while their break-glass of %s (%s) was not acknowledged", h.By.Name, rec.ID(), e.id, e.at.Format(time.TimeOnly))
		}
	}
	m.glass = append(m.glass, &glassEvent{id: rec.ID(), by: h.By.ID, at: h.At})
}

func (m *model) checkAck(t *rapid.T, rec *ops.Record, h ops.Transition) {
	bg := rec.BreakGlass
	switch {
	case bg == nil:
		m.fail(t, rec, "(a) %s acknowledged a break-glass of %s, which has none", h.By.Name, rec.ID())
	case h.By.ID == bg.By.ID:
		m.fail(t, rec, "(a) %s acknowledged their own break-glass", h.By.Name)
	case !slices.Contains(modelMembers["leads"], h.By.ID):
		m.fail(t, rec, "(a) %s acknowledged the break-glass of %s and is not a lead", h.By.Name, rec.ID())
	}
	for i := len(m.glass) - 1; i >= 0; i-- {
		if m.glass[i].id == rec.ID() {
			m.glass[i].ackAt = h.At
			return
		}
	}
}

// modelHold is a request's entry in the ledger ({p}:budget-req:<id>).
type modelHold struct {
	Windows  []modelWindow `json:"windows"`
	Released bool          `json:"released"`
	Used     json.Number   `json:"used"`
	// Since (when the holding request's record was created, in ns) and Plan (the plan hash it holds for) name what
	// the hold is for, where the ledger records them.
	Since string `json:"since"`
	Plan  string `json:"plan"`

	raw   string // as stored
	owner string // the creation time (ns) of the request it is for: Since, or as the model attributed it
}

// contributions is what h adds to each window: what it holds, or once released what it kept (used).
func (h *modelHold) contributions() map[string]float64 {
	out := map[string]float64{}
	for _, w := range h.Windows {
		c := num(w.Cost)
		if h.Released {
			c *= w.kept(num(h.Used))
		}
		out[w.Key] += c
	}
	return out
}

// kept is the share of w's charge a run that used the earliest used (0..1) of itself keeps: the part of w's span of
// the run (from..to, as shares of the run; the whole run where the hold names none) that it used.
func (w modelWindow) kept(used float64) float64 {
	from, to := 0.0, 1.0
	if w.From != "" {
		from = num(w.From)
	}
	if w.To != "" {
		to = num(w.To)
	}
	if to <= from {
		return 0
	}
	return min(max((used-from)/(to-from), 0), 1)
}

// of says whether h is rec's (not the hold of an earlier request whose id rec reuses).
func (h *modelHold) of(rec *ops.Record) bool { return h != nil && h.owner == nanos(rec.CreatedAt) }

func nanos(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

type modelWindow struct {
	Key      string      `json:"key"`
	Cost     json.Number `json:"cost"`
	From, To json.Number // the window's part of the run, as shares of it
}

func num(n json.Number) float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

var modelLimits = map[string]float64{"c1-monthly": 250, "agent-daily": 200}

// windowOf splits a ledger window key into the budget's name and the window's start.
func (m *model) windowOf(key string) (name, start string) {
	rest := strings.TrimPrefix(key, m.key("budget", ""))
	i := strings.LastIndex(rest, ":")
	return rest[:i], rest[i+1:]
}

// charges are what the model expects rec's plan to hold per budget: $80 per node it adds, in c1's monthly budget
// and, for the agent, in its daily one.
func charges(rec *ops.Record) map[string]float64 {
	from, to := change(rec)
	if rec.Plan == nil || to <= from {
		return nil
	}
	out := map[string]float64{"c1-monthly": float64(to-from) * worldPrice * 2}
	if isAgent(rec.Request.Initiator) {
		out["agent-daily"] = out["c1-monthly"]
	}
	return out
}

// readHolds reads every hold and every window's use, in two round trips.
func (m *model) readHolds(t *rapid.T, ctx context.Context) (map[string]*modelHold, map[string]float64) {
	holdKeys := m.keys(t, ctx, "holds", "budget-req", "*")
	windowKeys := m.keys(t, ctx, "windows", "budget", "*")
	pipe := m.rdb.Pipeline()
	raws := make([]*redis.StringCmd, len(holdKeys))
	for i, k := range holdKeys {
		raws[i] = pipe.Get(ctx, k)
	}
	costs := make([]*redis.StringCmd, len(windowKeys))
	for i, k := range windowKeys {
		costs[i] = pipe.HGet(ctx, k, "cost")
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		t.Fatalf("read the ledger: %v", err)
	}
	holds := map[string]*modelHold{}
	for i, k := range holdKeys {
		h := modelHold{raw: raws[i].Val()}
		dec := json.NewDecoder(strings.NewReader(h.raw))
		dec.UseNumber()
		if err := dec.Decode(&h); err != nil {
			t.Fatalf("decode hold %s: %v (%s)", k, err, h.raw)
		}
		holds[strings.TrimPrefix(k, m.key("budget-req", ""))] = &h
	}
	ledger := map[string]float64{}
	for i, k := range windowKeys {
		v, _ := costs[i].Float64()
		ledger[k] = v
	}
	return holds, ledger
}

func (m *model) checkBudgets(t *rapid.T, ctx context.Context, recs map[string]*ops.Record) {
	holds, ledger := m.readHolds(t, ctx)
	m.attribute(holds, recs)
	sum := map[string]float64{}
	for w, c := range m.frozen {
		sum[w] += c
	}
	for _, id := range slices.Sorted(maps.Keys(holds)) {
		h := holds[id]
		if prev, ok := m.holds[id]; ok && prev.owner != h.owner && prev.since != h.Since {
			m.covered["hold of an expired record replaced by its id's new request"]++
			// The hold of an earlier request with this id, replaced by its successor's: what it counted stays.
			for w, c := range prev.counted {
				m.frozen[w] += c
				sum[w] += c
			}
		}
		counted := h.contributions()
		m.holds[id] = heldBy{since: h.Since, owner: h.owner, raw: h.raw, counted: counted}
		for w, c := range counted {
			sum[w] += c
		}
		if recs[id] == nil && !h.Released && !slices.Contains(m.expired, id) {
			m.fail(t, nil, "(b) %s holds %+v and has no record", id, h.Windows)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ledger)) {
		if math.Abs(ledger[k]-sum[k]) > 1e-6 {
			m.fail(t, nil, "(b) window %s: the ledger says $%g, its holds add up to $%g", k, ledger[k], sum[k])
		}
		name, _ := m.windowOf(k)
		if ledger[k] > modelLimits[name]+1e-6 && !m.forcedIn(holds, recs, k) {
			m.fail(t, nil, "(b) window %s uses $%g of its $%g, and nobody approved going over", k, ledger[k], modelLimits[name])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sum)) {
		if _, ok := ledger[k]; !ok && math.Abs(sum[k]) > 1e-6 {
			m.fail(t, nil, "(b) window %s is gone, its holds add up to $%g", k, sum[k])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		h := holds[id]
		if !h.of(recs[id]) {
			h = nil
		}
		m.checkHold(t, recs[id], m.inc[id], h)
	}
}

// heldBy is what the model last saw a request id's hold count: whose (since) and how much per window.
type heldBy struct {
	since, owner, raw string
	counted           map[string]float64
}

// attribute says whose each hold is: the request its Since names; without one (a ledger that records none), the
// request that had the id when the hold was first seen or last changed.
func (m *model) attribute(holds map[string]*modelHold, recs map[string]*ops.Record) {
	for id, h := range holds {
		prev, seen := m.holds[id]
		switch {
		case h.Since != "":
			h.owner = h.Since
		case seen && prev.raw == h.raw:
			h.owner = prev.owner
		case recs[id] != nil:
			h.owner = nanos(recs[id].CreatedAt)
		default:
			h.owner = prev.owner
		}
	}
}

// forcedIn says whether a hold in window is of a request approved over budget (or being approved, its approval the
// overBudget one: the vote reaching the quorum holds past the limit before it is recorded).
func (m *model) forcedIn(holds map[string]*modelHold, recs map[string]*ops.Record, window string) bool {
	for id, h := range holds {
		if !m.forced[id] && (recs[id] == nil || !recs[id].Approval.OverBudget) {
			continue
		}
		for _, w := range h.Windows {
			if w.Key == window {
				return true
			}
		}
	}
	return false
}

// writeStarted says whether an execution of rec recorded that it was sending its write (its outcome may be unknown
// to the engine).
func writeStarted(rec *ops.Record) bool {
	for _, h := range rec.History {
		if h.Kind == ops.KindStep && strings.HasSuffix(h.Note, "sending the change") {
			return true
		}
	}
	return false
}

// checkHold is (b) and (c) for one request: approved or running, it holds exactly its plan's charges; ended
// without a write, or waiting for approval, it holds nothing. A request whose write reached the world, or may have
// as far as the engine knows, may keep a hold (erring towards refusing), as may one whose step lost a Redis answer
// (a reservation then lapses with its window).
func (m *model) checkHold(t *rapid.T, rec *ops.Record, inc *incarnation, h *modelHold) {
	live := h != nil && !h.Released
	wrote, started := len(inc.effective) > 0, writeStarted(rec)
	want := charges(rec)
	switch rec.Phase {
	case ops.PhaseApproved, ops.PhaseExecuting:
		if !wrote && !started && !inc.touched {
			m.wantHold(t, rec, h, want)
		}
	case ops.PhaseInterrupted:
		if len(want) > 0 && !live && !inc.touched {
			m.fail(t, rec, "(b) %s is interrupted, its write may have happened, and it holds nothing of its $%g plan", rec.ID(), want["c1-monthly"])
		}
	case ops.PhaseSucceeded:
		switch {
		case inc.settled:
			if live && !inc.touched {
				m.fail(t, rec, "(b) %s was settled and still holds %+v", rec.ID(), h.Windows)
			}
		case !inc.touched && rec.Request.Reverts == "" && !m.replanned(rec):
			m.wantHold(t, rec, h, want)
		}
	default:
		if !live {
			return
		}
		switch {
		case wrote:
			m.tolerated["a request that wrote keeps its hold after "+string(rec.Phase)]++
		case started:
			m.tolerated["a request whose write was sent as far as the engine knows keeps its hold after "+string(rec.Phase)]++
		case inc.touched:
			m.tolerated["a request whose step lost a Redis answer keeps a hold while "+string(rec.Phase)]++
		default:
			m.fail(t, rec, "(c) %s is %s, wrote nothing, and holds %s", rec.ID(), rec.Phase, holdText(h))
		}
	}
}

// replanned says whether rec's plan was made again at execution after a write of an earlier attempt may have
// happened: what it holds is then the earlier plan's.
func (m *model) replanned(rec *ops.Record) bool {
	resumed := false
	for _, h := range rec.History {
		if strings.HasPrefix(h.Note, "resumed by ") {
			resumed = true
		}
	}
	return resumed
}

func holdText(h *modelHold) string {
	var parts []string
	for _, w := range h.Windows {
		parts = append(parts, fmt.Sprintf("$%s of %s", w.Cost, w.Key))
	}
	return strings.Join(parts, ", ")
}

// wantHold: rec holds exactly want, unreleased, in the windows of its approval (or of a later step of it).
func (m *model) wantHold(t *rapid.T, rec *ops.Record, h *modelHold, want map[string]float64) {
	live := h != nil && !h.Released
	if len(want) == 0 {
		if live {
			m.fail(t, rec, "(b) %s is %s with a plan that costs nothing, and holds %s", rec.ID(), rec.Phase, holdText(h))
		}
		return
	}
	if !live {
		m.fail(t, rec, "(b) %s is %s with a $%g plan, and holds nothing (hold %+v)", rec.ID(), rec.Phase, want["c1-monthly"], h)
		return
	}
	if h.Plan != "" && h.Plan != planHash(rec) {
		m.fail(t, rec, "(b) %s holds for the plan %s, and its plan is %s", rec.ID(), ops.ShortHash(h.Plan), ops.ShortHash(planHash(rec)))
	}
	got, names := map[string]float64{}, map[string]float64{}
	for _, w := range h.Windows {
		name, _ := m.windowOf(w.Key)
		got[name+":"+strings.TrimPrefix(w.Key, m.key("budget", name+":"))] += num(w.Cost)
		names[name] += num(w.Cost)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if math.Abs(names[name]-want[name]) > 1e-6 {
			m.fail(t, rec, "(b) %s is %s with a plan of $%g, and holds %s", rec.ID(), rec.Phase, want[name], holdText(h))
		}
	}
	if len(names) != len(want) {
		m.fail(t, rec, "(b) %s holds %s, want %v", rec.ID(), holdText(h), want)
	}
	// Its run (the plan's hours from its approval, or from a later step that held it anew) is charged to each
	// window by overlap.
	for _, at := range approvalTimes(rec) {
		if sameCharges(got, overlapCharges(want, rec.Plan.Cost.RunHours(), at)) {
			return
		}
	}
	m.fail(t, rec, "(b) %s holds %s, which is not its run of %gh from its approval at %s charged by overlap",
		rec.ID(), holdText(h), rec.Plan.Cost.RunHours(), approvalTimes(rec)[0].Format("01-02 15:04:05"))
}

// overlapCharges is what the model expects a run of hours from at to charge each window ("<budget>:<start>") of the
// model's budgets, want being its whole cost per budget: by overlap, the month's windows for c1-monthly and the
// day's for agent-daily (a run without an end is counted for one window's length).
func overlapCharges(want map[string]float64, hours float64, at time.Time) map[string]float64 {
	out := map[string]float64{}
	for name, cost := range want {
		span := func(t time.Time) (time.Time, time.Time) {
			if name == "c1-monthly" {
				s := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
				return s, s.AddDate(0, 1, 0)
			}
			s := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
			return s, s.AddDate(0, 0, 1)
		}
		start, end := span(at)
		run := time.Duration(hours * float64(time.Hour))
		if run == 0 {
			run = end.Sub(start)
		}
		until := at.Add(run)
		for from := at; from.Before(until); start, end = span(end) {
			to := end
			if until.Before(end) {
				to = until
			}
			out[name+":"+start.Format("20060102T1504Z")] += cost * float64(to.Sub(from)) / float64(run)
			from = to
		}
	}
	return out
}

func sameCharges(a, b map[string]float64) bool {
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if math.Abs(a[k]-b[k]) > 1e-6 {
			return false
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok && math.Abs(v) > 1e-6 {
			return false
		}
	}
	return true
}

// approvalTimes are the times of rec's last approval and of every entry after it.
func approvalTimes(rec *ops.Record) []time.Time {
	from := 0
	for i, h := range rec.History {
		if h.Kind == ops.KindPhase && h.To == ops.PhaseApproved && (h.From == ops.PhaseAwaitingApproval || h.From == ops.PhasePlanned) {
			from = i
		}
	}
	var out []time.Time
	for _, h := range rec.History[from:] {
		out = append(out, h.At)
	}
	return out
}

func auditKey(id string, from, to ops.Phase, by string, at time.Time, kind ops.TransitionKind, note string) string {
	return fmt.Sprintf("%s|%s|%s|%s|%d|%s|%s", id, from, to, by, at.UnixNano(), kind, note)
}

// checkAudit is (e): every history entry of every record is in the audit stream, a grant's approval with its grant
// and a break-glass with its reason.
func (m *model) checkAudit(t *rapid.T, ctx context.Context, recs map[string]*ops.Record) {
	for {
		lines, next, err := m.admin.AuditPage(ctx, state.AuditQuery{Cursor: m.auditCursor, Limit: 1000})
		if err != nil {
			t.Fatalf("read the audit stream: %v", err)
		}
		for _, l := range lines {
			m.audit[auditKey(l.RequestID, l.From, l.Phase, l.By.ID, l.Time, l.Kind, l.Note)] = l
			m.auditCursor = l.Cursor
		}
		if next == "" {
			break
		}
	}
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		rec, inc := recs[id], m.inc[id]
		for i := inc.audited; i < len(rec.History); i++ {
			h := rec.History[i]
			note := h.Note
			if i == 0 {
				note = "received"
			}
			l, ok := m.audit[auditKey(id, h.From, h.To, h.By.ID, h.At, h.Kind, note)]
			switch {
			case !ok:
				m.fail(t, rec, "(e) entry %d of %s (%s→%s by %s: %s) is not in the audit stream", i, id, h.From, h.To, h.By.ID, h.Note)
			case strings.HasPrefix(h.Note, "approved by grant ") && h.To == ops.PhaseApproved && l.Grant == nil:
				m.fail(t, rec, "(e) the audit line of %s's approval by a grant does not name the grant", id)
			case strings.HasPrefix(h.Note, "BREAK-GLASS by ") && l.BreakGlass == nil:
				m.fail(t, rec, "(e) the audit line of %s's break-glass does not carry it", id)
			}
		}
		inc.audited = len(rec.History)
	}
}
