package bot

import (
	"bufio"
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/kube"
)

const (
	// watchedJobs is how many managed Jobs one replica watches (docs/architecture.md, performance targets).
	watchedJobs = 5000
	// flipSample is how many of them change state per benchmark iteration.
	flipSample = 200
	// flipBatch Jobs change at once, then the next batch a few milliseconds later: status changes arrive spread
	// out on a real API server, and the fake clientset's watch channel (100 events) panics when it overflows.
	flipBatch = 20
	flipPause = 10 * time.Millisecond
)

// watchStep is one status change the benchmark makes: the Job status and the state the thread should be told.
type watchStep struct {
	status batchv1.JobStatus
	state  string
}

// watchSteps are the transitions every Job goes through, in order: pending (as created) → running → completed.
var watchSteps = []watchStep{{jobActive, kube.StateRunning}, {jobComplete, kube.StateCompleted}}

// watchBench is the benchmark's world: 5,000 watched Jobs, the thread of each, and what each was told.
type watchBench struct {
	h       *harness
	fc      *fakeCluster
	threads map[string]string // job name → the ts of its watch message (the thread)
	names   []string
	flipped map[string]int // job name → how many steps it went through
	lat     []time.Duration
}

// BenchmarkWatch5000Jobs runs one bot replica whose watcher informs on 5,000 managed Jobs of a fake clientset, each
// subscribed from a watch message in fake Slack (the /hp watch path: watch message, then engine.Watches.Watch). Each
// iteration changes the status of 200 Jobs and measures, per Job, the time from the status update to its thread
// reply (p50/p99/max), then checks every thread for lost or repeated transitions. It also reports the informers
// opened per kind, the time to subscribe and to sync, and heap and RSS after sync (docs/architecture.md: one informer per kind,
// ≤ 150 MB RSS, thread update within 2 s less Slack's rate limits, no lost or repeated transitions).
//
// Slack's rate limits are off in fake Slack and the bot's own limits are raised, because the target excludes them
// (one chat.update per message and one reply per thread at Slack's tier 3 would take minutes for 200 Jobs). The RSS
// is the whole test process: besides the bot it holds fake Slack's messages, the fake API server's 5,000 Jobs and the
// test's own bookkeeping, so it bounds the bot's from above; the growth from before the bot started is reported too.
// Run it alone (-bench BenchmarkWatch5000Jobs) for the cleanest VmRSS: earlier benchmarks leave memory resident.
// Each Job has two transitions to give, so at most 50 iterations run (-benchtime=50x).
func BenchmarkWatch5000Jobs(b *testing.B) {
	wb := &watchBench{threads: map[string]string{}, flipped: map[string]int{}}
	objs := make([]kruntime.Object, 0, watchedJobs)
	for i := range watchedJobs {
		name := fmt.Sprintf("train-%04d", i)
		wb.names = append(wb.names, name)
		objs = append(objs, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: watchNS,
			Labels: managedLabels(name, "req-"+name)}})
	}
	wb.fc = newFakeCluster(objs...)
	objs = nil
	heapBefore, _ := memory(b)
	liveBefore := scavengedRSS(b) // earlier benchmarks in this process leave freed memory resident
	fast := Tier{PerMinute: 6_000_000, Burst: 10_000}
	started := time.Now()
	wb.h = startWith(b, harnessOptions{clusters: wb.fc.clusters(b),
		slack:  &fakeslack.Options{RateLimits: &fakeslack.RateLimits{Disabled: true}},
		limits: &Limits{Tier2: fast, Tier3: fast, Tier4: fast, PostPerChannel: fast},
		edit: func(c *config.Config) {
			c.Slack.Workers, c.Slack.QueueSize = config.DefaultWorkers, config.DefaultQueueSize
		},
	})
	subscribe, firstTenth, lastTenth := wb.subscribeAll()
	wb.barrier("sync-barrier", jobActive, "*running*")
	synced := time.Since(started)
	heap, rss := memory(b)
	live := scavengedRSS(b)
	informers := wb.fc.watchesByResource()

	iter := 0
	for b.Loop() {
		step, chunk := iter/(watchedJobs/flipSample), iter%(watchedJobs/flipSample)
		if step >= len(watchSteps) {
			b.Fatalf("every Job went through every transition after %d iterations: run with -benchtime=%dx or less",
				iter, len(watchSteps)*watchedJobs/flipSample)
		}
		wb.flip(wb.names[chunk*flipSample:(chunk+1)*flipSample], watchSteps[step])
		iter++
	}
	b.StopTimer()
	// A last Job changed after every other is a barrier: once it is told, a late or repeated transition of the
	// others would have been told too.
	wb.barrier("end-barrier", jobComplete, "is *completed*")
	wb.checkTold()

	p50, p99, worst := percentile(wb.lat, 50), percentile(wb.lat, 99), percentile(wb.lat, 100)
	b.ReportMetric(float64(p50.Milliseconds()), "update-p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "update-p99-ms")
	b.ReportMetric(float64(worst.Milliseconds()), "update-max-ms")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
	b.ReportMetric(float64(live)/(1<<20), "rss-scavenged-MB")
	b.ReportMetric(float64(live-min(live, liveBefore))/(1<<20), "rss-scavenged-growth-MB")
	b.ReportMetric(float64(heap)/(1<<20), "heap-inuse-MB")
	b.ReportMetric(float64(informers["jobs"]), "job-informers")
	b.ReportMetric(synced.Seconds(), "sync-s")
	fmt.Fprintf(os.Stdout, "\n%d watched Jobs on one replica, %d status changes in %d iterations of %d (fake clientset, real Redis, fake Slack without rate limits)\n",
		watchedJobs, len(wb.lat), iter, flipSample)
	fmt.Fprintf(os.Stdout, "status change → thread reply: p50 %s p99 %s max %s (target ≤ 2s)\n", p50, p99, worst)
	fmt.Fprintf(os.Stdout, "subscribe %d Jobs %s (first tenth %s, last tenth %s) · bot start → subscribed, synced and initial states handled %s\n",
		watchedJobs, subscribe, firstTenth, lastTenth, synced)
	fmt.Fprintf(os.Stdout, "after sync: heap in use %.1f MB (%.1f MB before the bot), VmRSS %.1f MB, %.1f MB once freed memory is returned (%.1f MB before the bot) (target ≤ 150 MB)\n",
		float64(heap)/(1<<20), float64(heapBefore)/(1<<20), float64(rss)/(1<<20), float64(live)/(1<<20), float64(liveBefore)/(1<<20))
	fmt.Fprintf(os.Stdout, "watches opened per resource: %v (target: one per kind)\n", informers)
}

// subscribeAll posts a watch message per Job and subscribes it, as /hp watch does, eight at a time. It returns the
// whole time and that of the first and the last tenth of the subscriptions (a cost growing with the count shows).
func (wb *watchBench) subscribeAll() (all, firstTenth, lastTenth time.Duration) {
	h := wb.h
	start := time.Now()
	var done atomic.Int64
	var tenth, ninth time.Time
	names := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, config.DefaultWorkers)
	for range config.DefaultWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				ts, err := wb.watch(name)
				if err != nil {
					errs <- err
					for range names { // drain so the sender finishes
					}
					return
				}
				mu.Lock()
				wb.threads[name] = ts
				switch done.Add(1) {
				case watchedJobs / 10:
					tenth = time.Now()
				case watchedJobs - watchedJobs/10:
					ninth = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	for _, n := range wb.names {
		names <- n
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatalf("subscribing: %v", err)
	}
	end := time.Now()
	return end.Sub(start), tenth.Sub(start), end.Sub(ninth)
}

// watch subscribes chOps to a Job the way /hp watch does and returns the watch message's ts.
func (wb *watchBench) watch(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obj := ops.ObjectRef{Cluster: clusterTst, Namespace: watchNS, APIVersion: kube.ResJob.APIVersion(), Kind: kube.ResJob.Kind, Name: name}
	who := ops.Initiator{Kind: ops.Human, ID: userAlice, Name: "alice"}
	ts, err := wb.h.bot.slack.Post(ctx, chOps, handlers.WatchMessage(obj, "", who))
	if err != nil {
		return "", fmt.Errorf("post the watch message of %s: %w", name, err)
	}
	sub := ops.WatchSubscription{ID: handlers.WatchID(chOps), Channel: chOps, Message: ts, Thread: ts}
	if err := wb.h.bot.watches.Watch(ctx, obj, sub); err != nil {
		return "", fmt.Errorf("watch %s: %w", name, err)
	}
	return ts, nil
}

// barrier subscribes a Job that does not exist yet, then creates it with status st once the informers watch: its
// event is queued behind everything before it, so when its thread hears want, the watcher has handled all of that.
func (wb *watchBench) barrier(name string, st batchv1.JobStatus, want string) {
	h := wb.h
	h.t.Helper()
	h.waitUntil("the Job informer watching", func() bool { return wb.fc.watchesByResource()["jobs"] > 0 })
	ts, ok := wb.threads[name]
	if !ok {
		var err error
		if ts, err = wb.watch(name); err != nil {
			h.t.Fatal(err)
		}
		wb.threads[name] = ts
		if err := wb.fc.createJob(context.Background(), name, "", st); err != nil {
			h.t.Fatal(err)
		}
	}
	pollSlack(h.t, h.srv, name+" told", 5*time.Minute, func(s fakeslack.Snapshot) bool { return repliesWith(s, chOps, ts, want) > 0 })
}

// flip changes the status of jobs to step's in small batches and waits until each thread was told, recording the
// time from each status update to the reply's arrival in fake Slack.
func (wb *watchBench) flip(jobs []string, step watchStep) {
	h := wb.h
	ctx := context.Background()
	changed := make(map[string]time.Time, len(jobs))
	for i, name := range jobs {
		if i > 0 && i%flipBatch == 0 {
			time.Sleep(flipPause) // pacing the producer, not waiting for a condition: see flipPause
		}
		j, err := wb.fc.kube.BatchV1().Jobs(watchNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		j.Status = step.status
		changed[name] = time.Now()
		if _, err := wb.fc.kube.BatchV1().Jobs(watchNS).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		wb.flipped[name]++
	}
	want := "is *" + step.state + "*"
	s := pollSlack(h.t, h.srv, fmt.Sprintf("%d threads told %s", len(jobs), step.state), 5*time.Minute, func(s fakeslack.Snapshot) bool {
		for _, name := range jobs {
			if repliesWith(s, chOps, wb.threads[name], want) == 0 {
				return false
			}
		}
		return true
	})
	for _, name := range jobs {
		for _, m := range s.Thread(chOps, wb.threads[name]) {
			if m.TS != wb.threads[name] && strings.Contains(m.Text+string(m.Blocks), want) {
				wb.lat = append(wb.lat, m.PostedAt.Sub(changed[name]))
				break
			}
		}
	}
}

// checkTold fails when a thread lost a transition, heard one twice, or heard one that did not happen.
func (wb *watchBench) checkTold() {
	h := wb.h
	s := h.srv.Snapshot()
	var problems []string
	for _, name := range wb.names {
		ts := wb.threads[name]
		for i, step := range watchSteps {
			want := 0
			if wb.flipped[name] > i {
				want = 1
			}
			if got := repliesWith(s, chOps, ts, "is *"+step.state+"*"); got != want {
				problems = append(problems, fmt.Sprintf("%s told %s %d times, want %d", name, step.state, got, want))
			}
		}
		if got := repliesWith(s, chOps, ts, "is *pending*"); got != 0 {
			problems = append(problems, fmt.Sprintf("%s told pending %d times, want 0 (no reason to tell)", name, got))
		}
	}
	if len(problems) > 0 {
		h.t.Fatalf("%d lost or repeated transitions, e.g. %s", len(problems), strings.Join(problems[:min(5, len(problems))], "; "))
	}
}

// watchesByResource counts the watches the informers opened, by resource: one per kind means one informer each.
func (f *fakeCluster) watchesByResource() map[string]int {
	out := map[string]int{}
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "watch" {
			out[a.GetResource().Resource]++
		}
	}
	return out
}

// memory returns the heap in use after a collection and the process's resident set (VmRSS) as it stands.
func memory(tb testing.TB) (heap, rss uint64) {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse, vmRSS(tb)
}

// scavengedRSS is VmRSS once the runtime returned the freed heap to the OS: what the live data keeps resident.
func scavengedRSS(tb testing.TB) uint64 {
	debug.FreeOSMemory()
	return vmRSS(tb)
}

// vmRSS reads the process's resident set from /proc/self/status, failing the benchmark when it is not there: a
// footprint without it would compare zeros.
func vmRSS(tb testing.TB) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("read VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}
