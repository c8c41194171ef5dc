package bot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/kube"
)

const watchNS = "ml"

// fakeCluster is one cluster of fake clientsets that every bot replica of a test shares, as replicas share the
// real API server.
type fakeCluster struct {
	kube *fake.Clientset
	dyn  *dynfake.FakeDynamicClient
	logs *stubLogs
}

// stubLogs answers log reads where the fake clientset only ever says "fake logs".
type stubLogs struct {
	mu   sync.Mutex
	text map[string]string
}

func (s *stubLogs) TailLogs(_ context.Context, _, pod, _ string, _ int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text[pod], nil
}

func newFakeCluster(objs ...kruntime.Object) *fakeCluster {
	lists := map[schema.GroupVersionResource]string{kube.ResPyTorchJob.GVR: "PyTorchJobList", kube.ResHyperPod.GVR: "HyperPodPyTorchJobList"}
	return &fakeCluster{kube: fake.NewClientset(objs...), dyn: dynfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(), lists),
		logs: &stubLogs{text: map[string]string{}}}
}

func (f *fakeCluster) clusters(t testing.TB) func(*config.Config) *kube.Clusters {
	return func(cfg *config.Config) *kube.Clusters {
		cs, err := kube.NewClustersFromClients(cfg, map[string]kube.Clients{clusterTst: {Kube: f.kube, Dynamic: f.dyn, Logs: f.logs}})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
}

func managedLabels(workload, requestID string) map[string]string {
	return map[string]string{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelWorkload: workload, kube.LabelRequestID: requestID}
}

func (f *fakeCluster) createJob(ctx context.Context, name, requestID string, st batchv1.JobStatus) error {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: watchNS, Labels: managedLabels(name, requestID)}, Status: st}
	_, err := f.kube.BatchV1().Jobs(watchNS).Create(ctx, j, metav1.CreateOptions{})
	return err
}

func (f *fakeCluster) setJobStatus(t *testing.T, name string, st batchv1.JobStatus) {
	t.Helper()
	ctx := context.Background()
	j, err := f.kube.BatchV1().Jobs(watchNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status = st
	if _, err := f.kube.BatchV1().Jobs(watchNS).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jobWatches counts the watches of Jobs the informers of every replica opened so far.
func (f *fakeCluster) jobWatches() int {
	n := 0
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "watch" && a.GetResource().Resource == "jobs" {
			n++
		}
	}
	return n
}

func runningPod(name, workload string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: watchNS, Labels: managedLabels(workload, "")},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

var (
	jobActive   = batchv1.JobStatus{Active: 1}
	jobComplete = batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
)

// repliesWith counts the thread replies under ts that contain substr.
func repliesWith(s fakeslack.Snapshot, ch, ts, substr string) int {
	n := 0
	for _, m := range s.Thread(ch, ts) {
		if m.TS != ts && strings.Contains(m.Text+string(m.Blocks), substr) {
			n++
		}
	}
	return n
}

// leaseHolder reads who holds the test cluster's watcher lease, through a replica's store.
func leaseHolder(t testing.TB, b *Bot) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	holder, _, err := b.store.LeaseHolder(ctx, kube.LeaseName(clusterTst))
	if err != nil {
		t.Fatal(err)
	}
	return holder
}

// A training request's Job is watched in the request's thread: running, then completed with its log tail, each told
// once while two replicas share Redis, the watcher's lease is handed over, and every process is restarted.
func TestWatchRequestWorkloadOnceAcrossReplicas(t *testing.T) {
	fc := newFakeCluster(runningPod("train-a-0", "train-a"))
	fc.logs.text["train-a-0"] = "epoch 3 loss 0.012\ntraining done"
	opts := harnessOptions{replica: "a", clusters: fc.clusters(t), prepare: func(h *harness) {
		h.ops["submit-training-job"].watch = func(ctx context.Context, req *ops.Request) ([]ops.ObjectRef, error) {
			name := req.Params.String("name")
			if err := fc.createJob(ctx, name, req.ID, batchv1.JobStatus{}); err != nil {
				return nil, fmt.Errorf("create job: %w", err)
			}
			return []ops.ObjectRef{{Cluster: req.Target.Cluster, Namespace: req.Target.Namespace, APIVersion: "batch/v1", Kind: "Job", Name: name}}, nil
		}
	}}
	h := startWith(t, opts)
	b := h.launchSecond(opts)

	h.slash(userAlice, chOps, "train submit name=train-a image=registry.example.com/trainer:v1")
	s := h.waitFor("the request succeeded with its Job pending", func(s fakeslack.Snapshot) bool {
		m := topLevel(s, chOps)
		return len(m) == 1 && strings.Contains(m[0].Text, "succeeded") && strings.Contains(m[0].Text, "train-a: pending")
	})
	plan := topLevel(s, chOps)[0]
	told := func(substr string, n int) func(fakeslack.Snapshot) bool {
		return func(s fakeslack.Snapshot) bool { return repliesWith(s, chOps, plan.TS, substr) == n }
	}
	fc.setJobStatus(t, "train-a", jobActive)
	h.waitFor("running told", told("is *running*", 1))

	// Hand-over: the replica holding the lease stops; the other takes it, re-lists and tells only what is new.
	holder, other := h.replicaByName(b)
	watches := fc.jobWatches()
	holder.stop(t)
	h.waitUntil("the other replica watches Jobs", func() bool { return fc.jobWatches() > watches })
	fc.setJobStatus(t, "train-a", jobComplete)
	s = h.waitFor("completed told with the log tail", told("is *completed*", 1))
	if n := repliesWith(s, chOps, plan.TS, "training done"); n != 1 {
		t.Errorf("%d replies carry the log tail, want 1", n)
	}

	// Restart: every process is new and the fresh watcher re-emits everything. A Job watched from another channel
	// and created after the restart is a barrier: once its state is told, train-a's re-emitted state was handled.
	h.slash(userBob, chOps, "watch job=train-z")
	s = h.waitFor("the watch message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chOps)) == 2 })
	barrier := topLevel(s, chOps)[1]
	other.stop(t)
	opts.replica = "c"
	c := h.launch(opts)
	t.Cleanup(func() { c.stop(t) })
	if err := fc.createJob(context.Background(), "train-z", "", jobActive); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the barrier Job told", func(s fakeslack.Snapshot) bool { return repliesWith(s, chOps, barrier.TS, "*running*") == 1 })
	if err := fc.kube.BatchV1().Jobs(watchNS).Delete(context.Background(), "train-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = h.waitFor("deleted told", told("is *deleted*", 1))
	for _, state := range []string{"running", "completed", "deleted"} {
		if n := repliesWith(s, chOps, plan.TS, "is *"+state+"*"); n != 1 {
			t.Errorf("%s told %d times, want once", state, n)
		}
	}
	if n := repliesWith(s, chOps, plan.TS, "is *pending*"); n != 0 {
		t.Errorf("pending without a reason told %d times, want only the message updated", n)
	}
	if m, _ := s.Message(chOps, plan.TS); !strings.Contains(m.Text, "train-a: deleted") || !strings.Contains(m.Text, "succeeded") {
		t.Errorf("the request's message was not kept up to date: %q", m.Text)
	}
	if runs := h.ops["submit-training-job"].runs.Load(); runs != 1 {
		t.Errorf("executed %d times, want 1", runs)
	}
	// Telling "deleted" ends train-a's subscriptions; train-z stays watched.
	h.waitUntil("watched_objects = 1 (train-z)", func() bool { return testutil.ToFloat64(c.bot.Metrics().WatchedObjects) == 1 })
	objs, err := c.bot.store.WatchedObjects(h.ctx(), clusterTst)
	if err != nil || len(objs) != 1 || objs[0].Name != "train-z" {
		t.Errorf("watched objects = %+v, %v; want train-z alone", objs, err)
	}
}

// A training Job that fails after its pods ran out of memory three times is told to the requester once, across two
// replicas, by a thread reply that mentions them first and says why in words.
func TestFailedTrainingJobToldToTheRequester(t *testing.T) {
	pod := runningPod("train-f-0", "train-f")
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}
	fc := newFakeCluster(pod)
	fc.logs.text["train-f-0"] = "epoch 1\ntorch.cuda.OutOfMemoryError: CUDA out of memory"
	opts := harnessOptions{replica: "a", clusters: fc.clusters(t), prepare: func(h *harness) {
		h.ops["submit-training-job"].watch = func(ctx context.Context, req *ops.Request) ([]ops.ObjectRef, error) {
			name := req.Params.String("name")
			if err := fc.createJob(ctx, name, req.ID, jobActive); err != nil {
				return nil, fmt.Errorf("create job: %w", err)
			}
			return []ops.ObjectRef{{Cluster: req.Target.Cluster, Namespace: req.Target.Namespace, APIVersion: "batch/v1", Kind: "Job", Name: name}}, nil
		}
	}}
	h := startWith(t, opts)
	h.launchSecond(opts)

	h.slash(userAlice, chOps, "train submit name=train-f image=registry.example.com/trainer:v1")
	s := h.waitFor("the request succeeded", func(s fakeslack.Snapshot) bool {
		m := topLevel(s, chOps)
		return len(m) == 1 && strings.Contains(m[0].Text, "succeeded")
	})
	plan := topLevel(s, chOps)[0]
	h.waitFor("running told", func(s fakeslack.Snapshot) bool { return repliesWith(s, chOps, plan.TS, "is *running*") == 1 })
	fc.setJobStatus(t, "train-f", batchv1.JobStatus{Failed: 3, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed,
		Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}})
	words := "the job's pods failed 3 times (backoff limit reached); the last one: a container ran out of memory"
	s = h.waitFor("the failure told in words", func(s fakeslack.Snapshot) bool { return repliesWith(s, chOps, plan.TS, words) == 1 })
	var failed []fakeslack.Message
	for _, m := range s.Thread(chOps, plan.TS) {
		if m.TS != plan.TS && strings.Contains(m.Text, "failed") {
			failed = append(failed, m)
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0].Text, "<@"+userAlice+"> ") || len(failed[0].Revisions) != 0 {
		t.Fatalf("failure replies %+v, want one new message that starts with the requester's mention", failed)
	}
	if !strings.Contains(string(failed[0].Blocks), "torch.cuda.OutOfMemoryError") {
		t.Errorf("the failure reply lacks the error line of the log: %s", failed[0].Blocks)
	}
}

// replicaByName returns the replica that holds the watcher lease and the other one (h's first bot or b).
func (h *harness) replicaByName(b *replica) (holder, other *replica) {
	h.t.Helper()
	first := &replica{bot: h.bot, cancel: h.cancel, done: h.done}
	h.cancel = nil // the test stops it now
	h.t.Cleanup(func() { first.stop(h.t) })
	var name string
	h.waitUntil("a replica holds the watcher lease", func() bool { name = leaseHolder(h.t, b.bot); return name != "" })
	if name == b.bot.Engine().Replica() {
		return b, first
	}
	return first, b
}

// waitUntil polls cond until it holds or the harness's deadline passes.
func (h *harness) waitUntil(what string, cond func() bool) {
	h.t.Helper()
	ctx := h.ctx()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			h.t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// /hp watch subscribes the channel: the watch message shows the state and its thread tells the changes; /hp unwatch
// ends it. Wrong names and kinds are refused to the person alone.
func TestWatchCommand(t *testing.T) {
	fc := newFakeCluster(runningPod("train-w-0", "train-w"))
	if err := fc.createJob(context.Background(), "train-w", "", jobActive); err != nil {
		t.Fatal(err)
	}
	h := startWith(t, harnessOptions{clusters: fc.clusters(t)})
	refusals := []struct{ text, want string }{
		{"watch job=Bad_Name", string(ops.CodeInvalidArgument)},
		{"watch job=train-w kind=cronjob", "cannot watch objects of kind"},
		{"watch job=train-w namespace=other", string(ops.CodeNamespaceNotAllowed)},
		{"unwatch job=train-w", "was not watched here"},
	}
	for _, r := range refusals {
		h.slash(userAlice, chOps, r.text)
		h.waitFor(r.text+" refused", func(s fakeslack.Snapshot) bool { return ephemeralWith(s, userAlice, r.want) })
	}
	h.slash(userAlice, chOps, "watch job=train-w")
	s := h.waitFor("the watch message shows running", func(s fakeslack.Snapshot) bool {
		m := topLevel(s, chOps)
		return len(m) == 1 && strings.Contains(m[0].Text, "watching Job train-w: running")
	})
	msg := topLevel(s, chOps)[0]
	h.waitFor("running told in the thread", func(s fakeslack.Snapshot) bool { return repliesWith(s, chOps, msg.TS, "*running*") == 1 })
	if got := testutil.ToFloat64(h.bot.Metrics().WatchedObjects); got != 1 {
		t.Errorf("watched_objects = %v, want 1", got)
	}
	fc.setJobStatus(t, "train-w", jobComplete)
	h.waitFor("completed told", func(s fakeslack.Snapshot) bool { return repliesWith(s, chOps, msg.TS, "is *completed*") == 1 })

	h.slash(userAlice, chOps, "unwatch job=train-w")
	h.waitFor("unwatch announced", func(s fakeslack.Snapshot) bool {
		for _, m := range topLevel(s, chOps) {
			if strings.Contains(m.Text, "stopped watching") {
				return true
			}
		}
		return false
	})
	if got := testutil.ToFloat64(h.bot.Metrics().WatchedObjects); got != 0 {
		t.Errorf("watched_objects = %v after unwatch, want 0", got)
	}
}
