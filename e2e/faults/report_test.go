package faults

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/ops"
)

// reportPosted is the final state of a capacity report cell: it has no record, only its message.
const reportPosted ops.Phase = "report posted"

// reportFaults are the capacity report's columns: it reads the cluster, AWS and Redis, and writes nothing.
var reportFaults = []fault{
	{name: "none"},
	{name: "kube: 429 Retry-After 1 on listing nodes", arm: func(t *testing.T, w *world, c *run) {
		c.fired = w.kube.Inject(faultproxy.Rule{Verb: "list", Resource: "nodes", Action: faultproxy.Answer,
			Status: http.StatusTooManyRequests, RetryAfter: 1, Times: 1})
	}},
	redisLatency,
}

// runReportCell asks for a capacity report under f: it is posted once, and writes nothing at
// the API server or AWS.
func runReportCell(t *testing.T, f fault) result {
	w := newWorld(t, f.world)
	ctx := t.Context()
	c := &run{name: randomName("report"), done: make(chan struct{})}
	defer close(c.done)
	if f.arm != nil {
		f.arm(t, w, c)
	}
	if _, err := w.Slash(ctx, harness.Alice, harness.OpsChannel, "report capacity cluster="+harness.Cluster); err != nil {
		t.Fatal(err)
	}
	isReport := func(m fakeslack.Message) bool {
		return m.ThreadTS == "" && strings.HasPrefix(m.Text, "Capacity report: "+harness.Cluster)
	}
	if _, err := w.WaitMessage(ctx, patience, harness.OpsChannel, isReport); err != nil {
		t.Fatalf("the report was never posted: %v\n%s", err, tail(w.log.String(), 30))
	}
	res := result{op: "capacity report", fault: f.name, phase: reportPosted, told: "once"}
	n := 0
	for _, m := range w.Slack.Snapshot().Messages[harness.OpsChannel] {
		if isReport(m) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the report was posted %d times, want once", n)
		res.told = "twice"
	}
	for _, wr := range w.kube.AllWrites() {
		if wr.Accepted() {
			res.writes++
			t.Errorf("a report wrote to the cluster: %+v", wr)
		}
	}
	res.writes += w.AWS.Applied(fakeaws.OpSageMakerUpdateCluster) + w.AWS.Applied(fakeaws.OpEKSUpdateNodegroupConfig)
	if c.fired != nil && c.fired() == 0 {
		t.Errorf("the fault %q never struck: the cell tested nothing", f.name)
	}
	return res
}
