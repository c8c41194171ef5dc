package schedule

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/report"
	"github.com/hyperops/hyperops/ops/report/collect"
)

// memClaimer claims like Redis SET NX: the first claim of a (report, time) wins; failing makes it unreachable.
type memClaimer struct {
	mu      sync.Mutex
	claimed map[string]bool
	ticks   []time.Time
	failing bool
}

func (c *memClaimer) ClaimTick(_ context.Context, report string, at time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing {
		return false, ops.ErrStateUnavailable
	}
	if c.claimed == nil {
		c.claimed = map[string]bool{}
	}
	k := report + "@" + at.UTC().Format(time.RFC3339)
	if c.claimed[k] {
		return false, nil
	}
	c.claimed[k] = true
	c.ticks = append(c.ticks, at.UTC())
	return true, nil
}

func (c *memClaimer) setFailing(f bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failing = f
}

func (c *memClaimer) claimedTicks() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]time.Time(nil), c.ticks...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

type published struct {
	channel string
	report  report.Report
	chart   []byte
	notice  string
}

// recPublisher records what would be posted and signals each post on events.
type recPublisher struct {
	mu     sync.Mutex
	posts  []published
	events chan published
}

func newPublisher() *recPublisher { return &recPublisher{events: make(chan published, 100)} }

func (p *recPublisher) PublishReport(_ context.Context, channel string, r report.Report, chart []byte) error {
	return p.add(published{channel: channel, report: r, chart: chart})
}

func (p *recPublisher) PublishNotice(_ context.Context, channel, text string) error {
	return p.add(published{channel: channel, notice: text})
}

func (p *recPublisher) add(e published) error {
	p.mu.Lock()
	p.posts = append(p.posts, e)
	p.mu.Unlock()
	p.events <- e
	return nil
}

func (p *recPublisher) all() []published {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]published(nil), p.posts...)
}

// next waits for the next post.
func (p *recPublisher) next(t *testing.T) published {
	t.Helper()
	select {
	case e := <-p.events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was posted within 10s")
		return published{}
	}
}

// clockBuilder builds a small report at the clock's time; clusters in fail cannot be read.
type clockBuilder struct {
	clock clockwork.Clock
	fail  map[string]bool
}

func (b clockBuilder) Build(_ context.Context, s collect.Spec) (report.Report, error) {
	if b.fail[s.Cluster] {
		return report.Report{}, ops.Errorf(ops.CodeClusterUnavailable, "", "check the API server", "cannot read cluster %s", s.Cluster)
	}
	return report.Report{Name: s.Report, Cluster: s.Cluster, At: b.clock.Now().In(s.Location), Sections: s.Sections,
		Groups: []report.Group{{Name: "g", GPUs: report.GPUs{Total: 8, Allocated: 6, Free: 2}}}}, nil
}

func testConfig(reports ...config.Report) *config.Config {
	cfg := &config.Config{
		Clusters: []config.Cluster{{Name: "ml-prod-eks", Region: "us-west-2"}, {Name: "ml-dev-eks", Region: "us-east-1"}},
		Reports:  reports,
	}
	for i := range cfg.Reports {
		if cfg.Reports[i].Channel == "" {
			cfg.Reports[i].Channel = "C0123OPS"
		}
		if cfg.Reports[i].Sections == nil {
			// drawing charts is slow under -race; the tests that check the chart ask for it
			cfg.Reports[i].Sections = []string{report.SectionGPUs, report.SectionSpend}
		}
		if len(cfg.Reports[i].Clusters) == 0 {
			cfg.Reports[i].Clusters = []string{"ml-prod-eks"}
		}
	}
	return cfg
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// start runs a scheduler until the test ends and waits for it to stop.
func start(t *testing.T, opts Options) {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitIdle waits until n schedulers sleep on the clock, i.e. they finished their pass.
func waitIdle(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("schedulers did not go back to sleep: %v", err)
	}
}

// testLog writes the scheduler's log to the test's log.
func testLog(t *testing.T, replica string) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).With().Str("replica", replica).Logger()
}
