package bot

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

const (
	// longExecutions is how many executions are in flight (writing done, observing) in BenchmarkSlackWhileExecuting.
	longExecutions = 200
	// latencyProbes is how many slash commands of each kind measure the Slack path per phase.
	latencyProbes = 200
)

// followRealTime advances the harness's fake clock with the wall clock, so the engine renews its locks and queue
// claims as it would in production while the executions stay in flight longer than a lock's TTL.
func followRealTime(tb testing.TB, h *harness) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				h.clock.Advance(now.Sub(last))
				last = now
			}
		}
	}()
	tb.Cleanup(func() { close(stop); <-done })
}

// slashLatencies are what one phase of probes measured.
type slashLatencies struct {
	ack    []time.Duration // envelope written → ack read (fake Slack's wall clock)
	status []time.Duration // /hp widget status sent → its answer posted (by the Slack worker)
	dryRun []time.Duration // /hp gadget roll … dry-run sent → its plan posted (through the outbox)
}

// probePace is the gap between two probes: people typing, not a load test. Probes may overlap when answers are slow.
const probePace = 15 * time.Millisecond

// probeSlash sends latencyProbes status commands and as many dry runs, one every probePace, then reads every
// latency from one look at the fake's records (polling the fake while measuring would compete with the bot).
func (h *harness) probeSlash(tb testing.TB, phase string) slashLatencies {
	tb.Helper()
	var out slashLatencies
	type probe struct {
		mark string
		sent time.Time
		into *[]time.Duration
	}
	var probes []probe
	send := func(text, mark string, into *[]time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sent := time.Now()
		d, err := h.srv.SlashCommand(ctx, fakeslack.SlashCommand{Text: text, User: userBob, Channel: chOps})
		if err != nil {
			tb.Fatal(err)
		}
		a, err := d.Ack(ctx)
		if err != nil {
			tb.Fatalf("%s: %v", text, err)
		}
		out.ack = append(out.ack, a.Latency)
		probes = append(probes, probe{mark: mark, sent: sent, into: into})
	}
	tick := time.NewTicker(probePace)
	defer tick.Stop()
	for i := range latencyProbes {
		st := fmt.Sprintf("%s-s-%03d", phase, i)
		send("widget status name="+st, st, &out.status)
		<-tick.C
		dr := fmt.Sprintf("%s-d-%03d", phase, i)
		send("gadget roll name="+dr+" dry-run", dr, &out.dryRun)
		<-tick.C
	}
	answer := func(s fakeslack.Snapshot, mark string) (fakeslack.Message, bool) {
		ms := mentioning(topLevel(s, chOps), mark)
		if len(ms) == 0 {
			return fakeslack.Message{}, false
		}
		return ms[0], true
	}
	s := pollSlack(tb, h.srv, phase+" probes answered", time.Minute, func(s fakeslack.Snapshot) bool {
		for _, p := range probes {
			if _, ok := answer(s, p.mark); !ok {
				return false
			}
		}
		return true
	})
	for _, p := range probes {
		m, _ := answer(s, p.mark)
		*p.into = append(*p.into, m.PostedAt.Sub(p.sent))
	}
	return out
}

// footprint is the process's live heap and resident memory after a collection, its goroutines, and redis-server's
// used memory.
type footprint struct {
	heap, rss, redis uint64
	goroutines       int
}

func (h *harness) footprint(tb testing.TB) footprint {
	tb.Helper()
	goruntime.GC()
	debug.FreeOSMemory()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return footprint{heap: ms.HeapAlloc, rss: vmRSS(tb), redis: redisUsed(tb, h), goroutines: goruntime.NumGoroutine()}
}

func redisUsed(tb testing.TB, h *harness) uint64 {
	info, err := h.bot.opts.Redis.Info(h.ctx(), "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	tb.Fatal("no used_memory in INFO memory")
	return 0
}

// BenchmarkSlackWhileExecuting measures the Slack path with two replicas idle and then with longExecutions long
// executions in flight (written, Await blocking), side by side in one run: envelope → ack p99, and slash command
// sent → its answer posted p99 for a status command (answered by the Slack worker) and a dry run (its plan told from
// the outbox), with the ratio busy/idle (docs/architecture.md, Performance targets: within 1.2×); and the memory each in-flight execution costs.
func BenchmarkSlackWhileExecuting(b *testing.B) {
	var gate atomic.Value // chan struct{}: the current round's executions observe until it closes
	var op *stepOp
	edit := func(c *config.Config) {
		c.Execution.Workers, c.Execution.PerCluster = longExecutions, longExecutions
		c.Slack.QueueSize = 4 * longExecutions
	}
	h := startWith(b, harnessOptions{replica: "a", edit: edit, prepare: func(h *harness) {
		op = newStepOp("roll-gadget")
		op.await = func(ctx context.Context, _ *ops.Request) error {
			select {
			case <-gate.Load().(chan struct{}):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		h.extra = append(h.extra, op)
	}})
	h.launchSecond(harnessOptions{replica: "b", edit: edit})
	followRealTime(b, h)
	round := 0
	for b.Loop() {
		release := make(chan struct{})
		gate.Store(release)
		idle := h.probeSlash(b, fmt.Sprintf("idle%d", round))
		before := h.footprint(b)
		awaits, done := op.awaits.Load(), op.done.Load()
		for i := range longExecutions {
			h.slash(userAlice, chOps, fmt.Sprintf("gadget roll name=long%d-%03d request-id=long%d-%03d", round, i, round, i))
		}
		opstest.Eventually(b, 2*time.Minute, "every long execution observing", func() bool {
			return op.awaits.Load()-awaits == longExecutions
		})
		opstest.Eventually(b, 2*time.Minute, "their transitions told", func() bool { return h.outboxPending() == 0 })
		during := h.footprint(b)
		busy := h.probeSlash(b, fmt.Sprintf("busy%d", round))
		if n := op.awaits.Load() - awaits; n != longExecutions || op.done.Load() != done {
			b.Fatalf("%d executions observing and %d finished during the measurement, want %d and 0", n, op.done.Load()-done, longExecutions)
		}
		byReplica := h.executingByReplica(b, longExecutions, 2)
		close(release)
		opstest.Eventually(b, 2*time.Minute, "every long execution finished", func() bool {
			return op.done.Load()-done == longExecutions
		})
		reportSlackWhileExecuting(b, idle, busy, before, during, byReplica)
		round++
	}
}

// executingByReplica counts the executing requests per replica, from the store; want executions on replicas.
func (h *harness) executingByReplica(tb testing.TB, want, replicas int) map[string]int {
	recs, err := h.bot.Engine().List(h.ctx(), engine.ListQuery{Phases: []ops.Phase{ops.PhaseExecuting}, Limit: 10 * want})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		out[r.Replica]++
	}
	if len(out) != replicas || len(recs) != want {
		tb.Fatalf("executing per replica %v, want %d executions on %d replicas", out, want, replicas)
	}
	return out
}

func reportSlackWhileExecuting(b *testing.B, idle, busy slashLatencies, before, during footprint, byReplica map[string]int) {
	fmt.Fprintf(os.Stdout, "\nSlack path, two replicas, idle vs %d executions in flight %v (%d probes each, loopback, real Redis)\n",
		longExecutions, byReplica, latencyProbes)
	reportSideBySide(b, longExecutions, idle, busy, before, during)
}

// reportSideBySide prints the idle and busy latencies side by side and what each in-flight execution costs.
func reportSideBySide(b *testing.B, executions int, idle, busy slashLatencies, before, during footprint) {
	rows := []struct {
		name       string
		idle, busy []time.Duration
		unit       string
	}{
		{"envelope → ack", idle.ack, busy.ack, "ack"},
		{"status → answer", idle.status, busy.status, "status"},
		{"dry run → plan", idle.dryRun, busy.dryRun, "dryrun"},
	}
	fmt.Fprintf(os.Stdout, "%-18s %10s %10s %10s %10s %8s\n", "", "idle p50", "idle p99", "busy p50", "busy p99", "p99 ×")
	for _, r := range rows {
		ip50, ip99, bp50, bp99 := percentile(r.idle, 50), percentile(r.idle, 99), percentile(r.busy, 50), percentile(r.busy, 99)
		ratio := float64(bp99) / float64(max(ip99, time.Microsecond))
		fmt.Fprintf(os.Stdout, "%-18s %10s %10s %10s %10s %8.2f\n", r.name, ip50.Round(time.Microsecond), ip99.Round(time.Microsecond),
			bp50.Round(time.Microsecond), bp99.Round(time.Microsecond), ratio)
		b.ReportMetric(float64(ip99.Microseconds()), r.unit+"-idle-p99-µs")
		b.ReportMetric(float64(bp99.Microseconds()), r.unit+"-busy-p99-µs")
		b.ReportMetric(ratio, r.unit+"-p99-ratio")
	}
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(executions) / 1024 }
	heap, rss, redis := per(during.heap, before.heap), per(during.rss, before.rss), per(during.redis, before.redis)
	gor := float64(during.goroutines-before.goroutines) / float64(executions)
	fmt.Fprintf(os.Stdout, "per in-flight execution (every replica and fake Slack in this process): heap %.1f KiB, RSS %.1f KiB, "+
		"goroutines %.1f; redis-server used_memory %.1f KiB\n", heap, rss, gor, redis)
	b.ReportMetric(heap, "heap-KiB/exec")
	b.ReportMetric(rss, "rss-KiB/exec")
	b.ReportMetric(gor, "goroutines/exec")
	b.ReportMetric(redis, "redis-KiB/exec")
}

// observingExecutions is how many long executions one replica observes at once in BenchmarkSlackWhileObserving.
const observingExecutions = 1000

// BenchmarkSlackWhileObserving measures one replica with the default executor limits (execution.workers 16,
// perCluster 4), idle and then with observingExecutions long executions of one cluster in flight (written, their
// Await waiting), side by side in one run: each execution whose write is accepted gives its slots back while it
// observes (issue 21), so all of them are in flight at once. It reports the memory each costs and the Slack path's
// p99s busy against idle.
func BenchmarkSlackWhileObserving(b *testing.B) {
	var gate atomic.Value // chan struct{}: the current round's executions observe until it closes
	var op *stepOp
	edit := func(c *config.Config) { c.Slack.QueueSize = 4 * observingExecutions }
	h := startWith(b, harnessOptions{replica: "a", edit: edit, prepare: func(h *harness) {
		op = newStepOp("roll-gadget")
		op.await = func(ctx context.Context, _ *ops.Request) error {
			select {
			case <-gate.Load().(chan struct{}):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		h.extra = append(h.extra, op)
	}})
	h.waitConnected(1)
	followRealTime(b, h)
	cfg := h.bot.opts.Config.Execution
	round := 0
	for b.Loop() {
		release := make(chan struct{})
		gate.Store(release)
		idle := h.probeSlash(b, fmt.Sprintf("idle%d", round))
		before := h.footprint(b)
		awaits, done := op.awaits.Load(), op.done.Load()
		for i := range observingExecutions {
			h.slash(userAlice, chOps, fmt.Sprintf("gadget roll name=obs%d-%04d request-id=obs%d-%04d", round, i, round, i))
		}
		opstest.Eventually(b, 5*time.Minute, "every long execution observing", func() bool {
			return op.awaits.Load()-awaits == observingExecutions
		})
		opstest.Eventually(b, 5*time.Minute, "their transitions told", func() bool { return h.outboxPending() == 0 })
		during := h.footprint(b)
		observing := h.bot.Engine().Observing()
		busy := h.probeSlash(b, fmt.Sprintf("busy%d", round))
		if n := op.awaits.Load() - awaits; n != observingExecutions || op.done.Load() != done {
			b.Fatalf("%d executions observing and %d finished during the measurement, want %d and 0", n, op.done.Load()-done, observingExecutions)
		}
		byReplica := h.executingByReplica(b, observingExecutions, 1)
		close(release)
		opstest.Eventually(b, 5*time.Minute, "every long execution finished", func() bool {
			return op.done.Load()-done == observingExecutions
		})
		fmt.Fprintf(os.Stdout, "\nSlack path, one replica (execution.workers %d, perCluster %d), idle vs %d executions of one cluster in flight %v, "+
			"%d observing without a slot (%d probes each, loopback, real Redis)\n",
			cfg.Workers, cfg.PerCluster, observingExecutions, byReplica, observing, latencyProbes)
		reportSideBySide(b, observingExecutions, idle, busy, before, during)
		round++
	}
}
