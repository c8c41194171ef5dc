package bot

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/kube"
	"github.com/hyperops/hyperops/ops/report/collect"
)

// trainingPlans is the AWS view of one instance group, gpu, on training plan tp-gpu ending at end on the harness's
// clock; it counts its reads.
type trainingPlans struct {
	mu    sync.Mutex
	clock clockwork.Clock
	end   time.Time
	n     int
}

func (p *trainingPlans) InstanceGroups(context.Context, string) ([]collect.GroupStatus, error) {
	return nil, nil
}

func (p *trainingPlans) Reservations(context.Context, string) ([]ops.CapacityReservation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.clock == nil {
		return nil, nil
	}
	return []ops.CapacityReservation{{Group: "gpu", Plan: "tp-gpu", Status: "Active", EndTime: p.end, Left: p.end.Sub(p.clock.Now()),
		ARN: "arn:aws:sagemaker:us-east-1:111122223333:training-plan/tp-gpu"}}, nil
}

func (p *trainingPlans) reads() int { p.mu.Lock(); defer p.mu.Unlock(); return p.n }

// A Job watched with /hp watch whose pod runs on a node of a group whose training plan ends within
// risk.reservationWarnBefore gets one warning in the watch's thread, while two replicas check every minute, the
// watcher's lease is handed over and the new leader re-lists.
func TestWatchWarnsOnceBeforeTheTrainingPlanEnds(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hp-1", Labels: map[string]string{kube.LabelHyperPodGroup: "gpu"}}}
	pod := runningPod("train-r-0", "train-r")
	pod.Spec.NodeName = "hp-1"
	fc := newFakeCluster(node, pod)
	if err := fc.createJob(context.Background(), "train-r", "", jobActive); err != nil {
		t.Fatal(err)
	}
	plans := &trainingPlans{}
	opts := harnessOptions{replica: "a", clusters: fc.clusters(t), groups: plans,
		edit: func(c *config.Config) { c.Risk.ReservationWarnBefore = config.Duration(8 * time.Hour) }}
	h := startWith(t, opts)
	plans.mu.Lock()
	plans.clock, plans.end = h.clock, h.clock.Now().Add(6*time.Hour)
	plans.mu.Unlock()
	b := h.launchSecond(opts)

	h.slash(userAlice, chOps, "watch job=train-r")
	s := h.waitFor("the watch message", func(s fakeslack.Snapshot) bool { return len(topLevel(s, chOps)) == 1 })
	watch := topLevel(s, chOps)[0]
	// checked waits for the leader to read the plans again, moving the clock a minute at a time until it does; the
	// read after a check means that check (and its Slack post) is over.
	checked := func() {
		n := plans.reads()
		h.waitUntil("the plans read again", func() bool {
			if plans.reads() > n {
				return true
			}
			h.clock.Advance(time.Minute)
			return false
		})
	}
	warnings := func(s fakeslack.Snapshot) int { return repliesWith(s, chOps, watch.TS, "training plan `tp-gpu`") }
	h.waitUntil("the warning", func() bool {
		if warnings(h.srv.Snapshot()) > 0 {
			return true
		}
		h.clock.Advance(time.Minute)
		return false
	})
	checked()
	checked()
	holder, _ := h.replicaByName(b)
	holder.stop(t)
	checked()
	checked()
	s = h.srv.Snapshot()
	if n := warnings(s); n != 1 {
		t.Fatalf("the watch's thread holds %d reservation warnings, want 1", n)
	}
	for _, want := range []string{"instance group `gpu`", "*save a checkpoint*", "`hp-1`"} {
		if repliesWith(s, chOps, watch.TS, want) != 1 {
			t.Errorf("the warning lacks %q", want)
		}
	}
}
