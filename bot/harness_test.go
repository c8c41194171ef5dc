package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/config/configtest"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/internal/leftover"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/kube"
	"github.com/hyperops/hyperops/ops/report/collect"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

func TestMain(m *testing.M) { leftover.Main(m) }

const (
	chOps      = "C0OPS"
	chApprove  = "C0APPROVE"
	dmAgent    = "D0AGENT"
	dmAlice    = "D0ALICE"
	userAlice  = "U0ALICE"
	userBob    = "U0BOB"
	userLead1  = "U0LEAD1"
	userLead2  = "U0LEAD2"
	userLead3  = "U0LEAD3" // in the approvals channel only; a lead once the test config lists it
	userAgent  = "U0AGENT"
	clusterTst = "test-eks"
)

var testConfig = `
slack:
  appToken: xapp-1-fake-app-token
  botToken: xoxb-fake-bot-token
  apiURL: %s
  channels: [C0OPS]
  approvalsChannel: C0APPROVE
  workers: 4
  queueSize: 16
redis:
  url: %s
  keyPrefix: %s
clusters:
  - name: test-eks
    environment: staging
    namespaces: [ml]
    instanceTypes: [ml.g5.12xlarge]
    images: ["registry.example.com/*"]
    limits: {maxNodesPerGroup: 4, maxTrainingReplicas: 8, maxGPUsPerJob: 8, maxTrainingHours: 4, maxInferenceReplicas: 2}
agents:
  - name: ops-agent
    slackUser: U0AGENT
    operations: ["get-*", "submit-training-job"]
` + configtest.Approvals{Leads: []string{userLead1}, LeadGroups: []string{"S0LEADS"}, CriticalQuorum: 1, RequireChannelMembership: true}.YAML() + `server:
  listen: "127.0.0.1:0"
`

// widgetOp is an in-test operation that behaves like a real one: a plan against observed state, a cost from the
// count, and an execution counted (and optionally held) by the test.
type widgetOp struct {
	spec     ops.Spec
	observed atomic.Value // string
	runs     atomic.Int64
	hold     chan struct{} // when non-nil, Execute waits for it to close
	entered  atomic.Int64  // Execute calls begun
	// watch, when set, makes the workload (e.g. creates its Job) and names what the result asks to watch.
	watch func(ctx context.Context, req *ops.Request) ([]ops.ObjectRef, error)
}

func newWidgetOp(name string, mutates bool, baseline ops.Level, params []ops.ParamSpec) *widgetOp {
	topic, verb := slashFor(name)
	w := &widgetOp{spec: ops.Spec{Name: name, Domain: "test", Topic: topic, Verb: verb, Summary: "test operation " + name, Mutates: mutates,
		Baseline: baseline, Params: params,
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Namespace: r.Target.Namespace, Kind: name, Name: r.Params.String("name")}
		}}}
	w.spec.Destructive = name == "scale-widget" // it may scale down
	sayAsReal(&w.spec)
	w.observed.Store("v1")
	return w
}

// realSpecs are the specs of the operations the service registers (nothing behind them: only the specs are read).
var realSpecs = func() *ops.Catalog {
	cat := ops.NewCatalog()
	kube.Register(cat, nil, nil, nil, nil)
	aws.Register(cat, nil, nil, nil)
	return cat
}()

// sayAsReal gives a widget named as a real operation what that operation says: its headline, its typed-name
// confirmation, whether it is destructive, and its parameters' published bounds.
func sayAsReal(s *ops.Spec) {
	real, ok := realSpecs.Spec(s.Name)
	if !ok {
		return
	}
	s.Headline, s.Confirm, s.Destructive = real.Headline, real.Confirm, real.Destructive
	for i, p := range s.Params {
		for _, rp := range real.Params {
			if rp.Name == p.Name {
				s.Params[i].Bound = rp.Bound
			}
		}
	}
}

func slashFor(name string) (topic, verb string) {
	switch name {
	case "scale-widget":
		return "widget", "scale"
	case "get-widget":
		return "widget", "status"
	case "submit-training-job":
		return "train", "submit"
	case "delete-storage":
		return "storage", "delete"
	}
	return name, ""
}

func (w *widgetOp) Spec() ops.Spec                               { return w.spec }
func (w *widgetOp) Validate(context.Context, *ops.Request) error { return nil }

func (w *widgetOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	n := req.Params.IntOr("count", req.Params.IntOr("replicas", 1))
	p := &ops.Plan{Summary: fmt.Sprintf("%s %s", w.spec.Name, req.Params.String("name")), Observed: w.observed.Load().(string),
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Widget", Name: req.Params.String("name"),
			Fields: []ops.FieldChange{{Path: "spec.count", From: "0", To: fmt.Sprint(n)}}}}, ServerValidated: true}
	if w.spec.Name == "scale-widget" {
		p.Cost.AddHourly("ml.g5.12xlarge", float64(n), 60, "instance")
	}
	if w.spec.Name == "delete-storage" {
		p.Risk.Add(ops.RiskCritical, "deletes the data of claim %s", req.Params.String("name"))
	}
	return p, nil
}

func (w *widgetOp) Execute(ctx context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	w.entered.Add(1)
	if w.hold != nil {
		select {
		case <-w.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if w.spec.Mutates {
		w.runs.Add(1)
	}
	res := &ops.Result{Summary: w.spec.Name + " done", Details: []ops.Detail{{Label: "name", Value: req.Params.String("name")}}}
	if w.watch != nil {
		objs, err := w.watch(ctx, req)
		if err != nil {
			return nil, err
		}
		res.Watch = objs
	}
	return res, nil
}

type harness struct {
	t     testing.TB
	srv   *fakeslack.Server
	bot   *Bot
	clock *clockwork.FakeClock
	ops   map[string]*widgetOp
	// extra are more operations for every replica's catalog (set them in prepare).
	extra  []ops.Operation
	addr   string
	cancel context.CancelFunc
	done   chan error
	redis  *redistest.Server
	prefix string
	opts   harnessOptions
	// mcpAddr is the first replica's MCP listener when opts.mcp is set.
	mcpAddr string
	// ticks counts the readings of a tickingClock, shared by the replicas.
	ticks atomic.Int64
}

// harnessOptions vary the harness; the zero value is the plain one.
type harnessOptions struct {
	// edit changes the parsed configuration (queue sizes, workers).
	edit func(*config.Config)
	// clusters gives the bot cluster clients (fake clientsets), which turns the job watcher on.
	clusters func(*config.Config) *kube.Clusters
	// slack overrides the fake Slack's options (rate limits, scale); the users and channels are filled in.
	slack *fakeslack.Options
	// limits overrides the bot's client-side Slack limits.
	limits *Limits
	// replica names the bot.
	replica string
	// prepare runs before the first bot starts (to set operation hooks without racing the bot).
	prepare func(h *harness)
	// log receives the bot's log lines too (warnings and errors), for tests that read the log.
	log io.Writer
	// mcp gives each replica an MCP listener (bot/mcp_test.go).
	mcp bool
	// users are more workspace users, each a member of C0OPS (the Home benchmark's viewers).
	users []fakeslack.User
	// tellers tune the outbox tellers.
	tellers engine.TellerOptions
	// groups is the AWS view of the instance groups (and, as an ops.ReservationReader, of their training plans).
	groups collect.GroupSource
	// tick makes the bots read the fake clock as a real one reads: each reading later than the last (tickingClock).
	tick bool
}

// tickingClock is the harness's fake clock read the way a real clock is: every reading a nanosecond later than the
// one before, across replicas. Code that reads the clock twice for one instant and compares the readings passes on a
// frozen fake clock and fails in production (issue 31: a break-glass told as a plain approval); this catches it.
type tickingClock struct {
	*clockwork.FakeClock
	n *atomic.Int64
}

func (c tickingClock) Now() time.Time                  { return c.FakeClock.Now().Add(time.Duration(c.n.Add(1))) }
func (c tickingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c tickingClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

func start(t testing.TB) *harness { return startWith(t, harnessOptions{}) }

func startWith(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	rs := redistest.Start(t)
	so := fakeslack.Options{RateLimits: &fakeslack.RateLimits{Disabled: true}}
	if o.slack != nil {
		so = *o.slack
	}
	so.Users = []fakeslack.User{{ID: userAlice, Name: "alice"}, {ID: userBob, Name: "bob"}, {ID: userLead1, Name: "lead1"},
		{ID: userLead2, Name: "lead2"}, {ID: userLead3, Name: "lead3"}, {ID: userAgent, Name: "ops-agent", IsBot: true}}
	so.UserGroups = map[string][]string{"S0LEADS": {userLead2}}
	opsMembers := []string{"U0BOT", userAlice, userBob, userLead1, userLead2}
	for _, u := range o.users {
		so.Users = append(so.Users, u)
		opsMembers = append(opsMembers, u.ID)
	}
	so.Channels = map[string][]string{
		chOps:     opsMembers,
		chApprove: {"U0BOT", userLead1, userLead2, userLead3, userBob},
		dmAgent:   {userAgent}, dmAlice: {userAlice},
	}
	srv := fakeslack.New(so)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { driven.fromSlack(srv.Snapshot()) }) // what this test drove (inventory_test.go)
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	h := &harness{t: t, srv: srv, clock: clock, ops: map[string]*widgetOp{}, redis: rs,
		prefix: "t" + strings.ReplaceAll(t.Name(), "/", "-"), opts: o}
	str := func(n string, req bool) ops.ParamSpec {
		return ops.ParamSpec{Name: n, Kind: ops.KindString, Required: req, Help: n}
	}
	num := func(n string, req bool) ops.ParamSpec {
		return ops.ParamSpec{Name: n, Kind: ops.KindInt, Required: req, Help: n}
	}
	for _, w := range []*widgetOp{
		newWidgetOp("scale-widget", true, ops.RiskLow, []ops.ParamSpec{str("name", true), num("count", true)}),
		newWidgetOp("get-widget", false, ops.RiskLow, []ops.ParamSpec{str("name", true)}),
		newWidgetOp("submit-training-job", true, ops.RiskLow, []ops.ParamSpec{str("name", true), str("image", true), num("replicas", false)}),
		newWidgetOp("delete-storage", true, ops.RiskCritical, []ops.ParamSpec{str("name", true)}),
	} {
		h.ops[w.spec.Name] = w
	}
	if o.prepare != nil {
		o.prepare(h)
	}
	p := h.launch(o)
	h.bot, h.cancel, h.done = p.bot, p.cancel, p.done
	t.Cleanup(h.stop)
	h.waitConnected(1)
	return h
}

// replica is one running bot process of a harness.
type replica struct {
	bot     *Bot
	addr    string
	mcpAddr string
	cancel  context.CancelFunc
	done    chan error
}

// launch starts a bot on the harness's fake Slack, Redis and key prefix, with the harness's operations.
func (h *harness) launch(o harnessOptions) *replica {
	t := h.t
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(testConfig, h.srv.APIURL(), h.redis.URL(), h.prefix)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if o.edit != nil {
		o.edit(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rdb, err := state.Dial(ctx, h.redis.URL())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	cat := ops.NewCatalog()
	for _, w := range h.ops {
		cat.Register(w)
	}
	cat.Register(h.extra...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	limits := o.limits
	if limits == nil {
		limits = &Limits{Tier2: Tier{6000, 100}, Tier3: Tier{6000, 100}, Tier4: Tier{6000, 100}, PostPerChannel: Tier{6000, 100}}
	}
	var logw io.Writer = zerolog.NewTestWriter(t)
	if o.log != nil {
		logw = zerolog.MultiLevelWriter(logw, o.log)
	}
	var clock clockwork.Clock = h.clock
	if o.tick {
		clock = tickingClock{FakeClock: h.clock, n: &h.ticks}
	}
	bo := Options{Config: cfg, Log: zerolog.New(logw).Level(zerolog.WarnLevel), Redis: rdb, Catalog: cat,
		Clock: clock, Listener: ln, Limits: limits, Replica: o.replica, WatchLeaseTTL: 600 * time.Millisecond, Tellers: o.tellers}
	if o.clusters != nil {
		bo.Clusters = o.clusters(cfg)
	}
	bo.Groups = o.groups
	if o.mcp {
		if bo.MCPListener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	b, err := New(bo)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if o.mcp {
		t.Cleanup(func() { driven.fromMCP(b.Metrics()) }) // the tools this test called (inventory_test.go)
	}
	r := &replica{bot: b, addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	if h.addr == "" {
		h.addr = r.addr
	}
	if bo.MCPListener != nil {
		r.mcpAddr = bo.MCPListener.Addr().String()
		if h.mcpAddr == "" {
			h.mcpAddr = r.mcpAddr
		}
	}
	go func() { r.done <- b.Run(ctx) }()
	return r
}

// stop ends a replica and waits for it.
func (r *replica) stop(t testing.TB) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Error("bot did not stop within 20s")
	}
}

// waitConnected waits until n Socket Mode connections are open.
// launchSecond starts a second replica, "b", with opts (whatever replica they name), stops it when the test ends,
// and waits until both replicas are connected to Slack: how every two-replica test begins.
func (h *harness) launchSecond(opts harnessOptions) *replica {
	h.t.Helper()
	opts.replica = "b"
	b := h.launch(opts)
	h.t.Cleanup(func() { b.stop(h.t) })
	h.waitConnected(2)
	return b
}

func (h *harness) waitConnected(n int) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("%d bot connection(s)", n), func(s fakeslack.Snapshot) bool {
		open := 0
		for _, c := range s.Connections {
			if c.Open {
				open++
			}
		}
		return open >= n
	})
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		h.t.Error("bot did not stop within 20s")
	}
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) waitFor(what string, cond func(fakeslack.Snapshot) bool) fakeslack.Snapshot {
	h.t.Helper()
	s, err := h.srv.WaitFor(h.ctx(), cond)
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
	return s
}

// approvablePlan waits until the ops channel holds one message, a plan that offers Approve, and returns it.
func (h *harness) approvablePlan() fakeslack.Message {
	h.t.Helper()
	s := h.waitFor("plan", func(s fakeslack.Snapshot) bool {
		return len(topLevel(s, chOps)) == 1 && hasButton(topLevel(s, chOps)[0], handlers.ActionApprove)
	})
	return topLevel(s, chOps)[0]
}

// waitSucceeded waits until plan's message in the ops channel says the request succeeded (what names the wait).
func (h *harness) waitSucceeded(what string, plan fakeslack.Message) {
	h.t.Helper()
	h.waitFor(what, func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(chOps, plan.TS)
		return strings.Contains(m.Text, "succeeded")
	})
}

func (h *harness) slash(user, channel, text string) fakeslack.Delivery {
	h.t.Helper()
	d, err := h.srv.SlashCommand(h.ctx(), fakeslack.SlashCommand{Text: text, User: user, Channel: channel})
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// topLevel returns the top-level messages of a channel.
func topLevel(s fakeslack.Snapshot, ch string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range s.Messages[ch] {
		if m.ThreadTS == "" || m.ThreadTS == m.TS {
			out = append(out, m)
		}
	}
	return out
}

func hasButton(m fakeslack.Message, action string) bool {
	// A choice is a button, or an option of the overflow menu (its value is "<action>:<request id>").
	return strings.Contains(string(m.Blocks), `"action_id":"`+action+`"`) || strings.Contains(string(m.Blocks), `"value":"`+action+`:`)
}

func ephemeralWith(s fakeslack.Snapshot, user, substr string) bool {
	for _, e := range s.Ephemerals {
		if e.User == user && strings.Contains(e.Text+string(e.Blocks), substr) {
			return true
		}
	}
	return false
}

func (h *harness) click(user, channel, ts, action string) fakeslack.Delivery {
	h.t.Helper()
	d, err := h.srv.ClickButton(h.ctx(), fakeslack.Click{User: user, Channel: channel, MessageTS: ts, ActionID: action})
	if err != nil {
		h.t.Fatalf("click %s as %s: %v", action, user, err)
	}
	return d
}

func (h *harness) record(id string) *ops.Record {
	h.t.Helper()
	rec, err := h.bot.Engine().Get(h.ctx(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec
}

// recordOrNil returns the record stored under id, or nil while there is none.
func (h *harness) recordOrNil(id string) *ops.Record {
	rec, err := h.bot.Engine().Get(h.ctx(), id)
	if err != nil {
		return nil
	}
	return rec
}

// requestID reads the request id from a plan message's buttons.
func requestID(t *testing.T, m fakeslack.Message) string {
	t.Helper()
	var blocks []map[string]any
	if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if els, ok := b["elements"].([]any); ok && b["type"] == "actions" {
			id, _ := handlers.ButtonTarget(els[0].(map[string]any)["value"].(string))
			return id
		}
	}
	t.Fatalf("no buttons on message %s", m.TS)
	return ""
}

func assertAcksFast(t *testing.T, s fakeslack.Snapshot) {
	t.Helper()
	for _, a := range s.Acks {
		if a.Latency > 3*time.Second {
			t.Errorf("envelope %s (%s) acked after %s, want within 3s", a.EnvelopeID, a.Type, a.Latency)
		}
	}
	for _, d := range s.Deliveries {
		if d.Failed {
			t.Errorf("delivery %s (%s) failed: not acked in time", d.EnvelopeID, d.Type)
		}
	}
}
