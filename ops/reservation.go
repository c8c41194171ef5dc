package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// CapacityReservation is the reserved capacity a HyperPod instance group runs on: a SageMaker training plan, which ends at
// a known time, after which its instances are taken back.
type CapacityReservation struct {
	Group string `json:"group"`
	// Plan is the training plan's name, ARN its ARN (the instance group's TrainingPlanArn).
	Plan string `json:"plan"`
	ARN  string `json:"arn"`
	// Status is DescribeTrainingPlan's: Pending, Active, Scheduled, Expired or Failed.
	Status string `json:"status,omitempty"`
	// EndTime is when the reservation ends; zero when it could not be read (Unknown says why).
	EndTime time.Time `json:"endTime,omitzero"`
	// Left is EndTime less the time it was looked at (negative once it has ended); in JSON, leftSeconds.
	Left time.Duration `json:"-"`
	// Unknown says why the end could not be read: a plan goes on without it, its risk not lowered.
	Unknown string `json:"unknown,omitempty"`
}

// capacityReservationJSON is CapacityReservation on the wire, with Left in seconds.
type capacityReservationJSON struct {
	capacityReservationFields
	LeftSeconds int64 `json:"leftSeconds,omitempty"`
}

type capacityReservationFields CapacityReservation

// MarshalJSON writes Left as leftSeconds, which agents read without knowing Go's durations.
func (r CapacityReservation) MarshalJSON() ([]byte, error) {
	return json.Marshal(capacityReservationJSON{capacityReservationFields(r), int64(r.Left / time.Second)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *CapacityReservation) UnmarshalJSON(b []byte) error {
	var w capacityReservationJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = CapacityReservation(w.capacityReservationFields)
	r.Left = time.Duration(w.LeftSeconds) * time.Second
	return nil
}

// Known reports whether the end time was read.
func (r CapacityReservation) Known() bool { return !r.EndTime.IsZero() }

// Outlives reports whether work that runs for d from now would still run when the reservation ends; an unknown end
// outlives nothing (it is said, not assumed).
func (r CapacityReservation) Outlives(d time.Duration) bool { return r.Known() && d > r.Left }

// Ends says when the reservation ends: "ends 2026-12-05 17:20 UTC (in 3 h 20 min)", "ended 2026-12-05 13:00 UTC
// (1 h ago)", or "reservation end unknown (why)".
func (r CapacityReservation) Ends() string {
	if !r.Known() {
		return "reservation end unknown (" + r.Unknown + ")"
	}
	at := r.EndTime.UTC().Format("2006-01-02 15:04 UTC")
	if r.Left <= 0 {
		return fmt.Sprintf("ended %s (%s ago)", at, SayDuration(-r.Left))
	}
	return fmt.Sprintf("ends %s (in %s)", at, SayDuration(r.Left))
}

// Line says it in one sentence: "instance group gpu runs on training plan tp-a, which ends 2026-12-05 17:20 UTC (in
// 3 h 20 min)".
func (r CapacityReservation) Line() string {
	if !r.Known() {
		return fmt.Sprintf("instance group %s runs on training plan %s: %s", r.Group, r.Plan, r.Ends())
	}
	which := "which "
	if r.Left <= 0 {
		which = "which has "
	}
	return fmt.Sprintf("instance group %s runs on training plan %s, %s%s", r.Group, r.Plan, which, r.Ends())
}

// ReservationReader reads the reservations a cluster's HyperPod instance groups run on, one per group that has one
// (none for a cluster without HyperPod). ops/aws implements it with a short cache; a plan whose end it could not
// read comes back with Unknown set rather than as an error.
type ReservationReader interface {
	Reservations(ctx context.Context, cluster string) ([]CapacityReservation, error)
}

// SayDuration says a duration the way people do: "12 h", "1 h 30 min", "45 min", "20 s", "3 days".
func SayDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute).Minutes()))
	case d >= 72*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	d = d.Round(time.Minute)
	h, m := int(d.Hours()), int(d.Minutes())%60
	if m == 0 {
		return fmt.Sprintf("%d h", h)
	}
	return fmt.Sprintf("%d h %d min", h, m)
}
