package bot

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// jobRig is two replicas sharing one fake cluster, where a person's training job creates a Job that the watcher
// follows: told in the request's thread, and shown in the requester's Home (issue 31: the Home kept showing the
// Job pending for the 30 s it ran while the thread said running).
type jobRig struct {
	h  *harness
	fc *fakeCluster
}

// startJobRig starts the replicas; every Job a training request creates starts with status created. Alice has
// opened her Home.
func startJobRig(tb testing.TB, o harnessOptions, created batchv1.JobStatus) *jobRig {
	tb.Helper()
	fc := newFakeCluster()
	o.clusters, o.replica = fc.clusters(tb), "a"
	o.prepare = func(h *harness) {
		h.ops["submit-training-job"].watch = func(ctx context.Context, req *ops.Request) ([]ops.ObjectRef, error) {
			name := req.Params.String("name")
			if err := fc.createJob(ctx, name, req.ID, created); err != nil {
				return nil, fmt.Errorf("create job: %w", err)
			}
			return []ops.ObjectRef{{Cluster: req.Target.Cluster, Namespace: req.Target.Namespace, APIVersion: "batch/v1", Kind: "Job", Name: name}}, nil
		}
	}
	h := startWith(tb, o)
	h.launchSecond(o)
	h.openHome(userAlice)
	return &jobRig{h: h, fc: fc}
}

// submit has Alice ask for training job id in the ops channel.
func (r *jobRig) submit(id string) {
	r.h.t.Helper()
	r.h.slash(userAlice, chOps, "train submit name="+id+" image=registry.example.com/trainer:v1 request-id="+id)
}

// setJob moves Job name to st, as the Job controller would.
func (r *jobRig) setJob(name string, st batchv1.JobStatus) {
	r.h.t.Helper()
	ctx := context.Background()
	j, err := r.fc.kube.BatchV1().Jobs(watchNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		r.h.t.Fatal(err)
	}
	j.Status = st
	if _, err := r.fc.kube.BatchV1().Jobs(watchNS).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		r.h.t.Fatal(err)
	}
}

// threadSays returns the first reply in the thread of request id's plan message that says its Job is state, and
// whether there is one.
func threadSays(s fakeslack.Snapshot, id, state string) (fakeslack.Message, bool) {
	plan := mentioning(topLevel(s, chOps), "(request "+id+")")
	if len(plan) != 1 {
		return fakeslack.Message{}, false
	}
	for _, m := range threadReplies(s, chOps, plan[0].TS) {
		if strings.Contains(m.Text+string(m.Blocks), "is *"+state+"*") {
			return m, true
		}
	}
	return fakeslack.Message{}, false
}

// homeSaysJob reports whether Alice's Home shows Job id in state.
func homeSaysJob(s fakeslack.Snapshot, id, state string) bool {
	return homeShows(s, userAlice, "Job `"+id+"` *"+state+"*")
}

// The engineer's Home follows the Job their request made, as its thread does: pending once the request succeeded,
// running once the thread says so (the watcher's change redraws the Home; the request's record does not change),
// completed once it ends, and then no longer under Running now. Two replicas, real Redis, the fake Slack over its
// sockets.
func TestHomeShowsTheJobRunningOnceTheThreadSaysSo(t *testing.T) {
	r := startJobRig(t, harnessOptions{}, batchv1.JobStatus{})
	h := r.h
	const id = "home-run"
	r.submit(id)
	h.waitAll(
		check{"the request succeeded with its Job pending", func(s fakeslack.Snapshot) bool {
			return len(mentioningAll(topLevel(s, chOps), "(request "+id+")", "succeeded", id+": pending")) == 1
		}},
		check{"the Job pending under Running now in alice's Home", func(s fakeslack.Snapshot) bool {
			return homeSaysJob(s, id, "pending") && homeShows(s, userAlice, "Running now (1)")
		}})
	if _, ok := threadSays(h.srv.Snapshot(), id, "running"); ok {
		t.Fatal("the thread said running before the Job ran")
	}

	r.setJob(id, jobActive)
	h.waitAll(
		check{"the thread saying the Job is running", func(s fakeslack.Snapshot) bool { _, ok := threadSays(s, id, "running"); return ok }},
		check{"alice's Home showing it running", func(s fakeslack.Snapshot) bool { return homeSaysJob(s, id, "running") }})
	if rec := h.record(id); rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("the request is %s, want succeeded (only its Job moved)", rec.Phase)
	}

	r.setJob(id, jobComplete)
	h.waitAll(
		check{"the thread saying the Job completed", func(s fakeslack.Snapshot) bool { _, ok := threadSays(s, id, "completed"); return ok }},
		check{"alice's Home showing it completed, nothing running", func(s fakeslack.Snapshot) bool {
			return homeSaysJob(s, id, "completed") && homeShows(s, userAlice, "Nothing you may see is running.")
		}})
}

// BenchmarkHomeShowsRunning measures what issue 31 asks of the engineer's Home: it shows their Job running within
// 2 s of the request's thread saying so. Each iteration, Alice submits a training job through the running bot (two
// replicas, real Redis, the fake Slack enforcing Slack's rate tiers and the bot on its production client limits);
// the gap is from the thread reply saying running (chat.postMessage, as the fake Slack recorded it) to the first
// views.publish of her Home that shows it running (the publish the waiter saw first: when two land between two
// looks, the later one's time is taken, so the gap is never understated). Two cases: the Job runs as soon as it is
// created (the case, the request's success and the Job's running told within milliseconds), and the Job
// pending first, running once the request's success is on her Home (only the watcher's change can redraw it).
// Reported: p50, p99 and max of the gap, in ms.
func BenchmarkHomeShowsRunning(b *testing.B) {
	b.Run("running-at-once", func(b *testing.B) { benchHomeRunning(b, jobActive) })
	b.Run("pending-then-running", func(b *testing.B) { benchHomeRunning(b, batchv1.JobStatus{}) })
}

func benchHomeRunning(b *testing.B, created batchv1.JobStatus) {
	limits := DefaultLimits()
	r := startJobRig(b, harnessOptions{slack: &fakeslack.Options{}, limits: &limits}, created)
	h := r.h
	var gaps []time.Duration
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("hr-%03d", i)
		i++
		r.submit(id)
		if created.Active == 0 {
			pollSlack(b, h.srv, id+" pending in alice's Home", time.Minute, func(s fakeslack.Snapshot) bool { return homeSaysJob(s, id, "pending") })
			r.setJob(id, jobActive)
		}
		var threadAt, homeAt time.Time
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := h.srv.WaitFor(ctx, func(s fakeslack.Snapshot) bool {
			if m, ok := threadSays(s, id, "running"); ok && threadAt.IsZero() {
				threadAt = m.PostedAt
			}
			if homeAt.IsZero() && homeSaysJob(s, id, "running") {
				homeAt = s.Homes[userAlice].PublishedAt
			}
			return !threadAt.IsZero() && !homeAt.IsZero()
		})
		cancel()
		if err != nil {
			b.Fatalf("%s: thread told running at %v, Home showed it at %v: %v", id, threadAt, homeAt, err)
		}
		gaps = append(gaps, homeAt.Sub(threadAt))
		// The Job ends, so the next iteration starts with nothing of Alice's running.
		r.setJob(id, jobComplete)
		pollSlack(b, h.srv, id+" completed in alice's Home", time.Minute, func(s fakeslack.Snapshot) bool {
			return homeSaysJob(s, id, "completed") && homeShows(s, userAlice, "Nothing you may see is running.")
		})
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50, p99, worst := percentile(gaps, 50), percentile(gaps, 99), percentile(gaps, 100)
	fmt.Fprintf(os.Stdout, "\nHome running after the thread (%s), %d runs: p50 %s, p99 %s, max %s\n", b.Name(), len(gaps),
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond))
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(worst), "max-ms")
	b.ReportMetric(float64(len(gaps)), "runs")
	b.ReportMetric(float64(limitedBy(h.srv.Snapshot())["views.publish"]), "publish-429s")
}
