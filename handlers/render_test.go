package handlers

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/kube"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var t0 = time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC)

func sampleRecord(phase ops.Phase) *ops.Record {
	req := ops.Request{ID: "req-0123456789abcdef", Operation: "scale-capacity", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Params: ops.Params{"group": "gpu-workers", "count": int64(4)}, Initiator: ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}, Origin: "slash"}
	p := &ops.Plan{Summary: "scale gpu-workers from 2 to 4 ml.g5.12xlarge", ServerValidated: true, Hash: "9f86d081884c7d659a2feaa0c55ad015",
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "InstanceGroup", Name: "gpu-workers", Fields: []ops.FieldChange{{Path: "instanceCount", From: "2", To: "4"}}}}}
	p.Cost.AddHourly("ml.g5.12xlarge", 2, 7.09, "instance")
	p.Risk.Add(ops.RiskMedium, "adds $14.18/h")
	p.Risk.Add(ops.RiskHigh, "adds $14.18/h, on production cluster ml-prod-eks: one level up from medium")
	rec := &ops.Record{Request: req, Phase: phase, Version: 4, Plan: p, Owner: req.Initiator, CreatedAt: t0, UpdatedAt: t0,
		Approval: ops.Approval{Required: 2, Approvers: "leads", ExpiresAt: t0.Add(time.Hour), PlanHash: p.Hash, Rule: "rule 1",
			Votes: []ops.Vote{{Voter: ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}, Approve: true, At: t0, PlanHash: p.Hash}}}}
	return rec
}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./handlers -update to create it)", err)
	}
	if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
		t.Errorf("%s differs from %s (rerun with -update if intended):\n%s", name, path, got)
	}
}

// checkLimits applies Slack's Block Kit limits the fake Slack also enforces.
func checkLimits(t *testing.T, m Msg) {
	t.Helper()
	if len(m.Blocks) > maxBlocks {
		t.Errorf("%d blocks, Slack allows %d", len(m.Blocks), maxBlocks)
	}
	for _, b := range m.Blocks {
		if s, ok := b.(*slack.SectionBlock); ok && s.Text != nil && len([]rune(s.Text.Text)) > maxSectionText {
			t.Errorf("section of %d characters", len([]rune(s.Text.Text)))
		}
	}
}

func TestGoldenMessages(t *testing.T) {
	agentRec := sampleRecord(ops.PhaseAwaitingApproval)
	agentRec.Request.Initiator = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}
	agentRec.Owner, agentRec.Request.Origin = agentRec.Request.Initiator, "agent"
	mcpRec := sampleRecord(ops.PhaseAwaitingApproval)
	mcpRec.Request.Initiator = ops.Initiator{Kind: ops.Agent, ID: "agent:ci-agent", Name: "ci-agent"}
	mcpRec.Owner, mcpRec.Request.Origin = mcpRec.Request.Initiator, "mcp"
	done := sampleRecord(ops.PhaseSucceeded)
	awaiting := sampleRecord(ops.PhaseAwaitingApproval)
	done.Result = &ops.Result{Summary: "gpu-workers at 4 instances", Details: []ops.Detail{{Label: "InService", Value: "4/4"}}, Output: "node-1 Ready\nnode-2 Ready"}
	long := sampleRecord(ops.PhaseAwaitingApproval)
	long.Plan.Manifest = strings.Repeat("apiVersion: v1\nkind: ConfigMap\n", 200)
	interrupted := sampleRecord(ops.PhaseInterrupted)
	interrupted.Errors = []*ops.Error{ops.Errorf(ops.CodeInternal, "", "use Take over, then Resume or Stop", "execution was interrupted")}
	g := NewGrammar("/hp", testSpecs())
	tr := ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseApproved, At: t0, By: ops.Initiator{Kind: ops.Human, ID: "U0LEAD2"}, Note: "approved by U0LEAD2 (2/2)"}
	reply, _ := TransitionReply(done, tr)
	succeededReply, _ := TransitionReply(done, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseSucceeded, At: t0, By: ops.Initiator{Kind: ops.System}, Kind: ops.KindPhase})
	job := ops.ObjectRef{Cluster: "ml-prod-eks", Namespace: "ml-platform", APIVersion: "batch/v1", Kind: "Job", Name: "fraud-model-v17"}
	jobFailure := ops.WatchChange{Object: job, From: "running", To: "failed", Reason: "BackoffLimitExceeded: Job has reached the specified backoff limit",
		PodsFailed: 3, Exit: "Error (exit code 1)",
		Events:  []string{"Warning BackoffLimitExceeded: Job has reached the specified backoff limit"},
		LogTail: strings.Repeat("step 9 loss nan\n", 200) + "Traceback: CUDA out of memory"}
	failed, _ := WatchReply(jobFailure)
	running, _ := WatchReply(ops.WatchChange{Object: job, To: "running"})
	denied := trainingRecord()
	denied.Phase = ops.PhaseDenied
	denied.Approval.Votes = []ops.Vote{{Voter: ops.Initiator{Kind: ops.Human, ID: "U0LEAD1"}, At: t0, PlanHash: denied.Plan.Hash, Reason: "too expensive this week; try 1 replica"}}
	ran := trainingRecord()
	ran.Phase = ops.PhaseSucceeded
	ran.Result = &ops.Result{Summary: "Job llm-ft created", Watch: []ops.ObjectRef{{Cluster: "ml-prod-eks", Namespace: "ml-platform", Kind: "Job", Name: "llm-ft"}}}
	jobFailed := RequestMessage(opSpecs, ran, []string{"failed"}).Msg
	capFailed := capacityRecord()
	capFailed.Phase = ops.PhaseFailed
	capFailed.Errors = []*ops.Error{ops.Errorf(ops.CodeAWSError, "group", "check with "+ops.Ask("capacity show"), "UpdateCluster failed: InsufficientCapacity for ml.g5.12xlarge")}
	status := sampleRecord(ops.PhaseSucceeded)
	status.Request.Operation, status.Request.Params, status.Plan = "get-cluster-status", ops.Params{}, nil
	status.Result = &ops.Result{
		Summary: "ml-prod-eks: 2/4 nodes ready, 12 of 32 GPUs requested, 0 pod(s) waiting for GPUs, 2 node(s) not healthy",
		Output: "gpu-workers              ml.p5.48xlarge     2/4 ready  GPUs 12/32 requested  2 healthy, 1 faulty, 1 rebooting\n" +
			"  hyperpod-i-0b2c faulty: GPU 3 reported Xid 79 <fallen off the bus> (UnschedulablePendingReplacement, Failure)\n" +
			"  hyperpod-i-0d4e rebooting: failed a health check; HyperPod marked it for a reboot (UnschedulablePendingReboot, Pending)\n",
		Details: []ops.Detail{
			{Label: "not healthy", Value: "gpu-workers: 1 faulty, 1 rebooting"},
			{Label: "ml-platform", Value: "1 job(s), 0 deployment(s)"},
		},
	}
	expired := sampleRecord(ops.PhaseExpired)
	expired.Approval.ApproverUserGroups = []string{"S0LEADS"}
	toExpired := ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseExpired, At: t0.Add(time.Hour), By: ops.Initiator{Kind: ops.System}, Kind: ops.KindPhase}
	expiredReply, _ := TransitionReply(expired, toExpired)
	deniedReply, _ := TransitionReply(denied, ops.Transition{From: ops.PhaseAwaitingApproval, To: ops.PhaseDenied, By: denied.Approval.Votes[0].Voter, Kind: ops.KindPhase})
	failedReply, _ := TransitionReply(capFailed, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseFailed, By: ops.Initiator{Kind: ops.System}, Kind: ops.KindPhase})
	interruptedAgent := sampleRecord(ops.PhaseInterrupted)
	interruptedAgent.Request.Initiator = ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}
	interruptedAgent.Owner, interruptedAgent.Approval.ApproverUsers = interruptedAgent.Request.Initiator, []string{"U0LEAD1", "U0LEAD2"}
	interruptedAgent.Result = &ops.Result{Summary: "gpu-workers at 3 of 4 instances"}
	interruptedReply, _ := TransitionReply(interruptedAgent, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseInterrupted, By: ops.Initiator{Kind: ops.System}, Kind: ops.KindPhase})
	resumedReply, _ := TransitionReply(interrupted, ops.Transition{From: ops.PhaseInterrupted, To: ops.PhaseApproved, At: t0,
		By: ops.Initiator{Kind: ops.Human, ID: "U0LEAD2"}, Note: "resumed by lead2", Kind: ops.KindPhase})
	agentExpired := sampleRecord(ops.PhaseExpired)
	agentExpired.Request.Initiator = agentRec.Request.Initiator
	agentExpired.Owner = agentRec.Owner
	budgetRec := agentRec.Clone()
	budgetRec.Plan.Budget = []ops.BudgetPlace{{
		Charge: ops.Charge{Budget: ops.BudgetLimit{Name: "ops-agent-daily", Path: "budgets[0]", Holder: "ops-agent", Window: ops.WindowDay,
			Limit: ops.Amount{Cost: 2000}}, Amount: ops.Amount{Cost: 905}},
		Used: ops.Amount{Cost: 455}}}
	revertible := capacityRecord()
	revertible.Phase = ops.PhaseSucceeded
	revertible.Result = &ops.Result{Summary: "gpu-workers scaled to 4"}
	revertible.Plan.Undo = &ops.Undo{Operation: "scale-capacity", Params: ops.Params{"group": "gpu-workers", "count": int64(2)}}
	reverted := revertible.Clone()
	reverted.RevertedBy = "req-5e1f0a77"
	revert := capacityRecord()
	revert.Request.ID, revert.Request.Reverts, revert.Request.Params = "req-5e1f0a77", revertible.ID(), ops.Params{"group": "gpu-workers", "count": int64(2)}
	revert.Plan.Warnings = []string{"changed since " + revertible.ID() + ": request cap-2 (scale-capacity) changed ml-prod-eks/capacity/gpu-workers after it"}
	reserved := trainingRecord()
	onPlan := ops.CapacityReservation{Group: "gpu-workers", Plan: "tp-gpu-dec", Status: "Active", EndTime: t0.Add(3*time.Hour + 20*time.Minute),
		Left: 3*time.Hour + 20*time.Minute}
	reserved.Plan.Reservations = []ops.CapacityReservation{onPlan}
	reserved.Plan.Risk.Add(ops.RiskCritical, "max-hours=12 outlives training plan tp-gpu-dec of instance group gpu-workers, where its pods may land, which %s: the job would be cut short", onPlan.Ends())
	reservedUnknown := capacityRecord()
	reservedUnknown.Plan.Reservations = []ops.CapacityReservation{{Group: "gpu-workers", Plan: "tp-gpu-dec",
		Unknown: "AWS SageMaker DescribeTrainingPlan failed: ThrottlingException: Rate exceeded <retry later>"}}
	reservedUnknown.Plan.Warnings = []string{"instance group gpu-workers runs on training plan tp-gpu-dec: reservation end unknown (AWS SageMaker DescribeTrainingPlan failed: ThrottlingException: Rate exceeded <retry later>): the plan goes on without it"}
	cases := map[string]Rendered{
		"plan_training_reservation":    PlanMessage(opSpecs, reserved),
		"plan_capacity_reservation":    PlanMessage(opSpecs, reservedUnknown),
		"budget":                       {Msg: BudgetMessage(sampleBudgetUses())},
		"plan_revertible":              PlanMessage(opSpecs, revertible),
		"plan_reverted":                PlanMessage(opSpecs, reverted),
		"plan_revert":                  PlanMessage(opSpecs, revert),
		"result_status":                ResultMessage(opSpecs, status),
		"transition_reply_expired":     {Msg: expiredReply},
		"transition_reply_denied":      {Msg: deniedReply},
		"transition_reply_failed":      {Msg: failedReply},
		"transition_reply_interrupted": {Msg: interruptedReply},
		"transition_reply_resumed":     {Msg: resumedReply},
		"watch_reply_failed_requester": {Msg: failedWorkloadReply(ran, jobFailure)},
		"agent_reply_expired":          {Msg: AgentReply(agentapi.InTerms(agentapi.NewBody(agentExpired, agentExpired.ID(), nil), agentapi.NewSteps(opSpecs.Specs()), agentapi.DM))},
		"plan_training":                PlanMessage(opSpecs, trainingRecord()),
		"plan_inference":               PlanMessage(opSpecs, inferenceRecord()),
		"plan_drift":                   PlanMessage(opSpecs, driftRecord()),
		"plan_capacity":                PlanMessage(opSpecs, capacityRecord()),
		"plan_delete_storage":          PlanMessage(opSpecs, deleteStorageRecord()),
		"plan_replace_nodes":           PlanMessage(opSpecs, replaceNodesRecord()),
		"plan_denied":                  PlanMessage(opSpecs, denied),
		"plan_failed":                  PlanMessage(opSpecs, capFailed),
		"plan_job_failed":              {Msg: jobFailed},
		"plan_awaiting":                PlanMessage(opSpecs, sampleRecord(ops.PhaseAwaitingApproval)),
		"plan_agent":                   PlanMessage(opSpecs, agentRec),
		"plan_agent_budget":            PlanMessage(opSpecs, budgetRec),
		"agent_reply_budget":           {Msg: AgentReply(agentapi.InTerms(agentapi.NewBody(budgetRec, budgetRec.ID(), nil), agentapi.NewSteps(opSpecs.Specs()), agentapi.DM))},
		"plan_agent_mcp":               PlanMessage(opSpecs, mcpRec),
		"plan_succeeded":               PlanMessage(opSpecs, done),
		"plan_expired":                 PlanMessage(opSpecs, sampleRecord(ops.PhaseExpired)),
		"plan_interrupted":             PlanMessage(opSpecs, interrupted),
		"plan_long_manifest":           PlanMessage(opSpecs, long),
		"result":                       ResultMessage(opSpecs, done),
		"transition_reply":             {Msg: reply},
		"progress_reply":               {Msg: ProgressReply(done, "2/4 nodes InService")},
		"reply_backlog": {Msg: coalesced([]Msg{reply, ProgressReply(done, "UpdateCluster accepted"),
			ProgressReply(done, "2/4 nodes InService"), succeededReply})},
		"progress_reply_event": {Msg: ProgressReply(done, "HyperPod error: node i-0abc of gpu failed health checks: GPU XID 79 <@U0ALL> *fallen* off the bus & <!channel>")},
		"error":                {Msg: ErrorMessage(ops.Errors{ops.Errorf(ops.CodeInvalidArgument, "replcas", "did you mean replicas=?", "unknown argument %q", "replcas")})},
		"help":                 {Msg: HelpMessage(g, "")},
		"help_topic":           {Msg: HelpMessage(g, "train")},
		"requests":             {Msg: RequestsMessage(opSpecs, "Requests awaiting approval", []*ops.Record{agentRec, sampleRecord(ops.PhaseAwaitingApproval)})},
		"agent_reply":          {Msg: AgentReply(agentapi.NewBody(agentRec, agentRec.ID(), nil))},
		"agent_reply_error":    {Msg: AgentReply(agentapi.NewBody(nil, "train-1", ops.Errorf(ops.CodeForbiddenField, "workload.iamRole", "remove it", "field workload.iamRole is not allowed")))},
		"audit_line":           {Msg: AuditLine(done, tr)},
		"watch_reply_running":  {Msg: running},
		"watch_reply_failed":   {Msg: failed},
		"watch_reply_reservation": {Msg: ReservationWarningReply(ops.ReservationWarning{Object: job,
			Reservation: ops.CapacityReservation{Group: "gpu-workers", Plan: "tp-gpu-dec", Status: "Active",
				ARN:     "arn:aws:sagemaker:us-east-1:111122223333:training-plan/tp-gpu-dec",
				EndTime: time.Date(2026, 12, 5, 16, 45, 0, 0, time.UTC), Left: 45 * time.Minute},
			Nodes: []string{"hyperpod-i-0a1", "hyperpod-i-0a2", "hyperpod-i-0a3", "hyperpod-i-0a4", "hyperpod-i-0a5", "hyperpod-i-0a6", "hyperpod-i-0a7"}})},
		"watch_reply_reservation_inference": {Msg: ReservationWarningReply(ops.ReservationWarning{
			Object: ops.ObjectRef{Cluster: "ml-prod-eks", Namespace: "ml-platform", APIVersion: "apps/v1", Kind: "Deployment", Name: "llm-serve"},
			Reservation: ops.CapacityReservation{Group: "gpu-workers", Plan: "tp-gpu-dec", Status: "Active",
				EndTime: time.Date(2026, 12, 5, 16, 45, 0, 0, time.UTC), Left: 58 * time.Minute},
			Nodes: []string{"hyperpod-i-0a1"}})},
		"watch_message":      {Msg: WatchMessage(job, "running", ops.Initiator{Kind: ops.Human, ID: "U0ALICE"})},
		"plan_with_workload": {Msg: RequestMessage(opSpecs, withWatch(done, job), []string{"completed"}).Msg},
		"undelivered_notice": {Msg: UndeliveredNotice(done, ops.Transition{From: ops.PhaseExecuting, To: ops.PhaseSucceeded, Kind: ops.KindPhase},
			"C0OPS", "not_in_channel", reply)},
		"audit_refused_reply": {Msg: AuditRefusedReply(done, "C0AUDIT", "is_archived")},
		"plain_version":       {Msg: lastPlain(done, PlanMessage(opSpecs, done).Msg)},
		"plain_version_vote":  {Msg: PlainVersions(awaiting, PlanMessage(opSpecs, awaiting).Msg)[0]},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			checkLimits(t, r.Msg)
			golden(t, name, r)
		})
	}
	if len(cases["plan_long_manifest"].Files) != 1 {
		t.Errorf("a long manifest must go to a file, got %d files", len(cases["plan_long_manifest"].Files))
	}
	t.Run("details_modal", func(t *testing.T) { golden(t, "details_modal", DetailsModal(opSpecs, trainingRecord())) })
	t.Run("details_modal_drift", func(t *testing.T) { golden(t, "details_modal_drift", DetailsModal(opSpecs, driftRecord())) })
	t.Run("deny_modal", func(t *testing.T) {
		golden(t, "deny_modal", DenyModal(opSpecs, trainingRecord(), `{"id":"train-20250308-001"}`))
	})
	t.Run("confirm_delete_modal", func(t *testing.T) {
		rec := sampleRecord(ops.PhaseAwaitingApproval)
		rec.Request.Operation, rec.Request.Params = kube.OpDeleteStorage, ops.Params{"name": "checkpoints"}
		golden(t, "confirm_delete_modal", ConfirmModal(rec, *specOf(opSpecs, rec).Confirm, `{"id":"req-0123456789abcdef","claim":"checkpoints"}`))
	})
}

func TestActionable(t *testing.T) {
	tests := []struct {
		phase ops.Phase
		agent bool
		want  string
	}{
		{ops.PhaseAwaitingApproval, false, "hp_approve hp_deny hp_cancel"},
		{ops.PhaseAwaitingApproval, true, "hp_approve hp_deny hp_cancel hp_stop hp_takeover"},
		{ops.PhaseExecuting, false, ""},
		{ops.PhaseExpired, false, ""},
		{ops.PhaseSucceeded, false, ""},
		{ops.PhaseInterrupted, true, "hp_takeover hp_resume hp_stop"},
	}
	for _, tc := range tests {
		rec := sampleRecord(tc.phase)
		if tc.agent {
			rec.Owner.Kind = ops.Agent
		}
		if got := strings.Join(Actionable(rec), " "); got != tc.want {
			t.Errorf("%s (agent %v): %q, want %q", tc.phase, tc.agent, got, tc.want)
		}
	}
}

func TestValidateSubmission(t *testing.T) {
	mk := func(typed string) slack.InteractionCallback {
		var cb slack.InteractionCallback
		cb.Type = slack.InteractionTypeViewSubmission
		cb.View.CallbackID = ConfirmCallback
		cb.View.PrivateMetadata = `{"id":"r","claim":"checkpoints"}`
		cb.View.State = &slack.ViewState{Values: map[string]map[string]slack.BlockAction{confirmBlock: {confirmAction: {Value: typed}}}}
		return cb
	}
	tests := []struct {
		typed string
		ok    bool
	}{{"checkpoints", true}, {" checkpoints ", true}, {"checkpoint", false}, {"", false}}
	for _, tc := range tests {
		if got := ValidateSubmission(mk(tc.typed)) == nil; got != tc.ok {
			t.Errorf("typed %q: accepted %v, want %v", tc.typed, got, tc.ok)
		}
	}
}

func TestWatchReplyTellsWhatMatters(t *testing.T) {
	job := ops.ObjectRef{Cluster: "c", Namespace: "ns", Kind: "Job", Name: "j"}
	tests := []struct {
		name   string
		change ops.WatchChange
		tells  bool
		has    []string
	}{
		{"pending without reason only updates", ops.WatchChange{Object: job, To: "pending"}, false, nil},
		{"unschedulable pending is told", ops.WatchChange{Object: job, To: "pending", Reason: "j-0: Unschedulable: 0/2 nodes are available"}, true,
			[]string{"*pending*: no node can take its pods now", "Kubernetes: j-0: Unschedulable: 0/2 nodes are available"}},
		{"running", ops.WatchChange{Object: job, From: "pending", To: "running"}, true, []string{"is *running*"}},
		{"completed with log", ops.WatchChange{Object: job, From: "running", To: "completed", LogTail: "done\n"}, true, []string{"*Last 1 line of the log*", "done"}},
		{"failed with events", ops.WatchChange{Object: job, To: "failed", Reason: "DeadlineExceeded", Events: []string{"Warning DeadlineExceeded"}}, true,
			[]string{"*failed*: the job ran past its time limit (max-hours) and was stopped", "Kubernetes: DeadlineExceeded", "Warning DeadlineExceeded"}},
		{"out of memory after retries", ops.WatchChange{Object: job, To: "failed", Reason: "BackoffLimitExceeded: Job has reached the specified backoff limit",
			PodsFailed: 3, Exit: "OOMKilled (exit code 137)"}, true,
			[]string{"*failed*: the job's pods failed 3 times (backoff limit reached); the last one: a container ran out of memory",
				"Kubernetes: BackoffLimitExceeded: Job has reached the specified backoff limit; the last container: OOMKilled (exit code 137)"}},
		{"a container that exited", ops.WatchChange{Object: job, To: "failed", Reason: "Error", Exit: "Error (exit code 2)"}, true,
			[]string{"*failed*: a container exited with code 2"}},
		{"a reason HyperOps cannot say is shown as it came", ops.WatchChange{Object: job, To: "failed", Reason: "CUDA out of memory"}, true,
			[]string{"*failed*: CUDA out of memory"}},
		{"progressing only updates", ops.WatchChange{Object: job, To: "progressing"}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := WatchReply(tc.change)
			if ok != tc.tells {
				t.Fatalf("tells = %v, want %v", ok, tc.tells)
			}
			b, _ := json.Marshal(m.Blocks)
			for _, want := range tc.has {
				if !strings.Contains(string(b), want) {
					t.Errorf("reply lacks %q: %s", want, b)
				}
			}
			checkLimits(t, m)
		})
	}
}

// lastPlain is the last resort of PlainVersions: the text alone.
func lastPlain(rec *ops.Record, m Msg) Msg {
	vs := PlainVersions(rec, m)
	return vs[len(vs)-1]
}

// TestPlainVersionKeepsTheVote: a plan awaiting approval whose message Slack refused for its content is shown as
// plain text that still carries Approve and Deny (without them nobody could vote until it expired); refused
// again, the text goes alone.
func TestPlainVersionKeepsTheVote(t *testing.T) {
	rec := sampleRecord(ops.PhaseAwaitingApproval)
	vs := PlainVersions(rec, PlanMessage(opSpecs, rec).Msg)
	if len(vs) != 2 {
		t.Fatalf("want a version with the buttons and one without, got %d", len(vs))
	}
	ids := map[string]bool{}
	for _, b := range vs[0].Blocks {
		if a, ok := b.(*slack.ActionBlock); ok {
			for _, el := range a.Elements.ElementSet {
				if btn, ok := el.(*slack.ButtonBlockElement); ok {
					ids[btn.ActionID] = true
				}
			}
		}
	}
	if !ids[ActionApprove] || !ids[ActionDeny] {
		t.Errorf("the plain version lost the vote: buttons %v", ids)
	}
	if vs[1].Blocks != nil || !strings.Contains(vs[1].Text, "request show id="+rec.ID()) {
		t.Errorf("last resort = %+v, want text alone naming request show", vs[1])
	}
	var refused []Msg
	err := sendPlain(rec, PlanMessage(opSpecs, rec).Msg, func(m Msg) error {
		refused = append(refused, m)
		return slack.SlackErrorResponse{Err: "invalid_blocks"}
	})
	if len(refused) != 2 || Classify(err) != Rejected {
		t.Errorf("sendPlain tried %d versions, ended %v; want both tried and the refusal returned", len(refused), err)
	}
}

// withWatch is rec, as a copy, whose result watches objs.
func withWatch(rec *ops.Record, objs ...ops.ObjectRef) *ops.Record {
	c := rec.Clone()
	r := *c.Result
	r.Watch = objs
	c.Result = &r
	return c
}
