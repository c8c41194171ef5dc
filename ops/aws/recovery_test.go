package aws

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
)

func recoveryRequest(id, op string, params ops.Params) ops.Request {
	if _, ok := params["group"]; !ok {
		params["group"] = "gpu"
	}
	return ops.Request{ID: id, Operation: op, Target: ops.Target{Cluster: testCluster}, Params: params, Initiator: human("U0ALICE")}
}

// gpuIDs is the instance ids of ml-hp's gpu group, as the fake has them now.
func (f *fixture) gpuIDs(t *testing.T) []string {
	t.Helper()
	hp, ok := f.srv.HyperPodCluster("ml-hp")
	if !ok {
		t.Fatal("ml-hp not seeded")
	}
	var ids []string
	for _, n := range hp.InstanceGroups[0].Nodes {
		ids = append(ids, n.InstanceID)
	}
	return ids
}

// Rebooting and replacing a faulty node: one Batch call, the plan names the node and its reason, the thread is told
// the node's progress, and the request ends when the node is back (reboot) or its replacement runs (replace).
func TestRecoverFaultyNode(t *testing.T) {
	cases := []struct {
		name   string
		op     string
		call   string
		byID   bool
		risk   ops.Level
		steps  []string
		result string
	}{
		{"reboot by id", OpRebootNodes, fakeaws.OpSageMakerBatchRebootClusterNodes, true, ops.RiskMedium,
			[]string{"BatchRebootClusterNodes accepted", "Pending (Rebooting)", "Running"}, "Running again"},
		{"replace the faulty ones", OpReplaceNodes, fakeaws.OpSageMakerBatchReplaceClusterNodes, false, ops.RiskHigh,
			[]string{"BatchReplaceClusterNodes accepted", "ShuttingDown (Replacing)", "gone", "Running"}, "the group has 2 instances"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			ids := f.gpuIDs(t)
			faulty := ids[0]
			must(t, f.srv.MarkNodeFaulty("ml-hp", faulty, "GPU XID 79: fallen off the bus"))
			params := ops.Params{"faulty": true}
			if tc.byID {
				params = ops.Params{"nodes": faulty}
			}
			start := time.Now()
			rec, err := f.engine.Submit(ctxT(t), recoveryRequest("recover", tc.op, params))
			if err != nil || rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("Submit: %v, phase %v", err, rec.Phase)
			}
			if took := time.Since(start); took < 150*time.Millisecond {
				t.Errorf("ended after %s, before the fake's recovery could finish", took)
			}
			p := rec.Plan
			if len(p.Changes) != 1 || p.Changes[0].Name != faulty || !strings.Contains(p.Changes[0].Fields[0].From, "Failure (GPU XID 79") {
				t.Errorf("plan changes %+v, want the faulty node with its reason", p.Changes)
			}
			if p.Risk.Level != tc.risk || p.Cost.HourlyDelta != 0 {
				t.Errorf("risk %s, Δ $/h %v; want %s and nothing added", p.Risk.Level, p.Cost.HourlyDelta, tc.risk)
			}
			if tc.op == OpReplaceNodes && !strings.Contains(p.Summary, "no added hourly cost") {
				t.Errorf("summary %q does not say the count is kept at no added cost", p.Summary)
			}
			if n := f.srv.Calls(tc.call); n != 1 {
				t.Errorf("%s called %d times, want 1", tc.call, n)
			}
			for _, s := range tc.steps {
				if !f.progress.has(s) {
					t.Errorf("no progress step %q in %q", s, f.progress.All())
				}
			}
			var res RecoveryResult
			must(t, json.Unmarshal(rec.Result.Data, &res))
			if !strings.Contains(rec.Result.Summary, tc.result) || !slices.Equal(res.Nodes, []string{faulty}) {
				t.Errorf("result %q %+v", rec.Result.Summary, res)
			}
			now := f.gpuIDs(t)
			hp, _ := f.srv.HyperPodCluster("ml-hp")
			for _, n := range hp.InstanceGroups[0].Nodes {
				if n.Status != "Running" {
					t.Errorf("node %s is %s after the request succeeded", n.InstanceID, n.Status)
				}
			}
			if tc.op == OpReplaceNodes {
				if len(now) != 2 || slices.Contains(now, faulty) || len(res.NewNodes) != 1 || !slices.Contains(now, res.NewNodes[0]) {
					t.Errorf("gpu instances %v, new %v; want 2 with the faulty one replaced", now, res.NewNodes)
				}
				if k := f.nodes.count(testCluster, "gpu"); k != 2 {
					t.Errorf("Kubernetes sees %d gpu nodes, want the count kept at 2", k)
				}
			}
		})
	}
}

// A healthy node taken down raises the risk: whatever runs on it is interrupted.
func TestRecoverHealthyNodeRaisesRisk(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	req := recoveryRequest("healthy", OpRebootNodes, ops.Params{"nodes": f.gpuIDs(t)[1]})
	req.DryRun = true
	rec, err := f.engine.Submit(ctxT(t), req)
	if err != nil || rec.Phase != ops.PhaseDone {
		t.Fatalf("Submit: %v %v", err, rec)
	}
	if rec.Plan.Risk.Level != ops.RiskHigh || !hasReason(rec.Plan.Risk, "Running and healthy") {
		t.Errorf("risk %s %+v, want high for a healthy node", rec.Plan.Risk.Level, rec.Plan.Risk.Reasons)
	}
	if f.srv.Calls(fakeaws.OpSageMakerBatchRebootClusterNodes) != 0 {
		t.Error("a dry run rebooted")
	}
}

// The answer to the Batch call is lost after AWS acted: the nodes' state shows it took effect, so the call is not
// sent again and the request is observed to the end.
func TestRecoverLostAnswerIsReadBack(t *testing.T) {
	for _, tc := range []struct{ op, call string }{
		{OpRebootNodes, fakeaws.OpSageMakerBatchRebootClusterNodes},
		{OpReplaceNodes, fakeaws.OpSageMakerBatchReplaceClusterNodes},
	} {
		t.Run(tc.op, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{writeTimeout: 300 * time.Millisecond, recoveryDuration: time.Second})
			faulty := f.gpuIDs(t)[0]
			must(t, f.srv.MarkNodeFaulty("ml-hp", faulty, "DCGM diagnostic failed"))
			f.srv.Inject(fakeaws.Fault{Op: tc.call, When: fakeaws.FaultAfter, Status: 500, Code: "InternalFailure",
				Message: "We encountered an internal error.", Times: 1})
			rec, err := f.engine.Submit(ctxT(t), recoveryRequest("lost", tc.op, ops.Params{"faulty": true}))
			if err != nil || rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("Submit: %v, phase %v; want succeeded", err, rec.Phase)
			}
			if calls, applied := f.srv.Calls(tc.call), f.srv.Applied(tc.call); calls != 1 || applied != 1 {
				t.Errorf("%s sent %d times, applied %d; it has no client token and must be sent once", tc.call, calls, applied)
			}
			if !hasNote(rec, "read back after the answer was lost") {
				t.Errorf("history does not tell the read-back: %+v", rec.History)
			}
		})
	}
}

func TestRecoverRefusals(t *testing.T) {
	cases := []struct {
		name   string
		status string
		op     string
		params ops.Params
		faulty bool // mark a gpu node faulty first
		code   ops.Code
		field  string
		words  []string
	}{
		{name: "cluster updating", status: fakeaws.StatusUpdating, op: OpReplaceNodes, params: ops.Params{"faulty": true},
			code: ops.CodeClusterUnavailable, field: "cluster", words: []string{"ml-hp is Updating", "replace-nodes needs InService"}},
		{name: "unknown node id", op: OpRebootNodes, params: ops.Params{"nodes": "i-0nope"}, code: ops.CodeNotFound, field: "nodes",
			words: []string{"no instance i-0nope in instance group gpu"}},
		{name: "node of another group", op: OpRebootNodes, params: ops.Params{"nodes": "controller"}, code: ops.CodeInvalidArgument,
			field: "nodes", words: []string{"instance group controller, not gpu"}},
		{name: "nothing faulty", op: OpReplaceNodes, params: ops.Params{"faulty": true}, code: ops.CodeNotFound, field: "faulty",
			words: []string{"no faulty instances"}},
		{name: "neither nodes nor faulty", op: OpRebootNodes, params: ops.Params{}, code: ops.CodeInvalidArgument, field: "nodes",
			words: []string{"nodes= or faulty=true"}},
		{name: "both nodes and faulty", op: OpRebootNodes, params: ops.Params{"nodes": "i-0abc", "faulty": true}, faulty: true,
			code: ops.CodeInvalidArgument, field: "nodes", words: []string{"both given"}},
		{name: "unknown group", op: OpRebootNodes, params: ops.Params{"faulty": true, "group": "gpus"}, code: ops.CodeNotFound,
			field: "group", words: []string{`"gpus"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{hyperPodStatus: tc.status})
			if tc.faulty {
				must(t, f.srv.MarkNodeFaulty("ml-hp", f.gpuIDs(t)[0], "XID 48"))
			}
			if tc.params["nodes"] == "controller" {
				hp, _ := f.srv.HyperPodCluster("ml-hp")
				tc.params["nodes"] = hp.InstanceGroups[1].Nodes[0].InstanceID
			}
			rec, err := f.engine.Submit(ctxT(t), recoveryRequest("refused", tc.op, tc.params))
			ue := asOpsError(t, err)
			if ue.Code != tc.code || ue.Field != tc.field || ue.Next == "" {
				t.Fatalf("error %+v, want %s on %q with a next step", ue, tc.code, tc.field)
			}
			for _, w := range tc.words {
				if !strings.Contains(ue.Message, w) {
					t.Errorf("message %q does not say %q", ue.Message, w)
				}
			}
			if rec != nil && rec.Phase != ops.PhaseRejected {
				t.Errorf("phase %s, want rejected", rec.Phase)
			}
			if n := f.srv.Calls(fakeaws.OpSageMakerBatchRebootClusterNodes) + f.srv.Calls(fakeaws.OpSageMakerBatchReplaceClusterNodes); n != 0 {
				t.Errorf("%d Batch calls, want none", n)
			}
		})
	}
}

// A recovery holds scale-capacity's lock of the group: a scaling of it meanwhile is refused with E_LOCKED.
func TestRecoverLocksTheGroup(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	op, err := f.catalog.Lookup(OpReplaceNodes)
	must(t, err)
	req := recoveryRequest("r", OpReplaceNodes, ops.Params{"faulty": true})
	scale, _ := f.catalog.Lookup(OpScaleCapacity)
	if a, b := op.Spec().Lock(req), scale.Spec().Lock(scaleRequest("s", testCluster, "gpu", 3)); a != b {
		t.Errorf("recovery locks %s, scale %s: want the same scope", a, b)
	}
}

// A node AWS refuses (already being rebooted) is reported by itself; the others are recovered and watched.
func TestRecoverReportsRefusedNodes(t *testing.T) {
	f := newFixture(t, fixtureOptions{recoveryDuration: 300 * time.Millisecond})
	ids := f.gpuIDs(t)
	must(t, f.srv.MarkNodeFaulty("ml-hp", ids[0], "XID 79"))
	busy := ids[1]
	if _, err := f.clients.regional[testCluster].sm.BatchRebootClusterNodes(ctxT(t), &sagemaker.BatchRebootClusterNodesInput{
		ClusterName: awssdk.String("ml-hp"), NodeIds: []string{busy}}); err != nil {
		t.Fatal(err)
	}
	rec, err := f.engine.Submit(ctxT(t), recoveryRequest("partial", OpRebootNodes, ops.Params{"nodes": ids[0] + "," + busy}))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit: %v, phase %v", err, rec.Phase)
	}
	if !f.progress.has("refused", busy, "InstanceIdInUse") || !hasWarning(rec.Plan, busy+" is Pending already") {
		t.Errorf("progress %q, warnings %q: want the busy node refused by itself", f.progress.All(), rec.Plan.Warnings)
	}
	var res RecoveryResult
	must(t, json.Unmarshal(rec.Result.Data, &res))
	if !slices.Equal(res.Nodes, []string{ids[0]}) || len(res.Refused) != 1 || res.Refused[0].Code != "InstanceIdInUse" {
		t.Errorf("result %+v, want %s rebooted and %s refused", res, ids[0], busy)
	}
}

func hasWarning(p *ops.Plan, words string) bool {
	return slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, words) })
}

// The plan names the pods a replacement stops, read from Kubernetes, and their interruption raises the risk.
func TestRecoverPlanNamesInterruptedPods(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	faulty := f.gpuIDs(t)[0]
	must(t, f.srv.MarkNodeFaulty("ml-hp", faulty, "XID 79"))
	f.nodes.runPod(fleet.NodePod{Node: "hyperpod-" + faulty, Namespace: "ml-platform", Name: "llama-worker-0", Owner: "PyTorchJob llama", GPUs: 8})
	f.nodes.runPod(fleet.NodePod{Node: "hyperpod-" + f.gpuIDs(t)[1], Namespace: "ml-platform", Name: "llama-worker-1", Owner: "PyTorchJob llama"})
	req := recoveryRequest("pods", OpReplaceNodes, ops.Params{"faulty": true})
	req.DryRun = true
	rec, err := f.engine.Submit(ctxT(t), req)
	if err != nil || rec.Phase != ops.PhaseDone {
		t.Fatalf("Submit: %v %v", err, rec)
	}
	if !hasWarning(rec.Plan, "ml-platform/llama-worker-0 (PyTorchJob llama) on hyperpod-"+faulty) || hasWarning(rec.Plan, "llama-worker-1") {
		t.Errorf("warnings %q, want the pod on the faulty node named, and only it", rec.Plan.Warnings)
	}
	if rec.Plan.Risk.Level != ops.RiskCritical || !hasReason(rec.Plan.Risk, "interrupts 1 pod(s)") {
		t.Errorf("risk %s %+v, want high raised to critical by the interrupted pod", rec.Plan.Risk.Level, rec.Plan.Risk.Reasons)
	}
}
