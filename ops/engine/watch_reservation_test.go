package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// warnedSink tells states like toldSink and records the reservation warnings, one line per subscription.
type warnedSink struct {
	toldSink
	wmu    sync.Mutex
	warned []string
}

func (s *warnedSink) WarnReservation(ctx context.Context, sub ops.WatchSubscription, w ops.ReservationWarning) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.warned = append(s.warned, fmt.Sprintf("%s %s %s %s", sub.ID, w.Object.Name, w.Reservation.Plan, w.Reservation.EndTime.Format("15:04")))
	return nil
}

func (s *warnedSink) warnings() []string {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return slices.Clone(s.warned)
}

// Warnings are claimed per object, plan and end: two replicas warning again and again tell each subscription once;
// an object nobody subscribes to claims nothing, so a subscription made later is still warned; a new end of the
// plan is warned about again; a sink that cannot warn claims nothing either.
func TestWatchesWarnOncePerPlanEnd(t *testing.T) {
	store := opstest.NewRedisStore(t).Store
	sinks := []*warnedSink{{}, {}}
	var ws []*engine.Watches
	for _, s := range sinks {
		ws = append(ws, engine.NewWatches(engine.WatchOptions{Store: store, Objects: clusterObjects{}, Targets: oneCluster{}, Sink: s}))
	}
	ctx := context.Background()
	end := time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)
	warning := func(name string, end time.Time) ops.ReservationWarning {
		return ops.ReservationWarning{Object: job(name), Nodes: []string{"hp-1"}, Reservation: ops.CapacityReservation{Group: "gpu",
			Plan: "tp-gpu", ARN: "arn:aws:sagemaker:us-east-1:111122223333:training-plan/tp-gpu", EndTime: end, Left: 40 * time.Minute}}
	}
	warnAll := func(w ops.ReservationWarning) {
		for _, x := range ws {
			if err := x.ReservationEnding(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A plain WatchSink hears no warning and claims nothing.
	plain := engine.NewWatches(engine.WatchOptions{Store: store, Objects: clusterObjects{}, Targets: oneCluster{}, Sink: &toldSink{}})
	if err := store.Subscribe(ctx, job("train"), ops.WatchSubscription{ID: "w-1", Channel: "C1", Thread: "1.1"}); err != nil {
		t.Fatal(err)
	}
	if err := plain.ReservationEnding(ctx, warning("train", end)); err != nil {
		t.Fatal(err)
	}
	warnAll(warning("unwatched", end)) // claims nothing: nobody listens
	warnAll(warning("train", end))
	warnAll(warning("train", end))
	if err := store.Subscribe(ctx, job("unwatched"), ops.WatchSubscription{ID: "w-2", Channel: "C1", Thread: "2.1"}); err != nil {
		t.Fatal(err)
	}
	warnAll(warning("unwatched", end))
	warnAll(warning("train", end.Add(2*time.Hour))) // extended
	warnAll(warning("train", end.Add(2*time.Hour)))
	got := append(sinks[0].warnings(), sinks[1].warnings()...)
	slices.Sort(got)
	want := []string{"w-1 train tp-gpu 16:00", "w-1 train tp-gpu 18:00", "w-2 unwatched tp-gpu 16:00"}
	if !slices.Equal(got, want) {
		t.Fatalf("warned %q, want %q", got, want)
	}
}
