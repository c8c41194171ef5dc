package bot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/bot/schedule"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/kube"
	"github.com/hyperops/hyperops/ops/redact"
	"github.com/hyperops/hyperops/ops/report/collect"
	"github.com/hyperops/hyperops/ops/state"
)

// Options are what New wires; Run fills them from the configuration. Tests inject their own catalog and Redis.
type Options struct {
	Config *config.Config
	Log    zerolog.Logger
	// Redis is the state store's client; the caller owns it.
	Redis redis.UniversalClient
	// Catalog holds the operations.
	Catalog *ops.Catalog
	// Clock drives the engine, approvals and sweeps (default real).
	Clock clockwork.Clock
	// Reporter answers /hp report capacity (optional).
	Reporter handlers.Reporter
	// Limits are the Slack client's rate limits (default DefaultLimits()).
	Limits *Limits
	// SweepEvery is how often expired approvals and orphaned executions are swept (default 15s).
	SweepEvery time.Duration
	// JobTimeout bounds the handling of one envelope after its ack: validating, planning, voting (default
	// slack.handleTimeout). Executions never run in it: they go to the execution queue.
	JobTimeout time.Duration
	// ClaimIdle is how long a queue or outbox entry of a silent replica waits before another claims it
	// (default 30s).
	ClaimIdle time.Duration
	// Replica names this process (default: the engine's random name).
	Replica string
	// Listener serves /healthz, /readyz and /metrics; nil listens on Config.Server.Listen.
	Listener net.Listener
	// Clusters are the registered clusters' clients; with them the bot runs the job watcher (lease-guarded per
	// cluster) and answers /hp watch and /hp unwatch. Nil disables watching.
	Clusters *kube.Clusters
	// WatchLeaseTTL is how long a watcher lease lives without renewal (default 15s).
	WatchLeaseTTL time.Duration
	// Pricer prices capacity reports (default the built-in table with the config's overrides).
	Pricer ops.Pricer
	// Groups is the AWS view of instance groups in capacity reports (optional); when it is an
	// ops.ReservationReader too, reports list the training plans that end within a day, and the job-watch threads
	// of the workloads on a plan are warned risk.reservationWarnBefore before it ends.
	Groups collect.GroupSource
	// MCPListener serves MCP (bot/mcp.go); nil listens on Config.MCP.Listen, off when that is empty.
	MCPListener net.Listener
	// Tellers tune the outbox tellers (default engine.TellerOptions' defaults: 64 requests told at once).
	Tellers engine.TellerOptions
}

// Bot is a wired HyperOps process.
type Bot struct {
	opts    Options
	store   *state.Store
	engine  *engine.Engine
	handler *handlers.Handler
	slack   *SlackClient
	metrics *Metrics
	rt      *runtime
	watches *engine.Watches
	watcher *kube.Watcher
	reports *schedule.Scheduler
	teller  *teller
	// homes keeps the App Home tabs of the people who opened theirs up to date.
	homes *handlers.Homes
	// mcp is the MCP server while it serves (nil when MCP is off).
	mcp atomic.Pointer[mcpServing]
}

// notifier counts the transitions this replica stores and hands each to the Home tabs; telling people about them
// in messages is the outbox's.
type notifier struct {
	m *Metrics
	// homes is set once the handlers are built (nil until then).
	homes *handlers.Homes
}

// Changed refreshes the Homes the transition touches at once, rather than after the outbox told it: a Home must not
// wait for a channel's chat.postMessage budget. A replica that stops between storing and this call leaves those
// Homes one change behind until the next (Home is a read-only view).
func (n *notifier) Changed(ctx context.Context, rec *ops.Record, t ops.Transition) {
	n.m.transition(rec, t)
	if n.homes == nil {
		return
	}
	from := rec.Phase
	if t.Kind == ops.KindPhase {
		from = t.From
	}
	n.homes.Changed(ctx, rec, from)
}

var _ engine.ReservationWarningSink = (*watchSink)(nil)

// watchTeller tells watched workloads' changes and their reservation warnings.
type watchTeller interface {
	engine.WatchSink
	engine.ReservationWarningSink
}

// watchSink tells a watched workload's change in Slack, then refreshes the Homes that show the request that made it:
// a succeeded request whose workload still runs is running now.
type watchSink struct {
	// watchTeller is the handlers' teller; its reservation warnings must stay visible through the wrapper (the
	// watcher finds them by type assertion, and a sink without them is sent none).
	watchTeller
	records interface {
		Get(ctx context.Context, id string) (*ops.Record, error)
	}
	// homes is set once the handlers are built (nil until then).
	homes *handlers.Homes
}

func (s *watchSink) Watched(ctx context.Context, sub ops.WatchSubscription, c ops.WatchChange) error {
	err := s.watchTeller.Watched(ctx, sub, c)
	if id := handlers.WatchRequest(sub, c); s.homes != nil && id != "" {
		if rec, gerr := s.records.Get(ctx, id); gerr == nil {
			s.homes.Changed(ctx, rec, rec.Phase)
		}
	}
	return err
}

// teller is the handlers' outbox teller, counted.
type teller struct {
	*handlers.Teller
	m *Metrics
}

func (t *teller) Tell(ctx context.Context, rec *ops.Record, i int) error {
	if err := t.Teller.Tell(ctx, rec, i); err != nil {
		if !errors.Is(err, engine.ErrSuperseded) { // given way to newer entries, told with them at once
			t.m.TellFailures.Inc()
		}
		return err
	}
	t.m.Told.Inc()
	return nil
}

// New wires a bot from opts without connecting anywhere yet.
func New(opts Options) (*Bot, error) {
	cfg := opts.Config
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = 15 * time.Second
	}
	if opts.JobTimeout <= 0 {
		opts.JobTimeout = cfg.Slack.HandleTimeout.Std()
	}
	if opts.JobTimeout <= 0 {
		opts.JobTimeout = config.DefaultHandleTimeout.Std()
	}
	limits := DefaultLimits()
	if opts.Limits != nil {
		limits = *opts.Limits
	}
	jobs := make(chan job, cfg.Slack.QueueSize)
	m := NewMetrics(func() float64 { return float64(len(jobs)) })
	opts.Redis.AddHook(redisErrorHook{m})
	apiOpts := []slack.Option{slack.OptionAppLevelToken(cfg.Slack.AppToken)}
	if cfg.Slack.APIURL != "" {
		apiOpts = append(apiOpts, slack.OptionAPIURL(cfg.Slack.APIURL))
	}
	api := slack.New(cfg.Slack.BotToken, apiOpts...)
	sc := NewSlackClient(api, limits, m)
	notes := &notifier{m: m}
	redactor, err := redact.For(cfg)
	if err != nil {
		return nil, err
	}
	sc.SetRedactor(redactor)
	handlers.SetRedactor(redactor)
	store := state.New(opts.Redis, state.Options{KeyPrefix: cfg.Redis.KeyPrefix, RequestTTL: cfg.Redis.RequestTTL.Std(),
		DedupeTTL: cfg.Redis.DedupeTTL.Std(), AuditMaxLen: cfg.Audit.MaxEntries, Clock: opts.Clock, ClaimIdle: opts.ClaimIdle})
	sc.SetChannelLimiter(channelRates{store})
	policy := approvals.New(cfg, sc, opts.Clock)
	log := opts.Log
	eng := engine.New(opts.Catalog, store, store, policy, engine.Options{
		Replica: opts.Replica, Clock: opts.Clock, Notifier: notes, Targets: engine.ConfigTargets(cfg),
		Risk:  approvals.RiskPolicyFor(cfg),
		Queue: store.Queue(), Budgets: budgets(cfg), HoldTTL: cfg.Execution.HoldUnknown.Std(),
		WriteTimeout: cfg.Execution.WriteTimeout.Std(), Ledger: store, Glass: store, Grants: store,
		OnError: func(id string, err error) {
			m.EngineErrors.Inc()
			log.Error().Err(err).Str("request", id).Msg("engine")
		},
	})
	refs := storeRefs{store}
	var sched *schedule.Scheduler
	if opts.Clusters != nil {
		var rep handlers.Reporter
		var err error
		if sched, rep, err = reporting(opts, store, sc, eng); err != nil {
			return nil, err
		}
		if opts.Reporter == nil {
			opts.Reporter = rep
		}
	}
	hcfg := handlerConfig(cfg, func(err error) { log.Warn().Err(err).Msg("slack output failed") })
	hcfg.OnUndelivered = func(u handlers.Undelivered) {
		m.Undelivered.WithLabelValues(u.Part, u.Code).Inc()
		log.Warn().Err(u.Err).Str("request", u.RequestID).Int("entry", u.Entry).Str("part", u.Part).Str("channel", u.Channel).
			Str("method", u.Method).Str("slack_error", u.Code).Msg("slack refused a message for good")
	}
	hcfg.Workloads = store
	var watches *engine.Watches
	sink := &watchSink{watchTeller: handlers.NewWatchTeller(hcfg, opts.Catalog, eng, sc), records: eng}
	if opts.Clusters != nil {
		watches = engine.NewWatches(engine.WatchOptions{Store: store, Objects: opts.Clusters, Targets: engine.ConfigTargets(cfg),
			Sink: sink, Clusters: opts.Clusters.Names(),
			OnCount: func(n int64) { m.WatchedObjects.Set(float64(n)) },
			OnEnded: func(ctx context.Context, c ops.WatchChange) {
				if err := eng.SettleRun(ctx, c.RequestID, eng.Now()); err != nil {
					log.Warn().Err(err).Str("request", c.RequestID).Msg("budget: settling an ended run failed")
				}
			},
			OnError: func(c ops.WatchChange, err error) {
				log.Warn().Err(err).Str("object", c.Object.Kind+"/"+c.Object.Name).Str("to", c.To).Msg("watch: telling a transition failed")
			}})
		hcfg.Watches = watches
	}
	h := handlers.New(hcfg, eng, policy, opts.Catalog, sc, refs, opts.Reporter)
	homes := handlers.NewHomes(h, store, sc, handlers.HomeOptions{
		OnPublish: func(err error) {
			outcome := "ok"
			if err != nil {
				outcome = "failed"
			}
			m.HomePublishes.WithLabelValues(outcome).Inc()
		},
		OnSkip:     m.HomeSkipped.Inc,
		OnCoalesce: m.HomeCoalesced.Inc,
		OnChange:   func(n int) { m.HomeTouched.Observe(float64(n)) },
		OnError:    func(err error) { log.Warn().Err(err).Msg("home tab") },
	})
	notes.homes, sink.homes = homes, homes
	rt := &runtime{smc: socketmode.New(api), h: h, dedupe: store, metrics: m, log: log, slack: sc, jobs: jobs, homes: homes,
		overflow: make(chan struct{}, busyAnswers),
		workers:  cfg.Slack.Workers, timeout: opts.JobTimeout, command: cfg.Slack.Command}
	b := &Bot{opts: opts, store: store, engine: eng, handler: h, slack: sc, metrics: m, rt: rt, reports: sched,
		watches: watches, teller: &teller{Teller: h.Teller(), m: m}, homes: homes}
	b.registerMCPGauges()
	if watches != nil {
		// The training plans the instance groups run on (the AWS view of the groups) warn the watched workloads on
		// them before they end.
		reservations, _ := opts.Groups.(ops.ReservationReader)
		b.watcher = kube.NewWatcher(opts.Clusters, kube.WatcherOptions{Leases: store, Sink: watches, Holder: eng.Replica(),
			LeaseTTL: opts.WatchLeaseTTL, OnError: func(cluster string, err error) {
				log.Warn().Err(err).Str("cluster", cluster).Msg("watcher")
			},
			Reservations: reservations, ReservationWarnBefore: cfg.Risk.ReservationWarnBefore.Std(), Clock: opts.Clock})
	}
	return b, nil
}

func budgets(cfg *config.Config) map[ops.Budget]time.Duration {
	b := cfg.Execution.Budgets
	return map[ops.Budget]time.Duration{ops.BudgetKubernetes: b.Kubernetes.Std(), ops.BudgetCapacity: b.Capacity.Std(),
		ops.BudgetBootstrap: b.Bootstrap.Std()}
}

func handlerConfig(cfg *config.Config, onErr func(error)) handlers.Config {
	agents := map[string]handlers.AgentInfo{}
	for _, a := range cfg.Agents {
		if a.SlackUser == "" {
			continue // an MCP-only agent
		}
		agents[a.SlackUser] = handlers.AgentInfo{Name: a.Name, Operations: a.Operations}
	}
	return handlers.Config{Command: cfg.Slack.Command, Channels: cfg.Slack.Channels, ApprovalsChannel: cfg.Slack.ApprovalsChannel,
		AuditChannel: cfg.Slack.AuditChannel, Agents: agents, OnError: onErr}
}

// Engine returns the bot's engine.
func (b *Bot) Engine() *engine.Engine { return b.engine }

// Homes returns the bot's App Home tabs.
func (b *Bot) Homes() *handlers.Homes { return b.homes }

// Metrics returns the bot's metrics.
func (b *Bot) Metrics() *Metrics { return b.metrics }

// Connected reports whether the Socket Mode connection is up.
func (b *Bot) Connected() bool { return b.rt.connected.Load() }

// HTTPHandler serves /healthz (alive), /readyz (Slack connected and Redis reachable), /metrics, and the audit trail
// (AuditPath, to its bearer token).
func (b *Bot) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var problems []string
		if !b.Connected() {
			problems = append(problems, "slack: socket mode not connected")
		}
		if err := b.store.Ping(ctx); err != nil {
			problems = append(problems, "redis: "+err.Error())
		}
		if len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, p := range problems {
				_, _ = fmt.Fprintln(w, p)
			}
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(b.metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc(AuditPath, b.auditHandler)
	return mux
}

// Run serves until ctx ends: the HTTP endpoints, the Socket Mode connection, the worker pool and the sweeper. It
// returns after every goroutine it started has stopped.
func (b *Bot) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	me, err := b.slack.AuthTest(actx)
	acancel()
	if err != nil {
		return fmt.Errorf("check the bot token: %w", err)
	}
	b.rt.botUser, b.rt.botID, b.rt.workspace = me.UserID, me.BotID, me.WorkspaceURL
	b.opts.Log.Info().Str("replica", b.engine.Replica()).Str("bot_user", me.UserID).Msg("hyperops starting: executors, tellers and the Slack connection")
	ln := b.opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", b.opts.Config.Server.Listen); err != nil {
			return fmt.Errorf("listen on %s: %w", b.opts.Config.Server.Listen, err)
		}
	}
	stopMCP, err := b.startMCP(ctx)
	if err != nil {
		return err
	}
	defer stopMCP()
	srv := &http.Server{Handler: b.HTTPHandler(), ReadTimeout: b.opts.Config.Server.ReadTimeout.Std(),
		IdleTimeout: b.opts.Config.Server.IdleTimeout.Std()}
	errc := make(chan error, 1)
	b.rt.wg.Add(1)
	go func() {
		defer b.rt.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("serve http: %w", err)
			cancel()
		}
	}()
	var workers, loops = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(workers)
		b.runWorkers(ctx)
	}()
	go func() {
		defer close(loops)
		b.runLoops(ctx)
	}()
	<-ctx.Done()
	<-loops // the event loop has stopped: nothing enqueues any more
	close(b.rt.jobs)
	<-workers
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(sctx)
	scancel()
	b.rt.wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

// shutdownDrain is how long acked envelopes may still be handled after the replica is asked to stop; then their
// contexts end, so the process exits well within the chart's terminationGracePeriodSeconds (30 s). Executions are
// not among them: they are handed over at once.
const shutdownDrain = 15 * time.Second

func (b *Bot) runWorkers(ctx context.Context) {
	// Accepted work goes on after the stop signal, for shutdownDrain at most.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-stopped:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(shutdownDrain)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
			cancel()
		}
	}()
	done := make(chan struct{}, b.rt.workers)
	for range b.rt.workers {
		go func() {
			b.rt.work(wctx)
			done <- struct{}{}
		}()
	}
	for range b.rt.workers {
		<-done
	}
}

func (b *Bot) runLoops(ctx context.Context) {
	loops := []func(context.Context){b.rt.connect, b.rt.loop, b.sweep, b.execute, b.tell, b.homes.Run}
	if b.reports != nil {
		loops = append(loops, b.reports.Run)
	}
	if b.watcher != nil {
		loops = append(loops, func(ctx context.Context) {
			if err := b.watcher.Run(ctx); err != nil {
				b.opts.Log.Error().Err(err).Msg("watcher stopped")
			}
		})
	}
	done := make(chan struct{}, len(loops))
	for _, f := range loops {
		go func() { f(ctx); done <- struct{}{} }()
	}
	for range loops {
		<-done
	}
}

// execute runs this replica's executors until ctx ends, then hands their work over.
func (b *Bot) execute(ctx context.Context) {
	cfg := b.opts.Config.Execution
	if err := b.engine.RunExecutors(ctx, engine.ExecutorOptions{Workers: cfg.Workers, PerCluster: cfg.PerCluster}); err != nil {
		b.opts.Log.Error().Err(err).Msg("executors stopped")
	}
}

// tell consumes the outbox: transitions are told to Slack here, apart from the executions that make them.
func (b *Bot) tell(ctx context.Context) {
	b.engine.RunTellers(ctx, b.store.Outbox(), b.teller, b.opts.Tellers)
}

// sweep expires approvals and marks orphaned executions, on every replica (transitions are compare-and-set).
func (b *Bot) sweep(ctx context.Context) {
	t := b.opts.Clock.NewTicker(b.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			if _, err := b.engine.Sweep(ctx); err != nil {
				b.opts.Log.Warn().Err(err).Msg("sweep failed")
			}
			if b.watches != nil {
				b.watches.Count(ctx)
			}
		}
	}
}

// Run is the whole HyperOps process for cmd/hyperops: it connects Redis (embedded when no URL is configured),
// builds the catalog from the configured clusters and AWS, and serves until ctx ends.
func Run(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	return RunEmbedded(ctx, cfg, log, Embedding{})
}

func connectRedis(ctx context.Context, cfg *config.Config, log zerolog.Logger) (redis.UniversalClient, func(), error) {
	if !cfg.Redis.Embedded() {
		return dialRedis(ctx, cfg.Redis, log)
	}
	url, stopEmbedded, err := state.Embedded(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("start the embedded redis: %w", err)
	}
	log.Warn().Msg("redis.url is empty: using an embedded in-process Redis; single replica only, state is lost on restart")
	rdb, err := state.Dial(ctx, url)
	if err != nil {
		stopEmbedded()
		return nil, nil, fmt.Errorf("connect redis: %w", err)
	}
	return rdb, func() { _ = rdb.Close(); stopEmbedded() }, nil
}
