package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// told is the progress notes of rec that tell cluster events ("HyperPod…") or, without them, node changes.
func told(rec *ops.Record, prefix string) []string {
	var out []string
	for _, t := range rec.History {
		if t.Kind == ops.KindProgress && strings.HasPrefix(t.Note, prefix) {
			out = append(out, t.Note)
		}
	}
	return out
}

// outcomes counts the terminal phase changes of rec: a request is told its outcome once.
func outcomes(rec *ops.Record) int {
	n := 0
	for _, t := range rec.History {
		if t.Kind == ops.KindPhase && t.To.Terminal() {
			n++
		}
	}
	return n
}

// eventWords is what the thread should say of each of the fake's events of ml-hp, in order.
func eventWords(t *testing.T, f *fixture) []string {
	t.Helper()
	var out []string
	for _, ev := range f.srv.ClusterEvents("ml-hp") {
		if ev.InstanceID != "" {
			out = append(out, ev.InstanceID)
		} else {
			out = append(out, ev.Description[strings.LastIndex(ev.Description, " "):])
		}
	}
	return out
}

// A scale of ml-hp's gpu group by one makes the fake record three events (the scaling started, the new instance
// running, the scaling completed): each is told once, in order, in plain words, before the count that follows.
func TestScaleTellsClusterEventsOnce(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	rec, err := f.engine.Submit(ctxT(t), scaleRequest("scale-events", testCluster, "gpu", 3))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit: %v, phase %v", err, rec.Phase)
	}
	evs := f.srv.ClusterEvents("ml-hp")
	if len(evs) != 3 {
		t.Fatalf("the fake recorded %d events, want 3: %+v", len(evs), evs)
	}
	got := told(rec, "HyperPod")
	want := []string{
		"HyperPod: instance group gpu: scaling started: 2 to 3 instances",
		"HyperPod: node " + evs[1].InstanceID + " of gpu is running",
		"HyperPod: instance group gpu: scaling completed: 3 instances",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
	var notes []string
	for _, tr := range rec.History {
		if tr.Kind == ops.KindProgress {
			notes = append(notes, tr.Note)
		}
	}
	if i, j := slices.Index(notes, want[2]), slices.Index(notes, "3/3 InService (cluster InService)"); i < 0 || j < i {
		t.Errorf("progress %q: the completion event should come before the count it led to", notes)
	}
	if outcomes(rec) != 1 {
		t.Errorf("history %+v: the outcome told %d times", rec.History, outcomes(rec))
	}
}

// Events AWS held back while it throttled the reads are told once the reads go through: none lost, none twice.
func TestScaleEventsThrottledThenTold(t *testing.T) {
	f := newFixture(t, fixtureOptions{transitionDelay: 100 * time.Millisecond})
	f.srv.Fail(fakeaws.OpSageMakerListClusterEvents, 6, "ThrottlingException", 400, "Rate exceeded") // two reads' three attempts
	rec, err := f.engine.Submit(ctxT(t), scaleRequest("throttled-events", testCluster, "gpu", 3))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit: %v, phase %v", err, rec.Phase)
	}
	got, want := told(rec, "HyperPod"), eventWords(t, f)
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("told %q, want the 3 events %q once each", got, want)
	}
	for i := range got {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("told %d: %q, want the event of %q", i, got[i], want[i])
		}
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerListClusterEvents); n <= 6 {
		t.Errorf("%d ListClusterEvents calls: the reads never went through after the throttling", n)
	}
}

// replica is another engine on the same store and queue, as a second replica of the bot is.
func (f *fixture) replica(name string) *engine.Engine {
	return engine.New(f.catalog, f.store, f.store, nil, engine.Options{
		Replica: name, Notifier: f.progress, LockTTL: 10 * time.Second, Queue: f.store.Queue(),
		Risk: ops.RiskPolicy{MediumHourly: 50, HighHourly: 500},
	})
}

// run runs e's executors until the returned stop is called (a SIGTERM: in-flight executions are handed over).
func run(t *testing.T, e *engine.Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.RunExecutors(ctx, engine.ExecutorOptions{Workers: 2, Poll: 10 * time.Millisecond}) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("the executors did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// An observation handed over in the middle of a scale (replica a stops after the first instance runs) is resumed
// by replica b, which goes on after the events a told: every event of the scale is told once, in order.
func TestScaleEventsNotRepeatedAfterHandover(t *testing.T) {
	f := newFixture(t, fixtureOptions{gpuCount: 1, nodeInterval: 400 * time.Millisecond})
	a, b := f.replica("replica-a"), f.replica("replica-b")
	rec, err := a.Submit(ctxT(t), scaleRequest("handover", testCluster, "gpu", 3))
	if err != nil || rec.Phase != ops.PhaseApproved {
		t.Fatalf("Submit: %v, phase %v; want approved (queued)", err, rec.Phase)
	}
	stopA := run(t, a)
	opstest.Eventually(t, 10*time.Second, "replica a to tell the first instance running", func() bool {
		r, err := a.Get(t.Context(), "handover")
		return err == nil && slices.ContainsFunc(told(r, "HyperPod"), func(s string) bool { return strings.HasSuffix(s, "is running") })
	})
	stopA()
	r, _ := a.Get(t.Context(), "handover")
	if r.Phase != ops.PhaseExecuting || !hasNote(r, "handed over") {
		t.Fatalf("after replica a stopped: phase %s; want executing, handed over", r.Phase)
	}
	before := told(r, "HyperPod")
	run(t, b)
	opstest.Eventually(t, 20*time.Second, "replica b to end the scale", func() bool {
		r, err := b.Get(t.Context(), "handover")
		return err == nil && r.Phase.Terminal()
	})
	r, _ = b.Get(t.Context(), "handover")
	if r.Phase != ops.PhaseSucceeded || r.Replica != "replica-b" {
		t.Fatalf("phase %s on %s, want succeeded on replica-b", r.Phase, r.Replica)
	}
	got := told(r, "HyperPod")
	want := eventWords(t, f)
	if len(got) != len(want) || len(want) != 4 {
		t.Fatalf("told %q (%d before the hand-over), want each of the 4 events once: %q", got, len(before), want)
	}
	for i := range got {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("told %d: %q, want the event of %q", i, got[i], want[i])
		}
	}
	if len(before) == 0 || len(before) == len(got) {
		t.Errorf("%d of %d events told before the hand-over: the test did not hand over in the middle", len(before), len(got))
	}
	if outcomes(r) != 1 {
		t.Errorf("the outcome told %d times", outcomes(r))
	}
}

// warnings collects what the clients warn of (the bot logs it).
type warnings struct {
	opstest.Log[string]
}

func (w *warnings) add(cluster, msg string) { w.Add(cluster + ": " + msg) }

// A ListClusterEvents that AWS throttles, that hangs, that AWS refuses (no permission) or cannot answer (a cluster
// not provisioned continuously) never fails the scale: it ends succeeded, told once. Throttled and timed-out reads
// back off, below the status read's pace; a refusal is said once in the log, and the group's node changes are told
// instead.
func TestScaleWithoutClusterEvents(t *testing.T) {
	cases := []struct {
		name     string
		noEvents bool
		code     string
		status   int
		hang     bool // every read hangs past Clients.EventsTimeout
		attempts int  // calls one read makes: the SDK's standard retryer tries a throttled call three times
		nodes    bool // node changes told instead
		warned   string
	}{
		{name: "throttled", code: "ThrottlingException", status: 400, attempts: 3},
		{name: "hanging", hang: true, attempts: 1},
		{name: "access denied", code: "AccessDeniedException", status: 400, nodes: true, warned: "AccessDeniedException"},
		{name: "not continuous", noEvents: true, nodes: true, warned: "NodeProvisioningMode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{noEvents: tc.noEvents, transitionDelay: 150 * time.Millisecond, nodeInterval: 30 * time.Millisecond})
			w := &warnings{}
			f.clients.OnWarning = w.add
			if tc.code != "" {
				f.srv.Fail(fakeaws.OpSageMakerListClusterEvents, -1, tc.code, tc.status, "no events for you")
			}
			if tc.hang {
				f.clients.EventsTimeout = 30 * time.Millisecond
				f.srv.Inject(fakeaws.Fault{Op: fakeaws.OpSageMakerListClusterEvents, When: fakeaws.FaultBefore, Delay: time.Minute, Times: -1})
			}
			for i, count := range []int{4, 2} {
				rec, err := f.engine.Submit(ctxT(t), scaleRequest(fmt.Sprintf("scale-%d-%d", len(tc.name), i), testCluster, "gpu", count))
				if err != nil {
					t.Fatalf("Submit: %v", err)
				}
				if rec.Phase != ops.PhaseSucceeded || outcomes(rec) != 1 {
					t.Fatalf("phase %v, outcome told %d times; want succeeded, told once", rec.Phase, outcomes(rec))
				}
				if evs := told(rec, "HyperPod"); len(evs) != 0 {
					t.Errorf("told events %q that could not be read", evs)
				}
				nodes := told(rec, "nodes of gpu")
				change := map[int]string{0: "Running", 1: "gone"}[i] // the new nodes run; the surplus ones leave
				if tc.nodes && (len(nodes) == 0 || !strings.Contains(strings.Join(nodes, " "), change)) {
					t.Errorf("node changes told: %q; want them told instead of the events", nodes)
				}
				if !tc.nodes && len(nodes) > 0 {
					t.Errorf("node changes told %q although events were only throttled", nodes)
				}
			}
			warned := w.All()
			if tc.warned == "" && len(warned) > 0 || tc.warned != "" && (len(warned) != 1 || !strings.Contains(warned[0], tc.warned)) {
				t.Errorf("warnings %q, want %s", warned, map[bool]string{true: "none", false: "one naming " + tc.warned}[tc.warned == ""])
			}
			if tc.attempts > 0 {
				// Unthrottled, every status read is followed by one read of the events.
				reads, polls := f.srv.Calls(fakeaws.OpSageMakerListClusterEvents)/tc.attempts, f.srv.Calls(fakeaws.OpSageMakerDescribeCluster)
				if reads == 0 || reads >= polls {
					t.Errorf("%d ListClusterEvents reads for %d status reads: failed reads must back off", reads, polls)
				}
				t.Logf("%s: %d ListClusterEvents reads for %d status reads", tc.name, reads, polls)
			}
		})
	}
}

// Rebooting and replacing a faulty node tell the node's events as HyperPod records them: the reboot or
// replacement starting, and its end.
func TestRecoveryTellsNodeEvents(t *testing.T) {
	cases := []struct {
		op    string
		words func(id string) []string
	}{
		{OpRebootNodes, func(id string) []string {
			return []string{"HyperPod: node " + id + " of gpu is rebooting", "HyperPod: node " + id + " of gpu rebooted and is running"}
		}},
		{OpReplaceNodes, func(id string) []string {
			return []string{"HyperPod: node " + id + " of gpu is being replaced", "HyperPod: node " + id + " of gpu was replaced and terminated",
				"replaced instance " + id + " and is running"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.op, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			faulty := f.gpuIDs(t)[0]
			must(t, f.srv.MarkNodeFaulty("ml-hp", faulty, "GPU XID 79: fallen off the bus"))
			rec, err := f.engine.Submit(ctxT(t), recoveryRequest("recover-events", tc.op, ops.Params{"nodes": faulty}))
			if err != nil || rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("Submit: %v, phase %v", err, rec.Phase)
			}
			got := told(rec, "HyperPod")
			want := tc.words(faulty)
			last := -1
			for _, w := range want {
				i := slices.IndexFunc(got, func(s string) bool { return strings.Contains(s, w) })
				if i <= last {
					t.Errorf("told %q: want %q once, after the one before", got, w)
				}
				last = i
			}
			seen := map[string]bool{}
			for _, s := range got {
				if seen[s] {
					t.Errorf("told %q twice", s)
				}
				seen[s] = true
			}
		})
	}
}

// Each event is one plain sentence: HyperPod's wording of nodes and groups turned into ours, the level said, the
// text redacted and capped, and the node or group named when the description does not.
func TestEventSentence(t *testing.T) {
	f := &eventFeed{cluster: "ml-hp", group: "gpu"}
	ev := func(kind smtypes.ClusterEventResourceType, level smtypes.ClusterEventLevel, id, desc string) smtypes.ClusterEventSummary {
		return smtypes.ClusterEventSummary{ResourceType: kind, EventLevel: level, InstanceId: &id, Description: &desc}
	}
	cases := []struct {
		ev   smtypes.ClusterEventSummary
		want string
	}{
		{ev(smtypes.ClusterEventResourceTypeInstance, smtypes.ClusterEventLevelError, "i-0abc",
			"Instance i-0abc in Cluster ml-hp and InstanceGroup gpu failed health checks: GPU XID 79"),
			"HyperPod error: node i-0abc of gpu failed health checks: GPU XID 79"},
		{ev(smtypes.ClusterEventResourceTypeInstanceGroup, smtypes.ClusterEventLevelInfo, "",
			"Scaling of InstanceGroup gpu in Cluster ml-hp started: 2 to 4 instances"),
			"HyperPod: instance group gpu: scaling started: 2 to 4 instances"},
		{ev(smtypes.ClusterEventResourceTypeInstance, smtypes.ClusterEventLevelWarn, "i-0def", "Deep health check\n in progress"),
			"HyperPod warning: Deep health check in progress (node i-0def of gpu)"},
		{ev(smtypes.ClusterEventResourceTypeInstance, smtypes.ClusterEventLevelInfo, "i-0def", ""),
			"HyperPod: an event of node i-0def of gpu"},
		{ev(smtypes.ClusterEventResourceTypeCluster, smtypes.ClusterEventLevelInfo, "",
			"Lifecycle script failed: https://admin:hunter2@example.com/x"),
			"HyperPod: Lifecycle script failed: https://admin:"},
	}
	for _, tc := range cases {
		got := f.sentence(tc.ev)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("sentence(%q) = %q, want %q", *tc.ev.Description, got, tc.want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("sentence %q keeps a password", got)
		}
	}
	long := ev(smtypes.ClusterEventResourceTypeCluster, smtypes.ClusterEventLevelInfo, "", strings.Repeat("x", 1000))
	if n := len([]rune(f.sentence(long))); n > maxEventDescription+20 {
		t.Errorf("a long description makes a %d-rune sentence", n)
	}
}

// A recovery on a cluster without events ends as it would with them: its nodes' state is in its status line, the
// log says once that the events cannot be read, and the thread tells no event.
func TestRecoveryWithoutClusterEvents(t *testing.T) {
	f := newFixture(t, fixtureOptions{noEvents: true})
	w := &warnings{}
	f.clients.OnWarning = w.add
	faulty := f.gpuIDs(t)[0]
	must(t, f.srv.MarkNodeFaulty("ml-hp", faulty, "GPU XID 79"))
	rec, err := f.engine.Submit(ctxT(t), recoveryRequest("reboot-no-events", OpRebootNodes, ops.Params{"nodes": faulty}))
	if err != nil || rec.Phase != ops.PhaseSucceeded || outcomes(rec) != 1 {
		t.Fatalf("Submit: %v; want succeeded, told once", err)
	}
	if evs := told(rec, "HyperPod"); len(evs) != 0 {
		t.Errorf("told events %q that could not be read", evs)
	}
	if !f.progress.has(faulty+" Pending (Rebooting)") || !f.progress.has(faulty+" Running") {
		t.Errorf("progress %q does not follow the node", f.progress.All())
	}
	if warned := w.All(); len(warned) != 1 || !strings.Contains(warned[0], "NodeProvisioningMode") {
		t.Errorf("warnings %q, want one saying why the events cannot be read", warned)
	}
}
