package engine

import (
	"context"

	"github.com/hyperops/hyperops/ops"
)

// ReservationWarningSink tells one subscription that its workload's reservation ends soon (handlers posts a thread
// reply). A WatchSink that implements it gets the warnings; one that does not gets none, and nothing is claimed.
type ReservationWarningSink interface {
	WarnReservation(ctx context.Context, sub ops.WatchSubscription, w ops.ReservationWarning) error
}
