package bot

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// Metrics are the bot's Prometheus series.
type Metrics struct {
	Registry       *prometheus.Registry
	Envelopes      *prometheus.CounterVec
	AckLatency     prometheus.Histogram
	Busy           prometheus.Counter
	Duplicates     prometheus.Counter
	Requests       *prometheus.CounterVec
	Approvals      *prometheus.CounterVec
	Executions     *prometheus.CounterVec
	ExecDuration   *prometheus.HistogramVec
	SlackCalls     *prometheus.CounterVec
	SlackLimited   *prometheus.CounterVec
	RedisErrors    prometheus.Counter
	WatchedObjects prometheus.Gauge
	QueueDepth     prometheus.GaugeFunc
	Told           prometheus.Counter
	TellFailures   prometheus.Counter
	Undelivered    *prometheus.CounterVec
	EngineErrors   prometheus.Counter
	Panics         prometheus.Counter
	MCPCalls       *prometheus.CounterVec
	MCPLimited     *prometheus.CounterVec
	// HomePublishes counts views.publish of Home tabs by outcome; HomeSkipped the refreshes whose view was the
	// one published already; HomeCoalesced the refreshes joined to one pending for the same viewer.
	HomePublishes *prometheus.CounterVec
	HomeSkipped   prometheus.Counter
	HomeCoalesced prometheus.Counter
	// HomeTouched is how many viewers' Homes each change of a request touched.
	HomeTouched prometheus.Histogram
}

// NewMetrics registers the series on a new registry; queueDepth reports the worker queue's length.
func NewMetrics(queueDepth func() float64) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.Envelopes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_envelopes_total", Help: "Socket Mode envelopes received, by type."}, []string{"type"})
	m.AckLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hyperops_ack_latency_seconds", Help: "Time from reading an envelope to queueing its ack.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .05, .1, .5, 1, 3}})
	m.Busy = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_envelopes_busy_total", Help: "Envelopes refused because the worker queue was full."})
	m.Duplicates = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_envelopes_duplicate_total", Help: "Redelivered envelopes and retried events dropped."})
	m.Requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_requests_total", Help: "Request transitions, by operation and the phase entered."}, []string{"operation", "phase"})
	m.Approvals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_approvals_total", Help: "Votes recorded, by decision."}, []string{"decision"})
	m.Executions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_executions_total", Help: "Executions finished, by operation and result."}, []string{"operation", "result"})
	m.ExecDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hyperops_execution_duration_seconds", Help: "How long executions ran.",
		Buckets: prometheus.ExponentialBuckets(0.05, 3, 10)}, []string{"operation"})
	m.SlackCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_slack_api_calls_total", Help: "Slack Web API calls, by method and outcome."}, []string{"method", "outcome"})
	m.SlackLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_slack_api_rate_limited_total", Help: "Slack Web API calls answered 429, by method."}, []string{"method"})
	m.RedisErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_redis_errors_total", Help: "Redis commands that failed (not counting nil answers)."})
	m.WatchedObjects = prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperops_watched_objects", Help: "Objects whose status changes are told in Slack threads."})
	m.QueueDepth = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hyperops_worker_queue_depth", Help: "Acked envelopes waiting for a worker."}, queueDepth)
	m.Told = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_outbox_told_total", Help: "Request history entries told from the outbox."})
	m.TellFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_outbox_tell_failures_total", Help: "Attempts to tell an entry that failed (retried later)."})
	m.Undelivered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_slack_undelivered_total",
		Help: "Messages about a request that Slack refused for good (given up, the requester told), by part and Slack error."}, []string{"part", "code"})
	m.EngineErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_engine_errors_total", Help: "Failures no caller waited for: queue, progress, panics."})
	m.Panics = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_handler_panics_total", Help: "Envelopes whose handling panicked (logged with the stack)."})
	m.MCPCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_mcp_calls_total",
		Help: "MCP tool calls, by tool and the code of the answer (OK or the first error code)."}, []string{"tool", "code"})
	m.MCPLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_mcp_limited_total",
		Help: "MCP initialize calls, waits and subscriptions refused over a limit, by its configuration key."}, []string{"limit"})
	m.HomePublishes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hyperops_home_publishes_total",
		Help: "Home tabs published (views.publish), by outcome."}, []string{"outcome"})
	m.HomeSkipped = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_home_skipped_total",
		Help: "Home refreshes not sent: the view was the one published already."})
	m.HomeCoalesced = prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperops_home_coalesced_total",
		Help: "Home refreshes joined to one already pending for the same viewer."})
	m.HomeTouched = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hyperops_home_touched_viewers",
		Help: "How many viewers' Home tabs one change of a request touched.", Buckets: []float64{0, 1, 2, 5, 10, 20, 50, 100, 500}})
	m.Registry.MustRegister(m.MCPLimited, m.HomePublishes, m.HomeSkipped, m.HomeCoalesced, m.HomeTouched)
	m.Registry.MustRegister(m.Panics, m.Envelopes, m.AckLatency, m.Busy, m.Duplicates, m.Requests, m.Approvals, m.Executions, m.ExecDuration,
		m.SlackCalls, m.SlackLimited, m.RedisErrors, m.WatchedObjects, m.QueueDepth, m.Told, m.TellFailures, m.Undelivered, m.EngineErrors, m.MCPCalls)
	return m
}

func (m *Metrics) slackCall(method string, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	var rl *slack.RateLimitedError
	switch {
	case errors.As(err, &rl):
		outcome = "rate_limited"
		m.SlackLimited.WithLabelValues(method).Inc()
	case err != nil:
		outcome = "error"
	}
	m.SlackCalls.WithLabelValues(method, outcome).Inc()
}

// transition counts a stored transition: requests by phase, votes, and finished executions with their duration.
func (m *Metrics) transition(rec *ops.Record, t ops.Transition) {
	if m == nil {
		return
	}
	op := rec.Request.Operation
	m.Requests.WithLabelValues(op, string(t.To)).Inc()
	switch {
	case t.To == ops.PhaseDenied:
		m.Approvals.WithLabelValues("deny").Inc()
	case t.From == ops.PhaseAwaitingApproval && (t.To == ops.PhaseApproved || t.To == ops.PhaseAwaitingApproval) && t.By.Kind != ops.System:
		m.Approvals.WithLabelValues("approve").Inc()
	}
	if t.From == ops.PhaseExecuting && (t.To == ops.PhaseSucceeded || t.To == ops.PhaseFailed) {
		m.Executions.WithLabelValues(op, string(t.To)).Inc()
		if start, ok := executingSince(rec); ok {
			m.ExecDuration.WithLabelValues(op).Observe(t.At.Sub(start).Seconds())
		}
	}
}

func executingSince(rec *ops.Record) (time.Time, bool) {
	for _, h := range rec.History {
		if h.To == ops.PhaseExecuting && h.From != ops.PhaseExecuting {
			return h.At, true
		}
	}
	return time.Time{}, false
}
