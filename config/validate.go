package config

import (
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate checks the whole configuration and returns every problem found as Problems (nil when there are none).
// It expects defaults to be applied. Slack tokens are not checked here (see CheckSlackTokens), so a file can be
// validated where the secrets are not available.
func (c *Config) Validate() error {
	var l problemList
	c.Slack.validate(&l)
	c.Redis.validate(&l)
	c.validateClusters(&l)
	c.AWS.validate(&l)
	c.validateAgents(&l)
	c.validateApprovals(&l)
	c.Access.validate(&l)
	c.Risk.validate(&l)
	c.Pricing.validate(&l)
	c.validateReports(&l)
	c.Server.validate(&l)
	c.MCP.validate(&l, c.Server)
	c.Log.validate(&l)
	c.Execution.validate(&l)
	c.Redact.validate(&l)
	c.Audit.validate(&l)
	c.validateBudgets(&l)
	return l.ps.err()
}

var (
	slackChannelID   = regexp.MustCompile(`^[CG][A-Z0-9]{2,}$`)
	slackUserID      = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	slackUserGroupID = regexp.MustCompile(`^S[A-Z0-9]{2,}$`)
	slashCommand     = regexp.MustCompile(`^/[a-z0-9_-]{1,31}$`)
	keyPrefixChars   = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
)

func (s *Slack) validate(l *problemList) {
	if s.APIURL != "" {
		checkHTTPURL(l, "slack.apiURL", s.APIURL)
	}
	if !slashCommand.MatchString(s.Command) {
		l.add("slack.command", "must be a slash command: '/' then up to 31 lower-case letters, digits, '-' or '_', got %q", s.Command)
	}
	if len(s.Channels) == 0 {
		l.add("slack.channels", "must list at least one channel ID where slash commands are accepted (e.g. [C0123OPS])")
	}
	for i, ch := range s.Channels {
		checkChannel(l, indexPath("slack.channels", i), ch)
	}
	checkChannel(l, "slack.approvalsChannel", s.ApprovalsChannel)
	if s.AuditChannel != "" {
		checkChannel(l, "slack.auditChannel", s.AuditChannel)
	}
	if s.Workers < 1 {
		l.add("slack.workers", "must be at least 1 (0 means the default %d), got %d", DefaultWorkers, s.Workers)
	}
	if s.QueueSize < 1 {
		l.add("slack.queueSize", "must be at least 1 (0 means the default %d), got %d", DefaultQueueSize, s.QueueSize)
	}
	if s.HandleTimeout < Duration(time.Second) {
		l.add("slack.handleTimeout", "must be at least 1s (0 means the default %s), got %s", time.Duration(DefaultHandleTimeout), time.Duration(s.HandleTimeout))
	}
}

func (e *Execution) validate(l *problemList) {
	if e.Workers < 1 {
		l.add("execution.workers", "must be at least 1 (0 means the default %d), got %d", DefaultExecWorkers, e.Workers)
	}
	if e.PerCluster < 1 {
		l.add("execution.perCluster", "must be at least 1 (0 means the default %d), got %d", DefaultExecPerCluster, e.PerCluster)
	}
	for _, b := range []struct {
		at string
		d  Duration
	}{{"execution.budgets.kubernetes", e.Budgets.Kubernetes}, {"execution.budgets.capacity", e.Budgets.Capacity},
		{"execution.budgets.bootstrap", e.Budgets.Bootstrap}, {"execution.holdUnknown", e.HoldUnknown},
		{"execution.writeTimeout", e.WriteTimeout}, {"execution.verifyWait", e.VerifyWait},
		{"execution.pollInterval", e.PollInterval}, {"execution.maxPollInterval", e.MaxPollInterval}} {
		if b.d < Duration(time.Second) {
			l.add(b.at, "must be at least 1s (0 means the default), got %s", time.Duration(b.d))
		}
	}
	if e.VerifyWait > e.WriteTimeout && e.WriteTimeout >= Duration(time.Second) {
		l.add("execution.verifyWait", "must be at most execution.writeTimeout (%s), which bounds reading back too; got %s",
			time.Duration(e.WriteTimeout), time.Duration(e.VerifyWait))
	}
	if e.MaxPollInterval < e.PollInterval && e.MaxPollInterval >= Duration(time.Second) {
		l.add("execution.maxPollInterval", "must be at least execution.pollInterval (%s), the shortest wait between two status reads; got %s",
			time.Duration(e.PollInterval), time.Duration(e.MaxPollInterval))
	}
}

func checkChannel(l *problemList, at, id string) {
	if !slackChannelID.MatchString(id) {
		l.add(at, "must be a Slack channel ID (C… or G…, upper-case letters and digits; not a #name), got %q", id)
	}
}

// redactURLError removes the URL's user and password from a parse error's text.
func redactURLError(err error, raw string) string {
	msg := err.Error()
	if ui := urlUserinfo(raw); ui != "" {
		msg = strings.ReplaceAll(msg, ui, "REDACTED")
	}
	return msg
}

func checkPositive(l *problemList, at string, d Duration) {
	if d <= 0 {
		l.add(at, "must be a positive duration such as \"1h\", got %q", d.String())
	}
}

func (r *Risk) validate(l *problemList) {
	hc := r.HourlyCost
	if hc.Medium < 0 {
		l.add("risk.hourlyCost.medium", "must be ≥ 0 dollars per hour, got %g", hc.Medium)
	}
	if hc.High <= hc.Medium {
		l.add("risk.hourlyCost.high", "must be greater than risk.hourlyCost.medium (%g), got %g", hc.Medium, hc.High)
	}
	if o := r.ReservationOutlived; o != ReservationRefuse && o != ReservationCritical {
		l.add("risk.reservationOutlived", "must be %s or %s, got %q", ReservationRefuse, ReservationCritical, o)
	}
	if w := r.ReservationWarnBefore; w < Duration(time.Minute) {
		l.add("risk.reservationWarnBefore", "must be a duration of at least 1m such as \"1h\" (the watcher checks the training plans "+
			"once a minute), or unset for 1h, got %q", w.String())
	}
}

func (p *Pricing) validate(l *problemList) {
	if p.Source != PricingBuiltin && p.Source != PricingAWS {
		l.add("pricing.source", "must be %q or %q, got %q", PricingBuiltin, PricingAWS, p.Source)
	}
	for _, it := range sortedKeys(p.Overrides) {
		at := childPath("pricing.overrides", it)
		checkInstanceType(l, at, it)
		if price := p.Overrides[it]; !(price > 0) {
			l.add(at, "a price override must be > 0 dollars per hour, got %g", price)
		}
	}
	checkPositive(l, "pricing.cacheTTL", p.CacheTTL)
}

func (s *Server) validate(l *problemList) {
	checkAtLeast(l, "server.readTimeout", s.ReadTimeout, Duration(time.Second), DefaultReadTimeout)
	checkAtLeast(l, "server.idleTimeout", s.IdleTimeout, Duration(time.Second), DefaultIdleTimeout)
	_, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		l.add("server.listen", "must be host:port or :port (e.g. \":8080\"), got %q", s.Listen)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		l.add("server.listen", "port must be a number from 0 to 65535, got %q", port)
	}
}

// checkAtLeast reports a duration below its floor (a negative one, or one too short to be of use).
func checkAtLeast(l *problemList, at string, d, floor, def Duration) {
	if d < floor {
		l.add(at, "must be at least %s (0 means the default %s), got %s", time.Duration(floor), time.Duration(def), time.Duration(d))
	}
}

// LogLevels are the accepted log.level values.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}

func (lg *Log) validate(l *problemList) {
	if !slices.Contains(LogLevels, lg.Level) {
		l.add("log.level", "must be one of %s, got %q", strings.Join(LogLevels, ", "), lg.Level)
	}
	if lg.Format != LogJSON && lg.Format != LogConsole && lg.Format != LogAuto {
		l.add("log.format", "must be %s, %s or %s, got %q", LogJSON, LogConsole, LogAuto, lg.Format)
	}
}

// checkHTTPURL requires an absolute http or https URL.
func checkHTTPURL(l *problemList, at, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		l.add(at, "must be an absolute http:// or https:// URL, got %q", raw)
	}
}

func checkDNSLabel(l *problemList, at, what, value string) {
	if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
		l.add(at, "%s must be a DNS-1123 label (lower-case letters, digits and '-', at most 63), got %q: %s",
			what, value, strings.Join(errs, "; "))
	}
}

func checkDNSSubdomain(l *problemList, at, what, value string) {
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		l.add(at, "%s must be a DNS-1123 subdomain (lower-case letters, digits, '-' and '.'), got %q: %s",
			what, value, strings.Join(errs, "; "))
	}
}

// checkGlob requires a non-empty pattern path.Match accepts.
func checkGlob(l *problemList, at, pattern string) {
	if pattern == "" {
		l.add(at, "must be a non-empty glob pattern")
		return
	}
	if _, err := path.Match(pattern, ""); err != nil {
		l.add(at, "must be a valid glob pattern (path.Match: *, ?, [a-z]), got %q: %v", pattern, err)
	}
}

var instanceTypeName = regexp.MustCompile(`^(ml\.)?[a-z0-9-]+\.[a-z0-9-]+$`)

func checkInstanceType(l *problemList, at, it string) {
	switch {
	case it == "":
		l.add(at, "instance type must not be empty")
	case !instanceTypeName.MatchString(it):
		l.add(at, "must be an instance type such as ml.p5.48xlarge or g5.12xlarge, got %q", it)
	}
}

// checkUnique reports each value of values seen before, at its index under list.
func checkUnique(l *problemList, list, what string, values []string) {
	seen := map[string]int{}
	for i, v := range values {
		if first, dup := seen[v]; dup {
			l.add(indexPath(list, i), "duplicate %s %q (also at %s)", what, v, indexPath(list, first))
			continue
		}
		seen[v] = i
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
