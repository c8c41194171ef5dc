package ops

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ReservationWarning is a watched workload whose pods run on nodes of a reservation (a training plan) that ends
// soon: its thread is warned once, before the instances are taken back.
type ReservationWarning struct {
	Object ObjectRef `json:"object"`
	// Reservation is the training plan and instance group, its end and the time left when the watcher looked.
	Reservation CapacityReservation `json:"reservation"`
	// Nodes are the workload's nodes in that instance group, by name.
	Nodes []string `json:"nodes"`
}

// ReservationWarningSink tells one subscription that its workload's reservation ends soon (handlers posts a thread
// reply). A WatchSink that implements it gets the warnings; one that does not gets none, and nothing is claimed.
type ReservationWarningSink interface {
	WarnReservation(ctx context.Context, sub WatchSubscription, w ReservationWarning) error
}

// ReservationEnding receives a warning from the watcher and tells it to every subscription of the object, once
// across replicas and restarts for each end of each training plan: the warning is claimed in the store, keyed by
// the object, the plan and its end, so a watcher re-listing repeats nothing and a plan extended later (a new end)
// is warned about again. Objects nobody subscribes to are not claimed.
func (w *Watches) ReservationEnding(ctx context.Context, rw ReservationWarning) error {
	sink, ok := w.opts.Sink.(ReservationWarningSink)
	if !ok || !rw.Reservation.Known() {
		return nil
	}
	subs, err := w.opts.Store.Subscriptions(ctx, rw.Object)
	if err != nil || len(subs) == 0 {
		return err
	}
	res := rw.Reservation
	won, err := w.opts.Store.ClaimReservationWarning(ctx, rw.Object, res.ARN, res.EndTime)
	if err != nil || !won {
		return err
	}
	// Claimed means ours to tell, as with a state: the telling outlives a watcher stopping meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tellTimeout)
	defer cancel()
	var errs []error
	for _, s := range subs {
		if err := sink.WarnReservation(ctx, s, rw); err != nil {
			errs = append(errs, fmt.Errorf("warn %s that training plan %s ends at %s: %w", s.ID, res.Plan,
				res.EndTime.UTC().Format(time.RFC3339), err))
		}
	}
	return errors.Join(errs...)
}
