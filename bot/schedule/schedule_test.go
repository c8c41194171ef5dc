package schedule

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/report"
)

func TestScheduleTicksInTheReportsZone(t *testing.T) {
	la := mustZone(t, "America/Los_Angeles")
	tests := []struct {
		name     string
		report   config.Report
		start    time.Time
		wantUTC  []string
		wantZone string
	}{
		{
			name:   "weekdays at 9 across the spring DST change",
			report: config.Report{Name: "daily-capacity", Schedule: "0 9 * * 1-5", Timezone: "America/Los_Angeles", Sections: []string{}},
			start:  time.Date(2025, 3, 7, 8, 30, 0, 0, la), // Friday; DST starts Sunday 9 March
			// Friday 09:00 PST is 17:00Z; Monday 09:00 PDT is 16:00Z; the weekend has no run.
			wantUTC:  []string{"2025-03-07T17:00:00Z", "2025-03-10T16:00:00Z"},
			wantZone: "PDT",
		},
		{
			name:     "daily at 9 across the autumn DST change",
			report:   config.Report{Name: "daily", Schedule: "0 9 * * *", Timezone: "America/Los_Angeles"},
			start:    time.Date(2025, 11, 1, 8, 30, 0, 0, la),
			wantUTC:  []string{"2025-11-01T16:00:00Z", "2025-11-02T17:00:00Z"},
			wantZone: "PST",
		},
		{
			name:     "every 15 minutes in UTC",
			report:   config.Report{Name: "quarter", Schedule: "*/15 * * * *", Timezone: "UTC"},
			start:    time.Date(2025, 3, 7, 10, 5, 0, 0, time.UTC),
			wantUTC:  []string{"2025-03-07T10:15:00Z", "2025-03-07T10:30:00Z", "2025-03-07T10:45:00Z"},
			wantZone: "UTC",
		},
		{
			name:     "a descriptor",
			report:   config.Report{Name: "hourly", Schedule: "@hourly", Timezone: "Asia/Kolkata"},
			start:    time.Date(2025, 3, 7, 10, 5, 0, 0, time.UTC),
			wantUTC:  []string{"2025-03-07T10:30:00Z", "2025-03-07T11:30:00Z"}, // IST is UTC+5:30
			wantZone: "IST",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(tt.start)
			claims, pub := &memClaimer{}, newPublisher()
			start(t, Options{Config: testConfig(tt.report), Claimer: claims, Builder: clockBuilder{clock: clock}, Publisher: pub, Clock: clock})
			for _, want := range tt.wantUTC {
				waitIdle(t, clock, 1)
				at, _ := time.Parse(time.RFC3339, want)
				clock.Advance(at.Sub(clock.Now()))
				p := pub.next(t)
				if p.notice != "" {
					t.Fatalf("got a notice %q, want a report", p.notice)
				}
				if !p.report.At.Equal(at) || p.channel != "C0123OPS" || p.report.Name != tt.report.Name {
					t.Errorf("posted %s at %v to %s, want %s at %v to C0123OPS", p.report.Name, p.report.At, p.channel, tt.report.Name, at)
				}
				if wantChart := p.report.Shows(report.SectionChart); wantChart != bytes.HasPrefix(p.chart, []byte("\x89PNG")) {
					t.Errorf("chart of %d bytes, want a PNG chart: %v", len(p.chart), wantChart)
				}
			}
			if zone, _ := pub.all()[len(tt.wantUTC)-1].report.At.Zone(); zone != tt.wantZone {
				t.Errorf("last report written in zone %s, want %s", zone, tt.wantZone)
			}
			var claimed []string // the ticks from the start on: the lookback also claims older ones, never posting them
			for _, c := range claims.claimedTicks() {
				if !c.Before(tt.start) {
					claimed = append(claimed, c.Format(time.RFC3339))
				}
			}
			if strings.Join(claimed, " ") != strings.Join(tt.wantUTC, " ") {
				t.Errorf("claimed ticks %v, want %v", claimed, tt.wantUTC)
			}
		})
	}
}

func TestMissedTicks(t *testing.T) {
	la := mustZone(t, "America/Los_Angeles")
	daily := config.Report{Name: "daily-capacity", Schedule: "0 9 * * 1-5", Timezone: "America/Los_Angeles"}
	hourly := config.Report{Name: "hourly", Schedule: "0 * * * *", Timezone: "America/Los_Angeles"}
	tick := time.Date(2025, 3, 7, 9, 0, 0, 0, la)
	tests := []struct {
		name        string
		report      config.Report
		start       time.Time
		claimedBy   []time.Time // ticks another replica already claimed
		wantReports int
		wantNotice  string
	}{
		{name: "another replica posted while this one was down", report: daily, start: tick.Add(30 * time.Minute),
			claimedBy: []time.Time{tick}},
		{name: "first deployment: nothing ran before, nothing missed", report: daily, start: tick.Add(30 * time.Minute)},
		{name: "nobody posted", report: daily, start: tick.Add(30 * time.Minute),
			claimedBy:  []time.Time{tick.AddDate(0, 0, -1)}, // Thursday's run was posted, so the report was running
			wantNotice: "report daily-capacity scheduled at Fri Mar 7 09:00 PST was missed: no replica was running to post it within 2m0s of its time."},
		{name: "started within the grace", report: daily, start: tick.Add(90 * time.Second), wantReports: 1},
		{name: "several runs missed", report: hourly, start: time.Date(2025, 3, 7, 12, 30, 0, 0, la),
			claimedBy:  []time.Time{time.Date(2025, 3, 7, 0, 0, 0, 0, la)},
			wantNotice: "report hourly: 12 scheduled runs from Fri Mar 7 01:00 PST to Fri Mar 7 12:00 PST were missed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(tt.start)
			claims, pub := &memClaimer{}, newPublisher()
			for _, at := range tt.claimedBy {
				if _, err := claims.ClaimTick(context.Background(), tt.report.Name, at); err != nil {
					t.Fatal(err)
				}
			}
			start(t, Options{Config: testConfig(tt.report), Claimer: claims, Builder: clockBuilder{clock: clock}, Publisher: pub, Clock: clock})
			waitIdle(t, clock, 1)
			var reports, notices []published
			for _, p := range pub.all() {
				if p.notice != "" {
					notices = append(notices, p)
				} else {
					reports = append(reports, p)
				}
			}
			if len(reports) != tt.wantReports {
				t.Errorf("%d reports posted, want %d", len(reports), tt.wantReports)
			}
			switch {
			case tt.wantNotice == "" && len(notices) != 0:
				t.Errorf("unexpected notices %+v", notices)
			case tt.wantNotice != "" && (len(notices) != 1 || !strings.Contains(notices[0].notice, tt.wantNotice) || notices[0].channel != "C0123OPS"):
				t.Errorf("notices = %+v, want one to C0123OPS containing %q", notices, tt.wantNotice)
			}
		})
	}
}

func TestStateStoreOutage(t *testing.T) {
	tests := []struct {
		name       string
		outage     time.Duration
		wantReport bool
		wantNotice string
	}{
		{name: "back within the grace: posted late", outage: 45 * time.Second, wantReport: true},
		{name: "back after the grace: told as missed", outage: 5 * time.Minute,
			wantNotice: "report every-10 scheduled at Fri Mar 7 10:10 UTC was missed: the state store (Redis) was unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tick := time.Date(2025, 3, 7, 10, 10, 0, 0, time.UTC)
			clock := clockwork.NewFakeClockAt(tick.Add(-time.Minute))
			claims, pub := &memClaimer{}, newPublisher()
			rep := config.Report{Name: "every-10", Schedule: "*/10 * * * *", Timezone: "UTC"}
			start(t, Options{Config: testConfig(rep), Claimer: claims, Builder: clockBuilder{clock: clock}, Publisher: pub, Clock: clock,
				RetryEvery: 15 * time.Second})
			waitIdle(t, clock, 1)
			claims.setFailing(true)
			clock.Advance(time.Minute)
			for clock.Since(tick) < tt.outage {
				waitIdle(t, clock, 1) // the failed claim waits RetryEvery
				clock.Advance(15 * time.Second)
			}
			waitIdle(t, clock, 1)
			if n := len(pub.all()); n != 0 {
				t.Fatalf("%d posts while the state store was down", n)
			}
			claims.setFailing(false)
			clock.Advance(15 * time.Second)
			p := pub.next(t)
			if tt.wantReport != (p.notice == "") || !strings.Contains(p.notice, tt.wantNotice) {
				t.Errorf("posted %+v, want report=%v notice %q", p, tt.wantReport, tt.wantNotice)
			}
			if got := claims.claimedTicks(); !got[len(got)-1].Equal(tick) || len(pub.all()) != 1 {
				t.Errorf("claimed %v, want the 10:10 tick once", got)
			}
		})
	}
}

func TestClusterFailureIsToldOthersPosted(t *testing.T) {
	start0 := time.Date(2025, 3, 7, 10, 59, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start0)
	claims, pub := &memClaimer{}, newPublisher()
	rep := config.Report{Name: "hourly", Schedule: "@hourly", Timezone: "UTC", Clusters: []string{"ml-dev-eks", "ml-prod-eks"}}
	start(t, Options{Config: testConfig(rep), Claimer: claims, Publisher: pub, Clock: clock,
		Builder: clockBuilder{clock: clock, fail: map[string]bool{"ml-dev-eks": true}}})
	waitIdle(t, clock, 1)
	clock.Advance(time.Minute)
	first, second := pub.next(t), pub.next(t)
	if !strings.Contains(first.notice, "report hourly for cluster ml-dev-eks scheduled at Fri Mar 7 11:00 UTC failed: build: E_CLUSTER_UNAVAILABLE") {
		t.Errorf("first post = %+v, want the failure of ml-dev-eks", first)
	}
	if second.report.Cluster != "ml-prod-eks" {
		t.Errorf("second post = %+v, want the ml-prod-eks report", second)
	}
}

func TestNewRejectsBadReports(t *testing.T) {
	tests := []struct {
		name   string
		report config.Report
		want   string
	}{
		{"bad expression", config.Report{Name: "r1", Schedule: "0 9 * *", Timezone: "UTC"}, `report "r1": bad cron expression`},
		{"seconds field", config.Report{Name: "r2", Schedule: "0 0 9 * * *", Timezone: "UTC"}, `report "r2"`},
		{"unknown zone", config.Report{Name: "r3", Schedule: "0 9 * * *", Timezone: "Mars/Olympus"}, `report "r3": time zone "Mars/Olympus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{Config: testConfig(tt.report), Claimer: &memClaimer{}, Builder: clockBuilder{}, Publisher: newPublisher()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestOnDemand(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 7, 10, 0, 0, 0, time.UTC))
	tests := []struct {
		name     string
		clusters []string
		fail     map[string]bool
		wantCode ops.Code
		wantErr  string
		posted   []string
	}{
		{name: "all clusters", posted: []string{"ml-prod-eks", "ml-dev-eks"}},
		{name: "one cluster", clusters: []string{"ml-dev-eks"}, posted: []string{"ml-dev-eks"}},
		{name: "unknown cluster", clusters: []string{"nope"}, wantCode: ops.CodeUnknownCluster},
		{name: "one cluster down", fail: map[string]bool{"ml-dev-eks": true}, wantErr: "cluster ml-dev-eks: build: E_CLUSTER_UNAVAILABLE",
			posted: []string{"ml-prod-eks"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := newPublisher()
			o := &OnDemand{Config: testConfig(), Builder: clockBuilder{clock: clock, fail: tt.fail}, Publisher: pub}
			err := o.CapacityReport(context.Background(), "C0ASK", tt.clusters)
			switch {
			case tt.wantCode != "":
				if e := ops.AsError(err); e == nil || e.Code != tt.wantCode {
					t.Errorf("err = %v, want %s", err, tt.wantCode)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("err = %v", err)
			}
			var got []string
			for _, p := range pub.all() {
				if p.channel != "C0ASK" || p.report.Name != report.OnDemand {
					t.Errorf("posted %s to %s, want on-demand to C0ASK", p.report.Name, p.channel)
				}
				got = append(got, p.report.Cluster)
			}
			if strings.Join(got, ",") != strings.Join(tt.posted, ",") {
				t.Errorf("posted for %v, want %v", got, tt.posted)
			}
		})
	}
}
