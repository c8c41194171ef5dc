package handlers

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// toldMap is the last state told of each watched object, as ops/state keeps it.
type toldMap struct {
	mu sync.Mutex
	m  map[ops.ObjectRef]string
}

func (t *toldMap) LastTold(_ context.Context, obj ops.ObjectRef) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[obj], nil
}

func (t *toldMap) set(obj ops.ObjectRef, st string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[ops.ObjectRef]string{}
	}
	t.m[obj] = st
}

// beforeUpdate runs a function once, at the first chat.update, before the update goes: what another replica does
// while this one's update is on its way.
type beforeUpdate struct {
	Poster
	once sync.Once
	fn   func()
}

func (p *beforeUpdate) Update(ctx context.Context, channel, ts string, m Msg) error {
	p.once.Do(p.fn)
	return p.Poster.Update(ctx, channel, ts, m)
}

// A finished request's message is a function of its record and its workload's last state told: the outcome's
// update (Settle) and the workload's (WatchTeller) draw the same message whichever lands last, including when the
// workload is told while the outcome's update is on its way with the state it read before.
func TestFinishedMessageIsTheSameInEitherOrder(t *testing.T) {
	pvc := ops.ObjectRef{Cluster: "ml-prod-eks", Namespace: "ml-platform", APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "fx-data"}
	orders := []string{"outcome then workload", "workload then outcome", "workload told during the outcome's update"}
	finals := map[string]string{}
	for _, order := range orders {
		t.Run(order, func(t *testing.T) {
			ctx := context.Background()
			srv, slackp := fakeSlack(t)
			told := &toldMap{}
			rec := tellingRecord(ops.PhaseExecuting)
			rec.Result = &ops.Result{Summary: "PersistentVolumeClaim fx-data created", Watch: []ops.ObjectRef{pvc}}
			var workload func()
			p := &beforeUpdate{Poster: slackp, fn: func() {}}
			cfg := Config{Workloads: told}
			h := New(cfg, &recordEngine{rec: rec}, everyone{}, testCatalog(), p, &memRefs{}, nil)
			if err := h.Teller().Tell(ctx, rec, 0); err != nil {
				t.Fatal(err)
			}
			ts := srv.Messages("C0OPS")[0].TS
			w := NewWatchTeller(cfg, testCatalog(), &recordEngine{rec: rec}, slackp)
			workload = func() {
				told.set(pvc, "bound")
				sub := ops.WatchSubscription{ID: rec.ID(), Channel: "C0OPS", Message: ts, Thread: ts}
				if err := w.Watched(ctx, sub, ops.WatchChange{Object: pvc, RequestID: rec.ID(), To: "bound"}); err != nil {
					t.Fatal(err)
				}
			}
			outcome := func() {
				rec.Phase, rec.Version = ops.PhaseSucceeded, rec.Version+1
				if err := h.Teller().Settle(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			switch order {
			case orders[0]:
				outcome()
				workload()
			case orders[1]:
				// The request's record says succeeded before its workload is watched; its plan message does not yet.
				rec.Phase = ops.PhaseSucceeded
				workload()
				rec.Phase = ops.PhaseExecuting
				outcome()
			case orders[2]:
				p.once, p.fn = sync.Once{}, workload
				outcome()
			}
			m := srv.Messages("C0OPS")[0]
			for _, want := range []string{"succeeded (request " + rec.ID() + ")", "fx-data: bound"} {
				if !strings.Contains(m.Text, want) {
					t.Errorf("the message's text %q lacks %q", m.Text, want)
				}
			}
			for _, want := range []string{jsonText("*Succeeded*: PersistentVolumeClaim fx-data created"), jsonText("PersistentVolumeClaim `fx-data`: *Bound*")} {
				if !strings.Contains(string(m.Blocks), want) {
					t.Errorf("the message lacks %q:\n%s", want, m.Blocks)
				}
			}
			finals[order] = m.Text + "\n" + string(m.Blocks)
		})
	}
	for _, order := range orders[1:] {
		if finals[order] != finals[orders[0]] {
			t.Errorf("%q ends with another message than %q:\n%s\n---\n%s", order, orders[0], finals[order], finals[orders[0]])
		}
	}
}

// A workload's change names its request by the object's label, or, for the first state a subscription is told
// from a read of the cluster (no label), by the subscription: the request's Homes refresh either way.
func TestWatchRequest(t *testing.T) {
	job := ops.ObjectRef{Kind: "Job", Name: "llm-ft"}
	for _, tc := range []struct {
		sub  ops.WatchSubscription
		c    ops.WatchChange
		want string
	}{
		{ops.WatchSubscription{ID: "req-1"}, ops.WatchChange{Object: job, RequestID: "req-1", To: "running"}, "req-1"},
		{ops.WatchSubscription{ID: "req-1"}, ops.WatchChange{Object: job, To: "running"}, "req-1"},
		{ops.WatchSubscription{ID: "req-1#agent"}, ops.WatchChange{Object: job, To: "running"}, "req-1"},
		{ops.WatchSubscription{ID: WatchID("C0OPS")}, ops.WatchChange{Object: job, To: "running"}, ""},
		{ops.WatchSubscription{ID: WatchID("C0OPS")}, ops.WatchChange{Object: job, RequestID: "req-2", To: "running"}, "req-2"},
	} {
		if got := WatchRequest(tc.sub, tc.c); got != tc.want {
			t.Errorf("WatchRequest(%q, label %q) = %q, want %q", tc.sub.ID, tc.c.RequestID, got, tc.want)
		}
	}
}
