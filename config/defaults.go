package config

import (
	"strings"
	"time"
)

// DefaultReservationWarnBefore is how long before its training plan ends a watched workload is warned.
const DefaultReservationWarnBefore = Duration(time.Hour)

// The defaults ApplyDefaults fills in; example.yaml documents each next to its key.
const (
	DefaultCommand           = "/hp"
	DefaultWorkers           = 8
	DefaultQueueSize         = 256
	DefaultKeyPrefix         = "hyperops"
	DefaultRequestTTL        = Duration(720 * time.Hour)
	DefaultDedupeTTL         = Duration(time.Hour)
	DefaultRedisWaitTimeout  = Duration(500 * time.Millisecond)
	DefaultEnvironment       = EnvProduction
	DefaultProfile           = "default"
	DefaultOnCreate          = "on_create.sh"
	DefaultApprovalExpiry    = Duration(time.Hour)
	DefaultMediumHourlyCost  = 50.0
	DefaultHighHourlyCost    = 500.0
	DefaultPricingSource     = PricingBuiltin
	DefaultPricingCacheTTL   = Duration(24 * time.Hour)
	DefaultReportTimezone    = "UTC"
	DefaultBudgetWindow      = WindowDay
	DefaultBudgetTimeZone    = "UTC"
	DefaultReportSamples     = 30
	DefaultListen            = ":8080"
	DefaultLogLevel          = "info"
	DefaultLogFormat         = LogAuto
	DefaultRedactMaxChars    = 20000
	defaultProfileServiceAcc = "default"
	DefaultHandleTimeout     = Duration(2 * time.Minute)
	DefaultExecWorkers       = 16
	DefaultExecPerCluster    = 4
	DefaultKubernetesBudget  = Duration(5 * time.Minute)
	DefaultCapacityBudget    = Duration(2 * time.Hour)
	DefaultBootstrapBudget   = Duration(4 * time.Hour)
	DefaultHoldUnknown       = Duration(24 * time.Hour)
	DefaultReadTimeout       = Duration(10 * time.Second)
	DefaultIdleTimeout       = Duration(time.Minute)
	DefaultAuditMaxEntries   = int64(100000)
	DefaultMCPSessionIdle    = Duration(10 * time.Minute)
	DefaultMCPSessions       = 256
	DefaultMCPWaits          = 128
	DefaultWriteTimeout      = Duration(2 * time.Minute)
	DefaultVerifyWait        = Duration(30 * time.Second)
	DefaultPollInterval      = Duration(5 * time.Second)
	DefaultMaxPollInterval   = Duration(2 * time.Minute)
	DefaultRequestTimeout    = Duration(30 * time.Second)
)

// DefaultVerifyImage is the smoke-test image when clusters[].verify.image is empty. Unlike the defaults above it is
// not filled in by ApplyDefaults but read through Cluster.VerifyImage, so a cluster whose images do not allow it
// still loads; only verify-cluster refuses it, naming the glob rule.
const DefaultVerifyImage = "public.ecr.aws/docker/library/busybox:1.36"

// ApplyDefaults fills every unset (zero) value that has a default. Parse calls it before Validate; call it yourself
// on a Config built in code. Negative numbers are left alone so that Validate reports them.
func (c *Config) ApplyDefaults() {
	c.Slack.applyDefaults()
	c.Redis.applyDefaults()
	for i := range c.Clusters {
		c.Clusters[i].applyDefaults()
	}
	for i := range c.Budgets {
		b := &c.Budgets[i]
		setDefault(&b.Window, DefaultBudgetWindow)
		setDefault(&b.TimeZone, DefaultBudgetTimeZone)
	}
	for i := range c.Approvals.Rules {
		r := &c.Approvals.Rules[i]
		if r.Required > 0 && r.ExpiresAfter == 0 {
			r.ExpiresAfter = DefaultApprovalExpiry
		}
	}
	setDefault(&c.Risk.HourlyCost.Medium, DefaultMediumHourlyCost)
	setDefault(&c.Risk.HourlyCost.High, DefaultHighHourlyCost)
	setDefault(&c.Risk.ReservationOutlived, ReservationRefuse)
	setDefault(&c.Risk.ReservationWarnBefore, DefaultReservationWarnBefore)
	setDefault(&c.Pricing.Source, DefaultPricingSource)
	setDefault(&c.Pricing.CacheTTL, DefaultPricingCacheTTL)
	for i := range c.Reports {
		setDefault(&c.Reports[i].Timezone, DefaultReportTimezone)
		setDefault(&c.Reports[i].Samples, DefaultReportSamples)
	}
	setDefault(&c.Server.Listen, DefaultListen)
	setDefault(&c.Server.ReadTimeout, DefaultReadTimeout)
	setDefault(&c.Server.IdleTimeout, DefaultIdleTimeout)
	setDefault(&c.Audit.MaxEntries, DefaultAuditMaxEntries)
	c.MCP.applyDefaults()
	setDefault(&c.Log.Level, DefaultLogLevel)
	setDefault(&c.Log.Format, DefaultLogFormat)
	setDefault(&c.Execution.Workers, DefaultExecWorkers)
	setDefault(&c.Execution.PerCluster, DefaultExecPerCluster)
	setDefault(&c.Execution.Budgets.Kubernetes, DefaultKubernetesBudget)
	setDefault(&c.Execution.Budgets.Capacity, DefaultCapacityBudget)
	setDefault(&c.Execution.Budgets.Bootstrap, DefaultBootstrapBudget)
	setDefault(&c.Execution.HoldUnknown, DefaultHoldUnknown)
	setDefault(&c.Execution.WriteTimeout, DefaultWriteTimeout)
	setDefault(&c.Execution.VerifyWait, DefaultVerifyWait)
	setDefault(&c.Execution.PollInterval, DefaultPollInterval)
	setDefault(&c.Execution.MaxPollInterval, DefaultMaxPollInterval)
	setDefault(&c.Redact.MaxChars, DefaultRedactMaxChars)
}

func (s *Slack) applyDefaults() {
	setDefault(&s.Command, DefaultCommand)
	setDefault(&s.Workers, DefaultWorkers)
	setDefault(&s.QueueSize, DefaultQueueSize)
	setDefault(&s.HandleTimeout, DefaultHandleTimeout)
	if s.ApprovalsChannel == "" && len(s.Channels) > 0 {
		s.ApprovalsChannel = s.Channels[0]
	}
	// slack-go joins method names to the base URL, so it must end with a slash.
	if s.APIURL != "" && !strings.HasSuffix(s.APIURL, "/") {
		s.APIURL += "/"
	}
}

func (m *MCP) applyDefaults() {
	setDefault(&m.ReadTimeout, DefaultReadTimeout)
	setDefault(&m.IdleTimeout, DefaultIdleTimeout)
	setDefault(&m.SessionIdleTimeout, DefaultMCPSessionIdle)
	setDefault(&m.MaxSessionsPerAgent, DefaultMCPSessions)
	setDefault(&m.MaxWaitsPerAgent, DefaultMCPWaits)
}

func (r *Redis) applyDefaults() {
	setDefault(&r.KeyPrefix, DefaultKeyPrefix)
	setDefault(&r.RequestTTL, DefaultRequestTTL)
	setDefault(&r.DedupeTTL, DefaultDedupeTTL)
	setDefault(&r.WaitTimeout, DefaultRedisWaitTimeout)
}

func (cl *Cluster) applyDefaults() {
	setDefault(&cl.Environment, DefaultEnvironment)
	setDefault(&cl.RequestTimeout, DefaultRequestTimeout)
	if cl.DefaultNamespace == "" && len(cl.Namespaces) > 0 {
		cl.DefaultNamespace = cl.Namespaces[0]
	}
	if len(cl.Profiles) == 0 {
		cl.Profiles = map[string]Profile{DefaultProfile: {ServiceAccount: defaultProfileServiceAcc}}
	}
	for name, t := range cl.HyperPod.Templates {
		if t.OnCreate == "" {
			t.OnCreate = DefaultOnCreate
			cl.HyperPod.Templates[name] = t
		}
	}
}

// setDefault sets *v to def when *v is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
