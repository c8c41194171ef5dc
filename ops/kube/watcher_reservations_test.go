package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// fakePlans is a ReservationReader over training plans that end on a fake clock; err makes every read fail, as a
// throttling SageMaker does.
type fakePlans struct {
	clock clockwork.Clock
	mu    sync.Mutex
	ends  map[string]time.Time // by instance group; the plan is named tp-<group>
	err   error
}

func (f *fakePlans) Reservations(_ context.Context, _ string) ([]ops.CapacityReservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []ops.CapacityReservation
	for g, end := range f.ends {
		out = append(out, ops.CapacityReservation{Group: g, Plan: "tp-" + g, Status: "Active", EndTime: end,
			ARN: "arn:aws:sagemaker:us-east-1:111122223333:training-plan/tp-" + g, Left: end.Sub(f.clock.Now())})
	}
	return out, nil
}

func (f *fakePlans) set(group string, end time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if group != "" {
		f.ends[group] = end
	}
	f.err = err
}

// heard is a watch sink that keeps, for every replica, the states and reservation warnings it was given to tell.
type heard struct {
	mu     sync.Mutex
	warned []string
	told   []string
}

type heardBy struct {
	*heard
	holder string
}

func (h heardBy) Watched(_ context.Context, _ ops.WatchSubscription, c ops.WatchChange) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.told = append(h.told, fmt.Sprintf("%s %s %s", h.holder, c.Object.Name, c.To))
	return nil
}

func (h heardBy) WarnReservation(_ context.Context, sub ops.WatchSubscription, w ops.ReservationWarning) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warned = append(h.warned, fmt.Sprintf("%s %s %s %s %s left %s on %v", h.holder, sub.ID, w.Object.Name, w.Reservation.Plan,
		w.Reservation.EndTime.UTC().Format("15:04"), w.Reservation.Left, w.Nodes))
	return nil
}

func (h *heard) warnings() []string { h.mu.Lock(); defer h.mu.Unlock(); return slices.Clone(h.warned) }
func (h *heard) states() []string   { h.mu.Lock(); defer h.mu.Unlock(); return slices.Clone(h.told) }

// resvEnv is a cluster with two running jobs watched on real Redis: train-soon on gpu-1 of instance group gpu,
// train-later on cpu-1 of group cpu; their plans end at the ends the test gives.
type resvEnv struct {
	e     *env
	store *state.Store
	clock *clockwork.FakeClock
	plans *fakePlans
	// reader is what the watchers read the plans through (plans unless a test sets another), reads its reads.
	reader ops.ReservationReader
	reads  atomic.Int64
	heard  *heard
	// handed counts the warnings the watchers handed to engine.Watches and it answered (told, or claimed already).
	handed atomic.Int64
}

// countingSink is engine.Watches counting the warnings it answered, so a test knows a check is over.
type countingSink struct {
	*engine.Watches
	n *atomic.Int64
}

func (c countingSink) ReservationEnding(ctx context.Context, w ops.ReservationWarning) error {
	defer c.n.Add(1)
	return c.Watches.ReservationEnding(ctx, w)
}

// countedReader counts the reads of the plans, whether its reader answers them from its cache or not.
type countedReader struct {
	ops.ReservationReader
	n *atomic.Int64
}

func (c countedReader) Reservations(ctx context.Context, cluster string) ([]ops.CapacityReservation, error) {
	defer c.n.Add(1)
	return c.ReservationReader.Reservations(ctx, cluster)
}

func newResvEnv(t *testing.T, opts ...envOption) *resvEnv {
	t.Helper()
	url, prefix := redistest.Shared(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC))
	objs := []runtime.Object{
		gpuNodeObj("gpu-1", "gpu", "ml.p5.48xlarge", 8, "Schedulable"),
		gpuNodeObj("cpu-1", "cpu", "ml.m5.xlarge", 0, "Schedulable"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}},
	}
	for name, node := range map[string]string{"train-soon": "gpu-1", "train-later": "cpu-1"} {
		objs = append(objs, managedJob(name, nil), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: testNS,
			Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelWorkload: name}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "trainer"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	r := &resvEnv{e: newEnv(t, objs, opts...), store: state.New(rdb, state.Options{KeyPrefix: prefix}), clock: clock, heard: &heard{},
		plans: &fakePlans{clock: clock, ends: map[string]time.Time{"gpu": clock.Now().Add(50 * time.Minute), "cpu": clock.Now().Add(10 * time.Hour)}}}
	r.reader = r.plans
	for i, name := range []string{"train-soon", "train-later"} {
		sub := ops.WatchSubscription{ID: fmt.Sprintf("w-%d", i+1), Channel: "C1", Thread: "1.1"}
		if err := r.store.Subscribe(context.Background(), ref(testCluster, ResJob, testNS, name), sub); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// start runs a replica's watcher and its engine.Watches over the shared store, checking the plans every minute.
func (r *resvEnv) start(t *testing.T, holder string) (stop func()) {
	t.Helper()
	watches := engine.NewWatches(engine.WatchOptions{Store: r.store, Sink: heardBy{r.heard, holder}})
	w := NewWatcher(r.e.cs, WatcherOptions{Leases: r.store, Sink: countingSink{watches, &r.handed}, Holder: holder, LeaseTTL: 300 * time.Millisecond,
		Reservations: countedReader{r.reader, &r.reads}, ReservationWarnBefore: time.Hour, ReservationCheck: time.Minute, Clock: r.clock,
		OnError: func(c string, err error) { t.Logf("%s %s: %v", holder, c, err) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop) // before Redis closes, also when the test fails
	return stop
}

// checked waits until the leader has read the plans again since it read them n times.
func (r *resvEnv) checked(t *testing.T, n int64) {
	t.Helper()
	opstest.Eventually(t, 10*time.Second, fmt.Sprintf("plans read more than %d times", n), func() bool { return r.reads.Load() > n })
}

// advance moves the fake clock by d once the leader's check ticker waits, and waits for the check it starts to
// read the plans; with ending, for it to hand train-soon's warning over too (the check is over then).
func (r *resvEnv) advance(t *testing.T, d time.Duration, ending bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no check ticker waits: %v", err)
	}
	n, h := r.reads.Load(), r.handed.Load()
	r.clock.Advance(d)
	r.checked(t, n)
	if ending {
		r.handedOver(t, h)
	}
}

// handedOver waits for a warning handed over since h were.
// warnsNobodyFor2Minutes checks twice, a minute apart, after the first check, and fails the test if anybody was
// warned or a watch handed over meanwhile (while says why nobody may be).
func (r *resvEnv) warnsNobodyFor2Minutes(t *testing.T, while string) {
	t.Helper()
	r.checked(t, 0)
	r.advance(t, time.Minute, false)
	r.advance(t, time.Minute, false)
	if got := r.heard.warnings(); len(got) != 0 || r.handed.Load() != 0 {
		t.Fatalf("warned %q while %s", got, while)
	}
}

// completeTrainLater completes train-later's Job and waits until holder "a" told it: the watch goes on whatever the
// reservations' reader answers.
func (r *resvEnv) completeTrainLater(t *testing.T) {
	t.Helper()
	setJobStatus(t, r.e, "train-later", batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}})
	opstest.Eventually(t, 10*time.Second, "train-later completed told", func() bool {
		return slices.Contains(r.heard.states(), "a train-later completed")
	})
}

func (r *resvEnv) handedOver(t *testing.T, h int64) {
	t.Helper()
	opstest.Eventually(t, 10*time.Second, "a warning handed over", func() bool { return r.handed.Load() > h })
}

func (r *resvEnv) leader(t *testing.T, holder string) {
	t.Helper()
	opstest.Eventually(t, 10*time.Second, holder+" leads", func() bool {
		h, ok, _ := r.store.LeaseHolder(context.Background(), LeaseName(testCluster))
		return ok && h == holder
	})
}

// A watched job on a group whose plan ends within the lead time is warned once across two replicas, checks every
// minute and a lease hand-over (which re-lists); the job on a plan that ends later is not; the plan extended is
// warned about again, once, when its new end comes within the lead time.
func TestWatcherWarnsOnceBeforeTheReservationEnds(t *testing.T) {
	r := newResvEnv(t)
	stopA := r.start(t, "a")
	first := []string{"a w-1 train-soon tp-gpu 15:50 left 50m0s on [gpu-1]"}
	r.handedOver(t, 0)
	stopB := r.start(t, "b")
	defer stopB()
	r.leader(t, "a")
	r.advance(t, time.Minute, true)
	r.advance(t, time.Minute, true)
	if got := r.heard.warnings(); !slices.Equal(got, first) {
		t.Fatalf("after three checks warned %q, want %q", got, first)
	}
	h := r.handed.Load()
	stopA()
	r.leader(t, "b")
	r.handedOver(t, h) // b re-lists and checks as it takes the lease
	r.advance(t, time.Minute, true)
	if got := r.heard.warnings(); !slices.Equal(got, first) {
		t.Fatalf("after the hand-over warned %q, want %q", got, first)
	}

	// 15:03 now: the plan is extended to 18:03; warned again at 17:03, when an hour is left, and only then.
	r.plans.set("gpu", r.clock.Now().Add(3*time.Hour), nil)
	r.advance(t, time.Minute, false)
	r.advance(t, 2*time.Hour-2*time.Minute, false)
	if got := r.heard.warnings(); len(got) != 1 || r.handed.Load() != h+2 {
		t.Fatalf("an extended plan more than 1 h away warned %q (%d handed over)", got, r.handed.Load())
	}
	r.advance(t, time.Minute, true)
	r.advance(t, time.Minute, true)
	want := append(first, "b w-1 train-soon tp-gpu 18:03 left 1h0m0s on [gpu-1]")
	if got := r.heard.warnings(); !slices.Equal(got, want) {
		t.Fatalf("after the extension warned %q, want %q", got, want)
	}
}

// A reservation read that fails warns nobody and stops nothing: the watch still tells the jobs' states, and the
// next check after the read works again warns.
func TestWatcherWarnsNothingWhenTheReservationsCannotBeRead(t *testing.T) {
	r := newResvEnv(t)
	r.plans.set("", time.Time{}, errors.New("ThrottlingException: Rate exceeded"))
	stop := r.start(t, "a")
	defer stop()
	r.warnsNobodyFor2Minutes(t, "the plans could not be read")
	r.completeTrainLater(t)
	r.plans.set("", time.Time{}, nil)
	r.advance(t, time.Minute, true)
	if got, want := r.heard.warnings(), []string{"a w-1 train-soon tp-gpu 15:50 left 47m0s on [gpu-1]"}; !slices.Equal(got, want) {
		t.Fatalf("once readable warned %q, want %q", got, want)
	}
}

// engine.Watches is the reservation sink the bot wires in.
var _ ReservationSink = (*engine.Watches)(nil)

// Through ops/aws's reader over the real SDK and the fake AWS: while DescribeTrainingPlan is throttled the plan's end
// is unknown and nobody is warned, the watch going on; once it answers, the job on the plan's group is warned once,
// and the job on a group without a plan is not.
func TestWatcherWarnsThroughTheFakeTrainingPlan(t *testing.T) {
	srv := fakeaws.New(fakeaws.Options{TransitionDelay: -1})
	t.Cleanup(srv.Close)
	now := time.Now()
	end := now.Add(40 * time.Minute)
	arn, err := srv.AddTrainingPlan(fakeaws.TrainingPlan{Name: "tp-gpu", InstanceType: "ml.p5.48xlarge", Count: 1,
		Start: now.Add(-time.Hour), End: end})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.AddHyperPodCluster(fakeaws.HyperPodCluster{Name: "ml-hp", InstanceGroups: []fakeaws.InstanceGroup{{Name: "gpu",
		Type: "ml.p5.48xlarge", Count: 1, LifecycleS3URI: "s3://lifecycle/scripts/", ExecutionRole: "arn:aws:iam::123456789012:role/hp",
		TrainingPlanARN: arn}}}); err != nil {
		t.Fatal(err)
	}
	var cfg *config.Config
	r := newResvEnv(t, func(c *config.Config, _ *env) {
		c.Clusters[0].HyperPod.ClusterName = "ml-hp"
		c.AWS.Endpoints.SageMaker = srv.URL()
		cfg = c
	})
	clients := fakeAWSClients(cfg)
	clients.Clock = r.clock
	r.clock.Advance(now.Sub(r.clock.Now())) // the reader's clock at the fake AWS's time
	r.reader = clients

	srv.Fail(fakeaws.OpSageMakerDescribeTrainingPlan, -1, "ThrottlingException", 400, "Rate exceeded")
	stop := r.start(t, "a")
	defer stop()
	r.warnsNobodyFor2Minutes(t, "DescribeTrainingPlan was throttled")
	if srv.Calls(fakeaws.OpSageMakerDescribeTrainingPlan) == 0 {
		t.Fatal("DescribeTrainingPlan was never asked")
	}
	r.completeTrainLater(t)

	srv.ClearFaults()
	r.advance(t, time.Minute, true) // past the seconds a failed read is remembered, and the minute of the cache
	r.advance(t, time.Minute, true)
	got := r.heard.warnings()
	if len(got) != 1 || !strings.HasPrefix(got[0], "a w-1 train-soon tp-gpu "+end.UTC().Format("15:04")+" left 3") {
		t.Fatalf("once DescribeTrainingPlan answered warned %q, want train-soon once about tp-gpu ending at %s", got, end.UTC().Format("15:04"))
	}
}

// A node list the API server throttles is a failed check like a failed plan read: nobody is warned, and the next
// check after the API server answers warns.
func TestWatcherWarnsNothingWhenTheNodesCannotBeListed(t *testing.T) {
	r := newResvEnv(t)
	var throttled atomic.Bool
	throttled.Store(true)
	r.e.kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if throttled.Load() {
			return true, nil, apierrors.NewTooManyRequests("slow down", 1)
		}
		return false, nil, nil
	})
	stop := r.start(t, "a")
	defer stop()
	r.checked(t, 0)
	r.advance(t, time.Minute, false)
	r.advance(t, time.Minute, false)
	if got := r.heard.warnings(); len(got) != 0 || r.handed.Load() != 0 {
		t.Fatalf("warned %q while the nodes could not be listed", got)
	}
	throttled.Store(false)
	r.advance(t, time.Minute, true)
	if got := r.heard.warnings(); len(got) != 1 || !strings.Contains(got[0], "train-soon tp-gpu 15:50") {
		t.Fatalf("once the nodes were listed warned %q, want train-soon once", got)
	}
}
