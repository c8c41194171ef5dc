package kube

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// checkReservations checks work that runs for d.runFor on the instance groups d.landsOn against the reservations
// (training plans) those groups run on, and returns them for the plan to show. Work that outlives one is refused
// with E_RESERVATION_ENDS, or planned at critical risk when risk.reservationOutlived is critical. A reservation
// that cannot be read is said and checks nothing: the plan goes on, its risk not lowered.
func (r *registry) checkReservations(ctx context.Context, t target, d *desired) ([]ops.CapacityReservation, error) {
	if r.reservations == nil || t.cfg.HyperPod.ClusterName == "" || d.runFor <= 0 || len(d.landsOn) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, instancesReadTimeout)
	defer cancel()
	all, err := r.reservations.Reservations(ctx, t.cfg.Name)
	if err != nil {
		d.warnings = append(d.warnings, "reservation end unknown: the training plans of the instance groups could not be read: "+err.Error())
		return nil, nil
	}
	var on, outlived []ops.CapacityReservation
	for _, res := range all {
		if !slices.Contains(d.landsOn, res.Group) {
			continue
		}
		on = append(on, res)
		switch {
		case !res.Known():
			d.warnings = append(d.warnings, res.Line()+": the plan goes on without it")
		case res.Outlives(d.runFor):
			outlived = append(outlived, res)
		}
	}
	if len(outlived) == 0 {
		return on, nil
	}
	first := slices.MinFunc(outlived, func(a, b ops.CapacityReservation) int { return a.EndTime.Compare(b.EndTime) })
	why := fmt.Sprintf("max-hours=%s outlives training plan %s of instance group %s, where its pods may land, which %s",
		hoursWords(d.runFor), first.Plan, first.Group, first.Ends())
	if r.reservationOutlived() == config.ReservationCritical {
		d.risk.Add(ops.RiskCritical, "%s: the job would be cut short", why)
		return on, nil
	}
	return nil, &ops.Error{Code: ops.CodeReservationEnds, Field: "max-hours", Message: why,
		Next: reservationNext(first)}
}

// reservationNext is the way out of E_RESERVATION_ENDS: a deadline within the reservation, or another home.
func reservationNext(r ops.CapacityReservation) string {
	if fits := r.Left.Truncate(time.Minute); fits >= time.Minute {
		return fmt.Sprintf("ask for max-hours=%s or less, or extend training plan %s; a lead can let such jobs be approved at "+
			"critical risk (risk.reservationOutlived: critical)", maxHoursValue(fits), r.Plan)
	}
	return fmt.Sprintf("training plan %s has ended or is about to: extend it, or run the job on instances that are not reserved", r.Plan)
}

// maxHoursValue writes a duration as max-hours= takes it: whole hours as "3", else minutes as "200m".
func maxHoursValue(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprint(int(d.Hours()))
	}
	return fmt.Sprintf("%dm", int(d.Minutes()))
}

// hoursWords says a deadline as max-hours is given: "12", "1.5".
func hoursWords(d time.Duration) string { return fmt.Sprintf("%g", d.Hours()) }

// reservationOutlived is risk.reservationOutlived, refuse when unset.
func (r *registry) reservationOutlived() string {
	if r.cs == nil || r.cs.cfg == nil || r.cs.cfg.Risk.ReservationOutlived == "" {
		return config.ReservationRefuse
	}
	return r.cs.cfg.Risk.ReservationOutlived
}
