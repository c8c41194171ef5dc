package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/report"
	"github.com/hyperops/hyperops/ops/report/collect"
)

// TickClaimer claims a report's scheduled run; exactly one caller across replicas gets true (ops/state's Store
// implements it with SET NX). Errors mean the claim is unknown, and nothing is posted.
type TickClaimer interface {
	ClaimTick(ctx context.Context, report string, scheduled time.Time) (bool, error)
}

// Publisher posts to Slack: a report with its chart (a PNG, nil when the report shows none), and short notices
// (missed or failed runs).
type Publisher interface {
	PublishReport(ctx context.Context, channel string, r report.Report, chart []byte) error
	PublishNotice(ctx context.Context, channel, text string) error
}

// Builder builds one cluster's report; *collect.Builder implements it.
type Builder interface {
	Build(ctx context.Context, s collect.Spec) (report.Report, error)
}

// Defaults of Options.
const (
	DefaultGrace        = 2 * time.Minute
	DefaultLookback     = 12 * time.Hour
	DefaultRetryEvery   = 15 * time.Second
	DefaultBuildTimeout = 2 * time.Minute
	// maxTicksPerPass bounds how many past ticks one pass claims (an every-minute report over the lookback).
	maxTicksPerPass = 1440
	// probeHorizon is how far before the lookback the probe tick is searched for: within the claims' 48h lifetime.
	probeHorizon = 32 * time.Hour
)

// Options configure a Scheduler. Config, Claimer, Builder and Publisher are required.
type Options struct {
	Config    *config.Config
	Claimer   TickClaimer
	Builder   Builder
	Publisher Publisher
	// Clock drives the schedules (default: the real clock).
	Clock clockwork.Clock
	Log   zerolog.Logger
	// Grace is how late after its time a tick may still be posted; a tick claimed later is reported as missed
	// instead (default DefaultGrace).
	Grace time.Duration
	// Lookback is how far back a starting replica looks for ticks nobody claimed, to report them as missed. It must
	// stay below the claim's lifetime in the state store (48h), or old ticks would be claimed again (default
	// DefaultLookback).
	Lookback time.Duration
	// RetryEvery is how soon a claim that failed (state store unreachable) is tried again (default
	// DefaultRetryEvery).
	RetryEvery time.Duration
	// BuildTimeout bounds building and posting one run (default DefaultBuildTimeout).
	BuildTimeout time.Duration
}

// Scheduler runs the configured reports.
type Scheduler struct {
	opts    Options
	reports []scheduled
}

type scheduled struct {
	cfg   config.Report
	sched cron.Schedule
}

// New parses every report's schedule; a bad expression or zone is an error naming the report.
func New(opts Options) (*Scheduler, error) {
	if opts.Config == nil || opts.Claimer == nil || opts.Builder == nil || opts.Publisher == nil {
		return nil, errors.New("schedule: Config, Claimer, Builder and Publisher are required")
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	setDefault(&opts.Grace, DefaultGrace)
	setDefault(&opts.Lookback, DefaultLookback)
	setDefault(&opts.RetryEvery, DefaultRetryEvery)
	setDefault(&opts.BuildTimeout, DefaultBuildTimeout)
	s := &Scheduler{opts: opts}
	var errs []error
	for _, r := range opts.Config.Reports {
		sched, err := r.ParseSchedule()
		if err != nil {
			errs = append(errs, fmt.Errorf("report %q: %w", r.Name, err))
			continue
		}
		s.reports = append(s.reports, scheduled{cfg: r, sched: sched})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	return s, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Run runs every report until ctx ends, then waits for the runs in progress to finish.
func (s *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range s.reports {
		wg.Add(1)
		go func(r *scheduled) {
			defer wg.Done()
			s.loop(ctx, r)
		}(&s.reports[i])
	}
	wg.Wait()
}

// loop claims each tick of one report as it comes due. The cursor is the last tick dealt with; it only moves past
// a tick once the tick's claim got an answer, so a tick whose claim failed is tried again, and then reported as
// missed if it has become late.
func (s *Scheduler) loop(ctx context.Context, r *scheduled) {
	clock := s.opts.Clock
	cursor, probe, ranBefore, ok := s.startup(ctx, r)
	if !ok {
		return
	}
	var claimErr error // the last claim failure, to explain the ticks it made late
	for {
		now := clock.Now()
		var missed, before []time.Time
		failed := false
		for _, tick := range dueTicks(r.sched, cursor, now) {
			claimed, err := s.opts.Claimer.ClaimTick(ctx, r.cfg.Name, tick)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.opts.Log.Error().Err(err).Str("report", r.cfg.Name).Time("scheduled", tick).Msg("cannot claim report tick; retrying")
				claimErr, failed = err, true
				break
			}
			cursor = tick
			switch {
			case !claimed:
				ranBefore = true // another replica has it
			case tick.Equal(probe):
				// the probe is only evidence; it is older than the lookback and never posted
			case clock.Since(tick) <= s.opts.Grace:
				s.post(ctx, r, tick)
			case ranBefore:
				missed = append(missed, tick)
			default:
				before = append(before, tick)
			}
		}
		if len(before) > 0 {
			s.opts.Log.Info().Str("report", r.cfg.Name).Int("ticks", len(before)).Time("from", before[0]).Time("to", before[len(before)-1]).
				Msg("ticks before the report first ran; not reported as missed")
		}
		if len(missed) > 0 {
			s.notice(ctx, r.cfg.Channel, missedText(r, missed, s.opts.Grace, claimErr))
		}
		wait := s.opts.RetryEvery
		if !failed {
			// from here on this replica runs the report, so a later tick nobody claimed in time was missed
			ranBefore, claimErr = true, nil
			wait = r.sched.Next(clock.Now()).Sub(clock.Now())
		}
		if !sleep(ctx, clock, wait) {
			return
		}
	}
}

// startup decides where a starting replica begins. It looks back over Lookback for ticks no replica claimed, to
// report them as missed, but only if the report was running before them: the last tick before the window is
// claimed as a probe (never posted), and a probe or window tick someone else had claimed proves it; so a report
// that has just been added, or a first deployment, reports nothing missed. Replicas that start together would take
// each other's look-back claims for evidence, so the look-back itself is claimed, per most recent tick: one of them
// looks back, the others start from now.
func (s *Scheduler) startup(ctx context.Context, r *scheduled) (cursor, probe time.Time, ranBefore, ok bool) {
	clock := s.opts.Clock
	for {
		now := clock.Now()
		latest := prevTick(r.sched, now)
		if latest.IsZero() {
			return now, time.Time{}, false, true // nothing scheduled in the horizon: nothing to look back on
		}
		mine, err := s.opts.Claimer.ClaimTick(ctx, r.cfg.Name+lookbackSuffix, latest)
		if ctx.Err() != nil {
			return time.Time{}, time.Time{}, false, false
		}
		if err != nil {
			s.opts.Log.Error().Err(err).Str("report", r.cfg.Name).Msg("cannot claim the look-back; retrying")
			if !sleep(ctx, clock, s.opts.RetryEvery) {
				return time.Time{}, time.Time{}, false, false
			}
			continue
		}
		if !mine {
			// another replica is looking back from the same tick, and deals with every tick until now
			return now, time.Time{}, true, true
		}
		cursor = now.Add(-s.opts.Lookback)
		probe = prevTick(r.sched, cursor)
		if !probe.IsZero() {
			cursor = probe.Add(-time.Nanosecond)
		}
		return cursor, probe, false, true
	}
}

// lookbackSuffix names the claim of a starting replica's look-back (a key apart from the report's ticks).
const lookbackSuffix = "/look-back"

func sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clock.After(d):
		return true
	}
}

// prevTick is the last scheduled time at or before t, searched up to probeHorizon back; zero if none.
func prevTick(sched cron.Schedule, t time.Time) time.Time {
	for span := time.Hour; span <= probeHorizon; span *= 2 {
		prev := sched.Next(t.Add(-span))
		if prev.IsZero() || prev.After(t) {
			continue
		}
		for next := sched.Next(prev); !next.IsZero() && !next.After(t); next = sched.Next(next) {
			prev = next
		}
		return prev
	}
	return time.Time{}
}

// dueTicks lists the scheduled times in (after, now], oldest first, at most maxTicksPerPass of the newest.
func dueTicks(sched cron.Schedule, after, now time.Time) []time.Time {
	var out []time.Time
	for t := sched.Next(after); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		out = append(out, t)
	}
	if len(out) > maxTicksPerPass {
		out = out[len(out)-maxTicksPerPass:]
	}
	return out
}

func missedText(r *scheduled, ticks []time.Time, grace time.Duration, claimErr error) string {
	loc := r.cfg.Location()
	why := fmt.Sprintf("no replica was running to post it within %s of its time", grace)
	if claimErr != nil {
		why = "the state store (Redis) was unreachable, so no replica could claim it"
	}
	format := "Mon Jan 2 15:04 MST"
	if len(ticks) == 1 {
		return fmt.Sprintf(":warning: report %s scheduled at %s was missed: %s.", r.cfg.Name, ticks[0].In(loc).Format(format), why)
	}
	return fmt.Sprintf(":warning: report %s: %d scheduled runs from %s to %s were missed: %s.", r.cfg.Name, len(ticks),
		ticks[0].In(loc).Format(format), ticks[len(ticks)-1].In(loc).Format(format), why)
}

// post builds and publishes the report of every cluster it covers. A cluster that fails is told as a notice; the
// others are still posted.
func (s *Scheduler) post(ctx context.Context, r *scheduled, tick time.Time) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.BuildTimeout)
	defer cancel()
	log := s.opts.Log.With().Str("report", r.cfg.Name).Time("scheduled", tick).Logger()
	for _, spec := range collect.SpecsFor(s.opts.Config, &r.cfg) {
		if err := Publish(ctx, s.opts.Builder, s.opts.Publisher, r.cfg.Channel, spec); err != nil {
			log.Error().Err(err).Str("cluster", spec.Cluster).Msg("capacity report failed")
			s.notice(ctx, r.cfg.Channel, fmt.Sprintf(":x: report %s for cluster %s scheduled at %s failed: %s", r.cfg.Name, spec.Cluster,
				tick.In(r.cfg.Location()).Format("Mon Jan 2 15:04 MST"), firstLine(err)))
		}
	}
}

func (s *Scheduler) notice(ctx context.Context, channel, text string) {
	if err := s.opts.Publisher.PublishNotice(ctx, channel, text); err != nil {
		s.opts.Log.Error().Err(err).Str("channel", channel).Str("notice", text).Msg("cannot post report notice")
	}
}

// Publish builds one cluster's report, draws its chart when the report shows one, and publishes both. A chart that
// cannot be drawn is a warning on the report, not a failure.
func Publish(ctx context.Context, b Builder, p Publisher, channel string, spec collect.Spec) error {
	r, err := b.Build(ctx, spec)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	var chart []byte
	if r.Shows(report.SectionChart) {
		if chart, err = report.Chart(r); err != nil {
			r.Warnings = append(r.Warnings, "the chart could not be drawn: "+err.Error())
		}
	}
	if err := p.PublishReport(ctx, channel, r, chart); err != nil {
		return fmt.Errorf("publish to %s: %w", channel, err)
	}
	return nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
