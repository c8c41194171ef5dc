package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // report time zones must resolve in a static image without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

func (c *Config) validateReports(l *problemList) {
	names := make([]string, len(c.Reports))
	for i := range c.Reports {
		names[i] = c.Reports[i].Name
		c.validateReport(l, indexPath("reports", i), &c.Reports[i])
	}
	checkUnique(l, "reports", "report name", names)
}

func (c *Config) validateReport(l *problemList, at string, r *Report) {
	checkDNSLabel(l, at+".name", "a report name", r.Name)
	schedule := *r
	if _, err := time.LoadLocation(r.Timezone); err != nil || r.Timezone == "" {
		l.add(at+".timezone", "report %q: must be an IANA time zone such as America/Los_Angeles or UTC, got %q", r.Name, r.Timezone)
		schedule.Timezone = "UTC" // still check the expression, without repeating the zone problem
	}
	if _, err := schedule.ParseSchedule(); err != nil {
		l.add(at+".schedule", "report %q: %v", r.Name, err)
	}
	checkChannel(l, at+".channel", r.Channel)
	for i, name := range r.Clusters {
		if _, ok := c.Cluster(name); !ok {
			l.add(indexPath(at+".clusters", i), "report %q: must name a registered cluster (%s), got %q",
				r.Name, quoteList(c.clusterNames()), name)
		}
	}
	for i, s := range r.Sections {
		if !slices.Contains(ReportSections, s) {
			l.add(indexPath(at+".sections", i), "report %q: must be one of %s, got %q", r.Name, strings.Join(ReportSections, ", "), s)
		}
	}
	checkUnique(l, at+".sections", "section", r.Sections)
	if r.Samples < 0 {
		l.add(at+".samples", "report %q: must be ≥ 0 (0 = the default %d), got %d", r.Name, DefaultReportSamples, r.Samples)
	}
}

// ParseSchedule parses the report's cron expression (standard 5 fields, no seconds) in the report's time zone.
func (r *Report) ParseSchedule() (cron.Schedule, error) {
	spec := strings.TrimSpace(r.Schedule)
	if spec == "" {
		return nil, fmt.Errorf("schedule is empty: want a 5-field cron expression such as \"0 9 * * 1-5\"")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q: set the zone with timezone, not in the expression", r.Schedule)
	}
	tz := r.Timezone
	if tz == "" {
		tz = DefaultReportTimezone
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return nil, fmt.Errorf("time zone %q: %w", tz, err)
	}
	s, err := cron.ParseStandard("CRON_TZ=" + tz + " " + spec)
	if err != nil {
		return nil, fmt.Errorf("bad cron expression %q (want 5 fields: minute hour day-of-month month day-of-week): %w",
			r.Schedule, err)
	}
	return s, nil
}

// Location returns the report's time zone (UTC when it does not resolve; Validate reports that).
func (r *Report) Location() *time.Location {
	loc, err := time.LoadLocation(r.Timezone)
	if err != nil || r.Timezone == "" {
		return time.UTC
	}
	return loc
}

// ShowsSection reports whether the report includes section (an empty Sections means all).
func (r *Report) ShowsSection(section string) bool {
	return len(r.Sections) == 0 || slices.Contains(r.Sections, section)
}
