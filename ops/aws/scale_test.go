package aws

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/pricing"
)

func TestScaleHyperPodGroup(t *testing.T) {
	cases := []struct {
		name     string
		from, to int
		steps    []string // progress fragments that must have been reported
	}{
		{"scale up", 2, 6, []string{"UpdateCluster accepted: gpu 2 → 6", "6/6 InService (cluster InService)"}},
		{"scale down", 6, 3, []string{"UpdateCluster accepted: gpu 6 → 3", "3 instances left, target 3 (cluster InService)"}},
		{"scale to zero", 2, 0, []string{"UpdateCluster accepted: gpu 2 → 0", "0 instances left, target 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{gpuCount: tc.from})
			before, _ := f.srv.HyperPodCluster("ml-hp")
			rec, err := f.engine.Submit(ctxT(t), scaleRequest("scale-1", testCluster, "gpu", tc.to))
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("phase %s, errors %v", rec.Phase, rec.Errors)
			}
			after, _ := f.srv.HyperPodCluster("ml-hp")
			if after.Status != fakeaws.StatusInService {
				t.Errorf("cluster status %s", after.Status)
			}
			for i, g := range after.InstanceGroups {
				want := before.InstanceGroups[i]
				if g.Name == "gpu" {
					want.Count, want.CurrentCount = tc.to, tc.to
				}
				// Only the count may change: the group's role, lifecycle script and type go back as they were.
				if g.Count != want.Count || g.CurrentCount != want.CurrentCount || g.Type != want.Type ||
					g.ExecutionRole != want.ExecutionRole || g.LifecycleS3URI != want.LifecycleS3URI || g.OnCreate != want.OnCreate {
					t.Errorf("group %s after scaling = %+v, want %+v", g.Name, g, want)
				}
			}
			for _, s := range tc.steps {
				if !f.progress.has(s) {
					t.Errorf("no progress step %q in %q", s, f.progress.All())
				}
			}
			var res ScaleResult
			must(t, json.Unmarshal(rec.Result.Data, &res))
			if res.From != tc.from || res.To != tc.to || res.Current != tc.to || res.Status != "InService" || res.Kind != KindHyperPodGroup {
				t.Errorf("result data %+v", res)
			}
			if k := f.nodes.count(testCluster, "gpu"); k != tc.to {
				t.Errorf("Kubernetes sees %d gpu nodes, want %d", k, tc.to)
			}
		})
	}
}

// TestScalePlanCost pins Δ instances, Δ $/h and Δ $/30 days from the built-in table, and the risk of each size.
func TestScalePlanCost(t *testing.T) {
	cases := []struct {
		name      string
		to        int
		qty       float64
		hourly    float64
		monthly   float64
		risk      ops.Level
		riskWords string
	}{
		// 4 × 113.068 = 452.272 $/h; × 720 h = 325,635.84 $/30 days; ≥ $50/h is medium.
		{"ml.p5.48xlarge 2→6", 6, 4, 452.272, 325635.84, ops.RiskMedium, "adds $452.27/h"},
		// 10 × 113.068 = 1,130.68 $/h: above the $500/h high threshold.
		{"ml.p5.48xlarge 2→12", 12, 10, 1130.68, 814089.6, ops.RiskHigh, "high threshold"},
		{"scale down 2→1", 1, -1, -113.068, -81408.96, ops.RiskHigh, "scale down: removes 1 of 2"},
		{"scale to zero 2→0", 0, -2, -226.136, -162817.92, ops.RiskCritical, "scales gpu to zero"},
	}
	f := newFixture(t, fixtureOptions{})
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := scaleRequest("plan-"+string(rune('a'+i)), testCluster, "gpu", tc.to)
			req.DryRun = true
			rec, err := f.engine.Submit(ctxT(t), req)
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if rec.Phase != ops.PhaseDone {
				t.Fatalf("phase %s", rec.Phase)
			}
			p := rec.Plan
			if len(p.Cost.Lines) != 1 {
				t.Fatalf("cost lines %+v", p.Cost.Lines)
			}
			l := p.Cost.Lines[0]
			if l.Quantity != tc.qty || l.UnitPrice != priceP5 || !near(l.Hourly, tc.hourly) {
				t.Errorf("cost line %+v, want %v × %v = %v", l, tc.qty, priceP5, tc.hourly)
			}
			if !near(p.Cost.HourlyDelta, tc.hourly) || !near(p.Cost.MonthlyDelta, tc.monthly) {
				t.Errorf("Δ $/h %v, Δ $/30 days %v; want %v and %v", p.Cost.HourlyDelta, p.Cost.MonthlyDelta, tc.hourly, tc.monthly)
			}
			// ml.p5.48xlarge has 8 GPUs: budgets charge Δ instances × 8.
			if p.Cost.GPUs != int(tc.qty)*8 {
				t.Errorf("Δ GPUs %d, want %d", p.Cost.GPUs, int(tc.qty)*8)
			}
			if p.Cost.Source != pricing.BuiltinSource {
				t.Errorf("cost source %q", p.Cost.Source)
			}
			if p.Risk.Level != tc.risk || !hasReason(p.Risk, tc.riskWords) {
				t.Errorf("risk %s %+v, want %s with %q", p.Risk.Level, p.Risk.Reasons, tc.risk, tc.riskWords)
			}
			want := ops.FieldChange{Path: "InstanceCount", From: "2", To: itoa(tc.to)}
			if len(p.Changes) != 1 || p.Changes[0].Action != ops.ActionUpdate || p.Changes[0].Fields[0] != want {
				t.Errorf("changes %+v, want %+v", p.Changes, want)
			}
			if !strings.Contains(p.Observed, "current=2 target=2") || !strings.Contains(p.Observed, "clusterStatus=InService") {
				t.Errorf("observed %q", p.Observed)
			}
		})
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerUpdateCluster); n != 0 {
		t.Errorf("dry runs called UpdateCluster %d times", n)
	}
}

// The plan hash binds the approval to AWS's state: when the group changes, so does the hash.
func TestScalePlanHashFollowsAWSState(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	op, _ := f.catalog.Lookup(OpScaleCapacity)
	req := scaleRequest("hash", testCluster, "gpu", 5)
	p1, err := op.Plan(ctxT(t), &req)
	must(t, err)
	p1again, err := op.Plan(ctxT(t), &req)
	must(t, err)
	if ops.HashPlan(req, p1) != ops.HashPlan(req, p1again) {
		t.Fatal("two plans of an unchanged group hash differently")
	}
	other := scaleRequest("other", testCluster, "gpu", 3)
	if _, err := f.engine.Submit(ctxT(t), other); err != nil {
		t.Fatal(err)
	}
	p2, err := op.Plan(ctxT(t), &req)
	must(t, err)
	if ops.HashPlan(req, p1) == ops.HashPlan(req, p2) {
		t.Errorf("plan hash unchanged after the group went from 2 to 3: %s", p2.Observed)
	}
	if p2.Changes[0].Fields[0].From != "3" || !near(p2.Cost.HourlyDelta, 2*priceP5) {
		t.Errorf("replanned %+v cost %v", p2.Changes, p2.Cost.HourlyDelta)
	}
}

func TestScaleRefusals(t *testing.T) {
	cases := []struct {
		name    string
		status  string
		cluster string
		group   string
		count   any
		code    ops.Code
		field   string
		words   []string
	}{
		{name: "instance type not allowed", group: "a100", count: 2, code: ops.CodeInstanceTypeNotAllow, field: "group",
			words: []string{"ml.p4d.24xlarge", "instanceTypes", testCluster}},
		{name: "count above the cap", group: "gpu", count: 17, code: ops.CodeQuotaExceeded, field: "count",
			words: []string{"count=17", "limits.maxNodesPerGroup=16"}},
		{name: "negative count", group: "gpu", count: -1, code: ops.CodeInvalidArgument, field: "count", words: []string{"negative"}},
		{name: "cluster not InService", status: fakeaws.StatusUpdating, group: "gpu", count: 4, code: ops.CodeClusterUnavailable,
			field: "cluster", words: []string{"HyperPod cluster ml-hp is Updating", "needs InService"}},
		{name: "cluster failed", status: fakeaws.StatusFailed, group: "gpu", count: 4, code: ops.CodeClusterUnavailable,
			field: "cluster", words: []string{"ml-hp is Failed"}},
		{name: "unknown group", group: "gpus", count: 4, code: ops.CodeNotFound, field: "group",
			words: []string{`"gpus"`}},
		{name: "unregistered cluster", cluster: "ml-nope", group: "gpu", count: 4, code: ops.CodeUnknownCluster, field: "cluster"},
		{name: "count not a number", group: "gpu", count: "many", code: ops.CodeInvalidArgument, field: "count"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{hyperPodStatus: tc.status})
			cluster := tc.cluster
			if cluster == "" {
				cluster = testCluster
			}
			rec, err := f.engine.Submit(ctxT(t), scaleRequest("refused", cluster, tc.group, tc.count))
			if codeOf(err) != tc.code {
				t.Fatalf("error %v, want %s", err, tc.code)
			}
			ue := asOpsError(t, err)
			if ue.Field != tc.field || ue.Next == "" {
				t.Errorf("field %q next %q, want field %q and a next step", ue.Field, ue.Next, tc.field)
			}
			for _, w := range tc.words {
				if !strings.Contains(ue.Message, w) {
					t.Errorf("message %q does not name %q", ue.Message, w)
				}
			}
			if rec != nil && rec.Phase != ops.PhaseRejected {
				t.Errorf("phase %s, want rejected", rec.Phase)
			}
			if n := f.srv.Calls(fakeaws.OpSageMakerUpdateCluster); n != 0 {
				t.Errorf("UpdateCluster called %d times", n)
			}
		})
	}
	t.Run("unknown group suggests the closest", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{})
		_, err := f.engine.Submit(ctxT(t), scaleRequest("typo", testCluster, "gpus", 3))
		if ue := asOpsError(t, err); !strings.Contains(ue.Next, "did you mean gpu?") || !strings.Contains(ue.Next, "cpu") {
			t.Errorf("next %q", ue.Next)
		}
	})
}

// A second scaling of a group while the first runs is refused with E_LOCKED naming the first request.
func TestScaleConcurrentSameGroupIsLocked(t *testing.T) {
	f := newFixture(t, fixtureOptions{transitionDelay: 300 * time.Millisecond})
	type outcome struct {
		rec *ops.Record
		err error
	}
	first := make(chan outcome, 1)
	go func() {
		rec, err := f.engine.Submit(ctxT(t), scaleRequest("scale-first", testCluster, "gpu", 4))
		first <- outcome{rec, err}
	}()
	scope := ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: "gpu"}
	opstest.Eventually(t, 5*time.Second, "the first request to hold the lock", func() bool {
		h, held, _ := f.store.Holder(ctxT(t), scope)
		return held && h == "scale-first"
	})
	rec, err := f.engine.Submit(ctxT(t), scaleRequest("scale-second", testCluster, "gpu", 8))
	ue := asOpsError(t, err)
	if ue.Code != ops.CodeLocked || ue.Holder != "scale-first" || !strings.Contains(ue.Message, "scale-first") {
		t.Errorf("second request: %+v, want E_LOCKED held by scale-first", ue)
	}
	if rec == nil || rec.Phase != ops.PhaseRejected {
		t.Errorf("second record %+v", rec)
	}
	// Another group of the same cluster is not blocked by that lock.
	other, err := f.engine.Submit(ctxT(t), func() ops.Request {
		r := scaleRequest("scale-cpu", testCluster, "cpu", 3)
		r.DryRun = true
		return r
	}())
	if err != nil || other.Phase != ops.PhaseDone {
		t.Errorf("dry run of another group: %v %v", err, other)
	}
	got := <-first
	if got.err != nil || got.rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("first request: %v %+v", got.err, got.rec)
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster called %d times, want 1", n)
	}
	hp, _ := f.srv.HyperPodCluster("ml-hp")
	if hp.InstanceGroups[0].Count != 4 {
		t.Errorf("gpu count %d, want 4", hp.InstanceGroups[0].Count)
	}
}

func TestScaleThrottledThenSucceeds(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.srv.Fail(fakeaws.OpSageMakerUpdateCluster, 2, "ThrottlingException", 400, "Rate exceeded")
	rec, err := f.engine.Submit(ctxT(t), scaleRequest("throttled", testCluster, "gpu", 3))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit: %v %+v", err, rec)
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerUpdateCluster); n != 3 {
		t.Errorf("UpdateCluster reached AWS %d times, want 2 throttled + 1 served", n)
	}
	hp, _ := f.srv.HyperPodCluster("ml-hp")
	if hp.InstanceGroups[0].Count != 3 {
		t.Errorf("gpu count %d", hp.InstanceGroups[0].Count)
	}
}

var requestIDRE = regexp.MustCompile(`request id ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\)`)

func TestAWSErrorsSurfaceClearly(t *testing.T) {
	const denied = "User: arn:aws:sts::123456789012:assumed-role/hyperops/bot is not authorized to perform: sagemaker:UpdateCluster"
	cases := []struct {
		name     string
		op       string
		code     string
		status   int
		message  string
		req      ops.Request
		next     string
		maxCalls int
	}{
		{"AccessDenied on UpdateCluster", fakeaws.OpSageMakerUpdateCluster, "AccessDeniedException", 403, denied,
			scaleRequest("denied", testCluster, "gpu", 4), "sagemaker:UpdateCluster", 1},
		{"ValidationException on UpdateCluster", fakeaws.OpSageMakerUpdateCluster, "ValidationException", 400,
			"1 validation error detected", scaleRequest("invalid", testCluster, "gpu", 4), "fix the named value", 1},
		{"AccessDenied on EKS UpdateNodegroupConfig", fakeaws.OpEKSUpdateNodegroupConfig, "AccessDeniedException", 403,
			"not authorized to perform: eks:UpdateNodegroupConfig", scaleRequest("denied-eks", testCluster, "cpu", 3),
			"eks:UpdateNodegroupConfig", 1},
		{"AccessDenied on DescribeCluster for get-capacity", fakeaws.OpSageMakerDescribeCluster, "AccessDeniedException", 403,
			"not authorized to perform: sagemaker:DescribeCluster",
			ops.Request{Operation: OpGetCapacity, Target: ops.Target{Cluster: testCluster}, Initiator: human("U0BOB")},
			"sagemaker:DescribeCluster", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			if tc.op == fakeaws.OpSageMakerDescribeCluster {
				f.srv.Fail(tc.op, 1, tc.code, tc.status, tc.message)
			} else {
				f.srv.Fail(tc.op, -1, tc.code, tc.status, tc.message)
			}
			before := f.srv.Calls(tc.op)
			rec, err := f.engine.Submit(ctxT(t), tc.req)
			ue := asOpsError(t, err)
			if ue.Code != ops.CodeAWSError {
				t.Fatalf("code %s (%v)", ue.Code, err)
			}
			for _, w := range []string{tc.message, tc.code} {
				if !strings.Contains(ue.Message, w) {
					t.Errorf("message %q lacks %q", ue.Message, w)
				}
			}
			m := requestIDRE.FindStringSubmatch(ue.Message)
			var f2 *APIFailure
			if m == nil || !errors.As(err, &f2) || f2.RequestID != m[1] || f2.Code != tc.code {
				t.Errorf("request id not surfaced: message %q, cause %+v", ue.Message, f2)
			}
			if !strings.Contains(ue.Next, tc.next) {
				t.Errorf("next %q lacks %q", ue.Next, tc.next)
			}
			if rec == nil || (rec.Phase != ops.PhaseFailed && rec.Phase != ops.PhaseRejected) {
				t.Errorf("record %+v", rec)
			}
			if n := f.srv.Calls(tc.op) - before; n > tc.maxCalls {
				t.Errorf("%s retried: %d calls", tc.op, n)
			}
		})
	}
}

func TestScaleEKSNodegroup(t *testing.T) {
	cases := []struct {
		name             string
		to               int
		wantMin, wantMax int
		fields           []ops.FieldChange
		risk             ops.Level
		hourly           float64
	}{
		{"up beyond max raises max", 6, 1, 6, []ops.FieldChange{
			{Path: "scalingConfig.desiredSize", From: "2", To: "6"}, {Path: "scalingConfig.maxSize", From: "4", To: "6"}},
			ops.RiskLow, 4 * 5.672},
		{"down below min lowers min", 0, 0, 4, []ops.FieldChange{
			{Path: "scalingConfig.desiredSize", From: "2", To: "0"}, {Path: "scalingConfig.minSize", From: "1", To: "0"}},
			ops.RiskCritical, -2 * 5.672},
		{"within bounds", 3, 1, 4, []ops.FieldChange{{Path: "scalingConfig.desiredSize", From: "2", To: "3"}}, ops.RiskLow, 5.672},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			rec, err := f.engine.Submit(ctxT(t), scaleRequest("eks", testCluster, "cpu", tc.to))
			if err != nil || rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("Submit: %v %+v", err, rec)
			}
			p := rec.Plan
			if len(p.Changes) != 1 || p.Changes[0].Kind != KindEKSNodegroup || !equalFields(p.Changes[0].Fields, tc.fields) {
				t.Errorf("changes %+v, want fields %+v", p.Changes, tc.fields)
			}
			if p.Risk.Level != tc.risk || !near(p.Cost.HourlyDelta, tc.hourly) {
				t.Errorf("risk %s, Δ $/h %v; want %s, %v", p.Risk.Level, p.Cost.HourlyDelta, tc.risk, tc.hourly)
			}
			ng, _ := f.srv.Nodegroup("ml-eks", "cpu")
			if ng.DesiredSize != tc.to || ng.MinSize != tc.wantMin || ng.MaxSize != tc.wantMax || ng.Status != "ACTIVE" || len(ng.Nodes) != tc.to {
				t.Errorf("node group %+v (nodes %d)", ng, len(ng.Nodes))
			}
			if !f.progress.has("UpdateNodegroupConfig accepted: cpu desiredSize 2 → "+itoa(tc.to)) ||
				!f.progress.has("update Successful", "node group ACTIVE", itoa(tc.to)+"/"+itoa(tc.to)+" nodes Ready") {
				t.Errorf("progress %q", f.progress.All())
			}
		})
	}
}

func TestScaleFailureIsReported(t *testing.T) {
	t.Run("HyperPod FailureMessage", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{})
		f.srv.FailNextUpdate("ml-hp", "InsufficientInstanceCapacity: not enough ml.p5.48xlarge capacity in us-west-2a")
		rec, err := f.engine.Submit(ctxT(t), scaleRequest("fails", testCluster, "gpu", 8))
		ue := asOpsError(t, err)
		if ue.Code != ops.CodeAWSError || !strings.Contains(ue.Message, "not enough ml.p5.48xlarge capacity") || rec.Phase != ops.PhaseFailed {
			t.Errorf("error %+v phase %s", ue, rec.Phase)
		}
		// The thread heard it from HyperPod's events too, before the outcome.
		if evs := told(rec, "HyperPod error"); len(evs) != 1 || !strings.Contains(evs[0], "instance group gpu: scaling failed: InsufficientInstanceCapacity") {
			t.Errorf("error events told %q, want the failed scaling once", evs)
		}
	})
	t.Run("EKS update failed", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{})
		must(t, f.srv.FailNextNodegroupUpdate("ml-eks", "cpu", "Could not launch On-Demand Instances"))
		rec, err := f.engine.Submit(ctxT(t), scaleRequest("fails-eks", testCluster, "cpu", 4))
		ue := asOpsError(t, err)
		if ue.Code != ops.CodeAWSError || !strings.Contains(ue.Message, "NodeCreationFailure: Could not launch") || rec.Phase != ops.PhaseFailed {
			t.Errorf("error %+v phase %s", ue, rec.Phase)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{transitionDelay: time.Hour})
		f.clients.WaitTimeout = 50 * time.Millisecond
		rec, err := f.engine.Submit(ctxT(t), scaleRequest("slow", testCluster, "gpu", 3))
		ue := asOpsError(t, err)
		if ue.Code != ops.CodeAWSError || !strings.Contains(ue.Message, "gave up after 50ms") ||
			!strings.Contains(ue.Message, "2/3 InService (cluster Updating)") || rec.Phase != ops.PhaseFailed {
			t.Errorf("error %+v phase %s", ue, rec.Phase)
		}
	})
}

// Re-running an execution (after an interruption) does not ask AWS twice: it waits for the change in flight.
func TestScaleExecuteIsIdempotent(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	op, _ := f.catalog.Lookup(OpScaleCapacity)
	for i, req := range []ops.Request{scaleRequest("again", testCluster, "gpu", 3), scaleRequest("again", testCluster, "cpu", 3)} {
		for range 2 {
			if _, err := op.Execute(ctxT(t), &req, nil, ops.Execution{}); err != nil {
				t.Fatalf("Execute: %v", err)
			}
		}
		calls := f.srv.Calls(fakeaws.OpSageMakerUpdateCluster) + f.srv.Calls(fakeaws.OpEKSUpdateNodegroupConfig)
		if calls != i+1 {
			t.Errorf("after two runs of %s: %d update calls, want %d", req.Params.String("group"), calls, i+1)
		}
		obs, err := op.(ops.Observer).Observe(ctxT(t), &req)
		must(t, err)
		if !strings.Contains(obs.Summary, "target 3 (asked 3)") {
			t.Errorf("observe: %s", obs.Summary)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func itoa(n int) string { return strconv.Itoa(n) }

func hasReason(r ops.Risk, words string) bool {
	for _, reason := range r.Reasons {
		if strings.Contains(reason.Text, words) {
			return true
		}
	}
	return false
}

func equalFields(a, b []ops.FieldChange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A plan is made from one reading of AWS: Validate's answer serves Plan (readings.Once under the engine's readings),
// so a HyperPod scale describes its cluster once before approval. The execution then reads afresh: the re-check
// before the write and the wait for the new count each call DescribeCluster again.
func TestScaleReadsAWSOncePerPlan(t *testing.T) {
	cases := []struct {
		name, group string
		calls       map[string]int // calls each op gets for a dry run
	}{
		{"HyperPod instance group", "gpu", map[string]int{fakeaws.OpSageMakerDescribeCluster: 1, fakeaws.OpEKSDescribeCluster: 0}},
		// An EKS group is looked for among the HyperPod groups first, then among the node groups.
		{"EKS node group", "cpu", map[string]int{fakeaws.OpSageMakerDescribeCluster: 1, fakeaws.OpEKSDescribeCluster: 1,
			fakeaws.OpEKSDescribeNodegroup: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			req := scaleRequest("dry-"+tc.group, testCluster, tc.group, 3)
			req.DryRun = true
			rec, err := f.engine.Submit(ctxT(t), req)
			if err != nil || rec.Phase != ops.PhaseDone || rec.Plan == nil {
				t.Fatalf("dry run: phase %v, err %v", rec, err)
			}
			for op, want := range tc.calls {
				if n := f.srv.Calls(op); n != want {
					t.Errorf("a dry run called %s %d times, want %d", op, n, want)
				}
			}

			before := f.srv.Calls(fakeaws.OpSageMakerDescribeCluster)
			rec, err = f.engine.Submit(ctxT(t), scaleRequest("run-"+tc.group, testCluster, tc.group, 3))
			if err != nil || rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("scale: %v, err %v", rec, err)
			}
			// Validate and Plan: 1; the re-check before the write: 1; the wait: at least 1 more.
			if n := f.srv.Calls(fakeaws.OpSageMakerDescribeCluster) - before; tc.group == "gpu" && n < 3 {
				t.Errorf("the scale called DescribeCluster %d times: the execution reused the plan's reading", n)
			}
		})
	}
}
