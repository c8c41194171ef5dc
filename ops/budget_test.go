package ops

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Charges splits a run over the windows it overlaps (issue 32, the window part): each window is charged its part of
// the run, a change without an end is counted as running one whole window, and GPUs at once are carried by the
// window the run starts in only.
func TestChargesSplitARunByOverlap(t *testing.T) {
	la, _ := time.LoadLocation("America/Los_Angeles")
	day := BudgetLimit{Name: "daily", Holder: "ops-agent", Window: WindowDay, Limit: Amount{Cost: 5000}}
	week := BudgetLimit{Name: "weekly", Holder: "team", Window: WindowWeek, Limit: Amount{Cost: 50000}}
	month := BudgetLimit{Name: "monthly", Holder: "team", Window: WindowMonth, Zone: "America/Los_Angeles", Limit: Amount{Cost: 500000}}
	job := func(hours float64) *Plan { // $100/h on 8 GPUs, bounded by hours
		p := &Plan{}
		p.Cost.AddHourly("node", 1, 100, "node-hour")
		p.Cost.Total, p.Cost.GPUs = 100*hours, 8
		return p
	}
	server := &Plan{} // $40/h, no end
	server.Cost.AddHourly("node", 1, 40, "node-hour")
	at := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, time.UTC) }
	type part struct {
		start     time.Time
		cost, gpu float64 // cost, GPUs at once
		period    string
	}
	tests := []struct {
		name   string
		budget BudgetLimit
		plan   *Plan
		now    time.Time
		want   []part
	}{
		{"a run inside the day is its whole worst case", day, job(4), at(3, 9, 0),
			[]part{{at(3, 0, 0), 400, 8, "today"}}},
		{"a run over midnight is split by overlap", day, job(4), at(3, 22, 0),
			[]part{{at(3, 0, 0), 200, 8, "today"}, {at(4, 0, 0), 200, 0, "on Fri 4 Dec"}}},
		{"a 72-hour run spans four days", day, job(72), at(3, 12, 0),
			[]part{{at(3, 0, 0), 1200, 8, "today"}, {at(4, 0, 0), 2400, 0, "on Fri 4 Dec"}, {at(5, 0, 0), 2400, 0, "on Sat 5 Dec"},
				{at(6, 0, 0), 1200, 0, "on Sun 6 Dec"}}},
		{"a change without an end approved at 23:58 counts the rest of a day tomorrow", day, server, at(3, 23, 58),
			[]part{{at(3, 0, 0), 40 * 2.0 / 60, 0, "today"}, {at(4, 0, 0), 40 * (24 - 2.0/60), 0, "on Fri 4 Dec"}}},
		{"a change without an end approved at midnight counts one day", day, server, at(3, 0, 0),
			[]part{{at(3, 0, 0), 960, 0, "today"}}},
		{"a change without an end counts a week on a weekly budget", week, server, at(6, 12, 0), // Sunday noon
			[]part{{time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), 40 * 12, 0, "this week"}, {at(7, 0, 0), 40 * (168 - 12), 0, "the week of Mon 7 Dec"}}},
		{"a run over the month's end in the budget's zone", month, job(10), time.Date(2026, 12, 31, 20, 0, 0, 0, la),
			[]part{{time.Date(2026, 12, 1, 0, 0, 0, 0, la), 400, 8, "this month"},
				{time.Date(2027, 1, 1, 0, 0, 0, 0, la), 600, 0, "in January 2027"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Charges([]BudgetLimit{tt.budget}, tt.plan, tt.now)
			if len(got) != len(tt.want) {
				t.Fatalf("%d charges %+v, want %d", len(got), got, len(tt.want))
			}
			var total float64
			for i, c := range got {
				w := tt.want[i]
				if !c.Start.Equal(w.start) || math.Abs(c.Amount.Cost-w.cost) > 1e-6 || c.Amount.GPUs != w.gpu || c.Period() != w.period {
					t.Errorf("charge %d: %s from %s, $%v, %v GPUs at once; want %s from %s, $%v, %v GPUs", i, c.Period(), c.Start,
						c.Amount.Cost, c.Amount.GPUs, w.period, w.start, w.cost, w.gpu)
				}
				if i > 0 && !c.Start.Equal(got[i-1].End) {
					t.Errorf("charge %d starts %s, not where the one before ends (%s)", i, c.Start, got[i-1].End)
				}
				if !c.RunFrom.Equal(tt.now) || !c.RunUntil.Equal(got[0].RunUntil) {
					t.Errorf("charge %d runs %s..%s, want from %s", i, c.RunFrom, c.RunUntil, tt.now)
				}
				total += c.Amount.Cost
			}
			// A bounded run is charged its worst case in all; one without an end, a window of its $/h.
			want := tt.plan.Cost.Total
			if want == 0 {
				start, end := tt.budget.Span(tt.now)
				want = tt.plan.Cost.HourlyDelta * end.Sub(start).Hours()
			}
			if math.Abs(total-want) > 1e-6 {
				t.Errorf("charged $%v in all, want $%v", total, want)
			}
		})
	}
}

// A plan over GPUs at once is told to wait for running requests to end, not for the window to reset.
func TestBudgetExceededSaysWhenGPUsFreeUp(t *testing.T) {
	b := BudgetLimit{Name: "gpus", Path: "budgets[2]", Holder: "ops-agent", Window: WindowDay, Limit: Amount{Cost: 1000, GPUs: 8}}
	at := time.Date(2026, 12, 4, 0, 30, 0, 0, time.UTC)
	c := Charges([]BudgetLimit{b}, &Plan{Cost: Cost{HourlyDelta: 100, Total: 400, GPUs: 8}}, at)[0]
	gpus := BudgetExceeded(BudgetPlace{Charge: c, Used: Amount{GPUs: 8}, Over: []string{"GPUs"}}).Error()
	for _, want := range []string{"8 of 8 GPUs held at once, this needs 8", "give their GPUs back when they end", "budgets[2].limits"} {
		if !strings.Contains(gpus, want) {
			t.Errorf("refusal %q does not say %q", gpus, want)
		}
	}
	if strings.Contains(gpus, "resets (") {
		t.Errorf("refusal %q says GPUs at once free up when the window resets", gpus)
	}
	cost := BudgetExceeded(BudgetPlace{Charge: c, Used: Amount{Cost: 800}, Over: []string{"cost"}}).Error()
	if !strings.Contains(cost, "wait until 2026-12-05 00:00 UTC, when the budget resets") {
		t.Errorf("refusal %q does not say when the window resets", cost)
	}
}
