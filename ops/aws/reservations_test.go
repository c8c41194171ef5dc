package aws

import (
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
)

// planScale plans scaling the gpu group to count, changing nothing.
func planScale(t *testing.T, f *fixture, id string, count int) *ops.Plan {
	t.Helper()
	req := scaleRequest(id, testCluster, "gpu", count)
	req.DryRun = true
	rec, err := f.engine.Submit(ctxT(t), req)
	if err != nil || rec.Phase != ops.PhaseDone {
		t.Fatalf("Submit: %v %+v", err, rec)
	}
	return rec.Plan
}

// A scale plan of a group on a training plan shows the plan and when it ends; scaling up into one that ends within
// the hour is medium risk, naming the end.
func TestScalePlanShowsReservationEnd(t *testing.T) {
	cases := []struct {
		name     string
		endsIn   time.Duration
		to       int
		ends     string
		soonRisk bool
	}{
		{"three hours left", 3*time.Hour + 20*time.Minute, 1, "(in 3 h 20 min)", false},
		{"twenty minutes left", 20 * time.Minute, 3, "(in 20 min)", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{planEndsIn: tc.endsIn})
			p := planScale(t, f, "scale-tp", tc.to)
			if len(p.Reservations) != 1 {
				t.Fatalf("reservations %+v, want the gpu group's training plan", p.Reservations)
			}
			r := p.Reservations[0]
			if r.Group != "gpu" || r.Plan != "tp-gpu" || r.Status != "Active" || !strings.Contains(r.Line(), "training plan tp-gpu, which ends ") ||
				!strings.Contains(r.Line(), tc.ends) {
				t.Errorf("reservation %+v says %q, want tp-gpu ending %s", r, r.Line(), tc.ends)
			}
			if got := hasReason(p.Risk, "whose training plan tp-gpu ends"); got != tc.soonRisk {
				t.Errorf("risk %s %+v: reason about the end = %v, want %v", p.Risk.Level, p.Risk.Reasons, got, tc.soonRisk)
			}
		})
	}
}

// A throttled DescribeTrainingPlan does not hold a scale plan: it plans, says the reservation's end is unknown and
// why, and lowers no risk.
func TestScalePlanWithThrottledTrainingPlan(t *testing.T) {
	f := newFixture(t, fixtureOptions{planEndsIn: 20 * time.Minute})
	f.srv.Fail(fakeaws.OpSageMakerDescribeTrainingPlan, -1, "ThrottlingException", 400, "Rate exceeded")
	start := time.Now()
	p := planScale(t, f, "scale-throttled", 1)
	if took := time.Since(start); took > reservationReadTimeout+2*time.Second {
		t.Errorf("planning took %s with a throttled DescribeTrainingPlan; the read is bounded by %s", took, reservationReadTimeout)
	}
	if len(p.Reservations) != 1 || p.Reservations[0].Known() || !strings.Contains(p.Reservations[0].Unknown, "ThrottlingException") {
		t.Fatalf("reservations %+v, want tp-gpu with its end unknown because of throttling", p.Reservations)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "training plan tp-gpu: reservation end unknown") {
		t.Errorf("warnings %q do not say the end is unknown", p.Warnings)
	}
	if p.Risk.Level != ops.RiskHigh || !hasReason(p.Risk, "scale down") {
		t.Errorf("risk %s %+v, want the scale down's high", p.Risk.Level, p.Risk.Reasons)
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerDescribeTrainingPlan); n < 2 {
		t.Errorf("DescribeTrainingPlan reached AWS %d times; the SDK retries throttling", n)
	}
}

// The reader keeps what it read for ReservationTTL: plans and reports in that window do not call AWS again, and
// after it the end is read afresh (a plan extended is seen within a minute). A failed read is remembered for
// reservationRetryAfter only, so a throttling SageMaker is not asked by every plan.
func TestReservationsAreCached(t *testing.T) {
	f := newFixture(t, fixtureOptions{planEndsIn: 2 * time.Hour})
	clock := clockwork.NewFakeClockAt(time.Now())
	f.clients.Clock = clock
	f.srv.Fail(fakeaws.OpSageMakerDescribeTrainingPlan, 1, "AccessDeniedException", 400, "not authorized to perform: sagemaker:DescribeTrainingPlan")
	read := func() ops.CapacityReservation {
		t.Helper()
		rs, err := f.clients.Reservations(ctxT(t), testCluster)
		if err != nil || len(rs) != 1 {
			t.Fatalf("Reservations = %+v, %v", rs, err)
		}
		return rs[0]
	}
	if r := read(); r.Known() || !strings.Contains(r.Unknown, "AccessDenied") {
		t.Errorf("denied read = %+v, want the end unknown and why", r)
	}
	if r := read(); r.Known() || f.srv.Calls(fakeaws.OpSageMakerDescribeTrainingPlan) != 1 {
		t.Errorf("read right after a failed one = %+v after %d DescribeTrainingPlan calls; want the failure remembered for %s",
			r, f.srv.Calls(fakeaws.OpSageMakerDescribeTrainingPlan), reservationRetryAfter)
	}
	clock.Advance(reservationRetryAfter)
	if r := read(); !r.Known() || r.Left > 2*time.Hour || r.Left < 2*time.Hour-time.Minute {
		t.Errorf("read after a failed one = %+v, want the end two hours away", r)
	}
	described, planned := f.srv.Calls(fakeaws.OpSageMakerDescribeCluster), f.srv.Calls(fakeaws.OpSageMakerDescribeTrainingPlan)
	clock.Advance(30 * time.Second)
	if r := read(); r.Left > 2*time.Hour-29*time.Second {
		t.Errorf("cached read %+v: the time left should follow the clock", r)
	}
	if f.srv.Calls(fakeaws.OpSageMakerDescribeCluster) != described || f.srv.Calls(fakeaws.OpSageMakerDescribeTrainingPlan) != planned {
		t.Errorf("a read within %s called AWS again", ReservationTTL)
	}
	f.srv.SetTrainingPlanEnd("tp-gpu", time.Now().Add(5*time.Hour))
	clock.Advance(ReservationTTL)
	if r := read(); r.Left < 4*time.Hour {
		t.Errorf("read after the TTL = %+v, want the extended end", r)
	}
}
