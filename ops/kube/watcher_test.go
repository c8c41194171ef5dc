package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// The Redis store is the lease store the bot wires in.
var _ LeaseStore = (*state.Store)(nil)

// recorder is a sink that keeps what it was given; with a store it tells only what ops/state lets it claim.
type recorder struct {
	holder string
	store  *state.Store
	mu     *sync.Mutex
	got    *[]string
	last   *ops.WatchChange
}

func newRecorder(holder string, store *state.Store, mu *sync.Mutex, got *[]string) *recorder {
	return &recorder{holder: holder, store: store, mu: mu, got: got, last: &ops.WatchChange{}}
}

func (r *recorder) Transition(ctx context.Context, t ops.WatchChange) {
	if r.store != nil {
		last, err := r.store.LastTold(ctx, t.Object)
		if err != nil {
			return
		}
		if ok, err := r.store.Tell(ctx, t.Object, last, t.To); err != nil || !ok {
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.got = append(*r.got, fmt.Sprintf("%s %s/%s %s→%s", r.holder, t.Object.Kind, t.Object.Name, t.From, t.To))
	*r.last = t
}

// watchUntilTold runs one watcher, "a", on e until it has told a change, and returns the latest one told; the test
// fails when none is told within 10 s (what names the change awaited).
func watchUntilTold(t *testing.T, e *env, what string) ops.WatchChange {
	t.Helper()
	var mu sync.Mutex
	var got []string
	rec := newRecorder("a", nil, &mu, &got)
	stop := startWatcher(t, e, &memLeases{}, rec, "a")
	defer stop()
	opstest.Eventually(t, 10*time.Second, what, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 })
	mu.Lock()
	defer mu.Unlock()
	return *rec.last
}

// memLeases is an in-process LeaseStore with the semantics of ops/state's: TTL expiry and holder checks.
type memLeases struct {
	mu     sync.Mutex
	holder map[string]string
	until  map[string]time.Time
}

func (m *memLeases) AcquireLease(_ context.Context, name, holder string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder == nil {
		m.holder, m.until = map[string]string{}, map[string]time.Time{}
	}
	if h := m.holder[name]; h != "" && h != holder && time.Now().Before(m.until[name]) {
		return false, nil
	}
	m.holder[name], m.until[name] = holder, time.Now().Add(ttl)
	return true, nil
}

func (m *memLeases) RenewLease(_ context.Context, name, holder string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder[name] != holder || time.Now().After(m.until[name]) {
		return ops.ErrLockLost
	}
	m.until[name] = time.Now().Add(ttl)
	return nil
}

func (m *memLeases) ReleaseLease(_ context.Context, name, holder string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder[name] == holder {
		delete(m.holder, name)
	}
	return nil
}

func setJobStatus(t *testing.T, e *env, name string, st batchv1.JobStatus) {
	t.Helper()
	j, err := e.kube.BatchV1().Jobs(testNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status = st
	if _, err := e.kube.BatchV1().Jobs(testNS).UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func startWatcher(t *testing.T, e *env, leases LeaseStore, sink TransitionSink, holder string) (stop func()) {
	w := NewWatcher(e.cs, WatcherOptions{Leases: leases, Sink: sink, Holder: holder, LeaseTTL: 300 * time.Millisecond,
		OnError: func(c string, err error) { t.Logf("%s %s: %v", holder, c, err) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestWatcherTellsWhyAJobWaits(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-c-0", Namespace: testNS,
		Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelWorkload: "train-c"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}}}}
	job := managedJob("train-c", nil)
	job.Status = batchv1.JobStatus{}
	last := watchUntilTold(t, newEnv(t, []runtime.Object{pod, job}), "pending")
	if last.To != StatePending || last.Reason != "train-c-0: Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu." {
		t.Fatalf("transition = %+v", last)
	}
}

// A failed Job is told with what a person needs to say why in words: how many of its pods failed and how the last
// one's container ended, next to the Job's own reason.
func TestWatcherTellsWhyAJobFailed(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-f-0", Namespace: testNS,
		Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelWorkload: "train-f"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}}
	job := managedJob("train-f", nil, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"})
	job.Status.Active, job.Status.Failed = 0, 3
	l := watchUntilTold(t, newEnv(t, []runtime.Object{pod, job}), "failed")
	want := ops.WatchChange{To: StateFailed, Reason: "BackoffLimitExceeded: Job has reached the specified backoff limit",
		PodsFailed: 3, Exit: "OOMKilled (exit code 137)"}
	if l.To != want.To || l.Reason != want.Reason || l.PodsFailed != want.PodsFailed || l.Exit != want.Exit {
		t.Fatalf("transition = %+v, want %+v", l, want)
	}
}

func TestWatcherTellsTransitions(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-a-0", Namespace: testNS,
		Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelWorkload: "train-a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	job := managedJob("train-a", nil)
	job.Status = batchv1.JobStatus{}
	e := newEnv(t, []runtime.Object{job, pod})
	e.logs.set("train-a-0", "loss 0.1\ndone")
	var mu sync.Mutex
	var got []string
	rec := newRecorder("a", nil, &mu, &got)
	stop := startWatcher(t, e, &memLeases{}, rec, "a")
	defer stop()
	saw := func(s string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(got, s) }
	}
	opstest.Eventually(t, 10*time.Second, "pending", saw("a Job/train-a →pending"))
	setJobStatus(t, e, "train-a", batchv1.JobStatus{Active: 1})
	opstest.Eventually(t, 10*time.Second, "running", saw("a Job/train-a pending→running"))
	setJobStatus(t, e, "train-a", batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}})
	opstest.Eventually(t, 10*time.Second, "completed", saw("a Job/train-a running→completed"))
	mu.Lock()
	if rec.last.LogTail != "loss 0.1\ndone" || rec.last.RequestID != "req-0" {
		t.Errorf("completed transition = %+v", *rec.last)
	}
	mu.Unlock()
	if err := e.kube.BatchV1().Jobs(testNS).Delete(context.Background(), "train-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	opstest.Eventually(t, 10*time.Second, "deleted", saw("a Job/train-a completed→deleted"))
}

// TestWatcherHandOver runs two replicas against one Redis: only the lease holder informs, and after the holder
// stops, the other re-lists and re-emits everything without telling anything twice or losing a change.
func TestWatcherHandOver(t *testing.T) {
	url, prefix := redistest.Shared(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	store := state.New(rdb, state.Options{KeyPrefix: prefix})
	job := managedJob("train-b", nil)
	job.Status = batchv1.JobStatus{Active: 1}
	e := newEnv(t, []runtime.Object{job})
	var mu sync.Mutex
	var got []string
	stopA := startWatcher(t, e, store, newRecorder("a", store, &mu, &got), "a")
	count := func(sub string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, g := range got {
			if strings.Contains(g, sub) {
				n++
			}
		}
		return n
	}
	opstest.Eventually(t, 10*time.Second, "a tells running", func() bool { return count("a Job/train-b →running") == 1 })
	stopB := startWatcher(t, e, store, newRecorder("b", store, &mu, &got), "b")
	defer stopB()
	if h, ok, _ := store.LeaseHolder(context.Background(), LeaseName(testCluster)); !ok || h != "a" {
		t.Fatalf("lease holder = %q %v", h, ok)
	}
	stopA()
	opstest.Eventually(t, 10*time.Second, "b takes the lease", func() bool {
		h, ok, _ := store.LeaseHolder(context.Background(), LeaseName(testCluster))
		return ok && h == "b"
	})
	setJobStatus(t, e, "train-b", batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}})
	opstest.Eventually(t, 10*time.Second, "b tells failed", func() bool { return count("Job/train-b") >= 2 && count("failed") == 1 })
	mu.Lock()
	defer mu.Unlock()
	// b's From is "running" or "" depending on whether its first list came before the change; what was told is
	// running once (by a) and failed once (by b).
	if len(got) != 2 || got[0] != "a Job/train-b →running" || !strings.HasPrefix(got[1], "b Job/train-b ") || !strings.HasSuffix(got[1], "→failed") {
		t.Fatalf("told %q", got)
	}
}
