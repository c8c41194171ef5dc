package handlers

import (
	"strings"
	"time"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
	"github.com/hyperops/hyperops/ops/kube"
	"github.com/hyperops/hyperops/ops/pricing"
)

// The sample requests of the golden files, one per kind of plan a lead decides on.

func withApproval(rec *ops.Record, required int) *ops.Record {
	rec.Approval = ops.Approval{Required: required, Approvers: "leads", ApproverUserGroups: []string{"S0LEADS"},
		ExpiresAt: t0.Add(time.Hour), PlanHash: rec.Plan.Hash, Rule: "rule 2: risk high|medium → 1 of leads, 1h"}
	return rec
}

func trainingRecord() *ops.Record {
	req := ops.Request{ID: "train-20250308-001", Operation: "submit-training-job", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Params:    ops.Params{"name": "llm-ft", "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v17", "replicas": int64(2), "gpus": int64(8)},
		Initiator: ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}, Origin: "slash"}
	p := &ops.Plan{Summary: "Job ml-platform/llm-ft: 2 replica(s) × 8 GPU(s)", ServerValidated: true, Hash: "8f65f0f2a1b2c3d4e5f6",
		RunsAs:   "profile trainer (service account llm-trainer)",
		Changes:  []ops.Change{{Action: ops.ActionCreate, Kind: "Job", Name: "llm-ft"}},
		Manifest: strings.Repeat("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: llm-ft\n", 11), Cost: ops.Cost{Source: pricing.BuiltinSource}}
	p.Cost.AddHourly("training llm-ft: 16 GPUs of ml.p5.48xlarge", 2, 113.068, "node")
	p.Cost.Total, p.Cost.TotalBasis = p.Cost.HourlyDelta*12, "if it runs its full deadline (max-hours)"
	p.Cost.PricedAt, p.Cost.MayLandOn = "priced at ml.p5.48xlarge, the most expensive type its pods may land on", []string{"ml.g5.12xlarge", "ml.p5.48xlarge"}
	p.Risk.Add(ops.RiskMedium, "adds $226.14/h (medium threshold $50/h)")
	p.Risk.Add(ops.RiskHigh, "adds $226.14/h (medium threshold $50/h), on production cluster ml-prod-eks: one level up from medium")
	rec := &ops.Record{Request: req, Phase: ops.PhaseAwaitingApproval, Version: 3, Plan: p, Owner: req.Initiator, CreatedAt: t0, UpdatedAt: t0}
	return withApproval(rec, 1)
}

func inferenceRecord() *ops.Record {
	req := ops.Request{ID: "req-5c1d2e3f4a5b6c7d", Operation: "deploy-inference", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Params:    ops.Params{"name": "fraud-scorer", "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/scorer:v3", "replicas": int64(3), "gpus": int64(1)},
		Initiator: ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: "ops-agent"}, Origin: "agent"}
	p := &ops.Plan{ServerValidated: true, Hash: "77aa12bc99", Manifest: "apiVersion: apps/v1\nkind: Deployment\n",
		Changes: []ops.Change{{Action: ops.ActionCreate, Kind: "Deployment", Name: "fraud-scorer"}, {Action: ops.ActionCreate, Kind: "Service", Name: "fraud-scorer"}}}
	p.Cost.AddHourly("inference fraud-scorer: 3 GPUs of ml.g5.12xlarge", 0.75, 7.09, "node")
	p.Risk.Add(ops.RiskMedium, "requested by an agent")
	rec := &ops.Record{Request: req, Phase: ops.PhaseAwaitingApproval, Version: 3, Plan: p, Owner: req.Initiator, CreatedAt: t0, UpdatedAt: t0}
	return withApproval(rec, 1)
}

// driftRecord scales an inference server whose live Deployment was edited outside HyperOps: the plan builds from
// what HyperOps applied and reports the drift.
func driftRecord() *ops.Record {
	req := ops.Request{ID: "req-5ca1ed0000000001", Operation: "scale-inference", Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Params: ops.Params{"name": "fraud-scorer", "replicas": int64(4)}, Initiator: ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}, Origin: "slash"}
	applied := "123456789012.dkr.ecr.us-west-2.amazonaws.com/scorer:v3"
	p := &ops.Plan{ServerValidated: true, Hash: "5ca1ab1e77", Manifest: "apiVersion: apps/v1\nkind: Deployment\n",
		RunsAs: "profile default (service account default)",
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Deployment", Name: "fraud-scorer", Fields: []ops.FieldChange{
			{Path: "spec.replicas", From: "3", To: "4"}, {Path: "spec.template.spec.containers[0].image", From: "quay.io/evil/miner:1", To: applied}}},
			{Action: ops.ActionNoop, Kind: "Service", Name: "fraud-scorer"}},
		Drift: []ops.Change{{Action: ops.ActionUpdate, Kind: "Deployment", Name: "fraud-scorer", Fields: []ops.FieldChange{
			{Path: "metadata.annotations.hyperops.io/inference-spec", From: `{"image":"` + applied + `","replicas":3}`, To: `{"image":"quay.io/evil/miner:1","replicas":3}`},
			{Path: "spec.template.spec.containers[0].image", From: applied, To: "quay.io/evil/miner:1"}}}}}
	p.Cost.AddHourly("inference fraud-scorer: 1 GPU of ml.g5.12xlarge", 0.25, 7.09, "node")
	p.Risk.Add(ops.RiskHigh, "drift: Deployment fraud-scorer was changed outside HyperOps since req-5c1d2e3f4a5b6c7d applied it (2 fields); "+
		"the plan applies HyperOps's values, never the live ones")
	rec := &ops.Record{Request: req, Phase: ops.PhaseAwaitingApproval, Version: 3, Plan: p, Owner: req.Initiator, CreatedAt: t0, UpdatedAt: t0}
	return withApproval(rec, 1)
}

func capacityRecord() *ops.Record {
	rec := sampleRecord(ops.PhaseAwaitingApproval)
	rec.Approval.ApproverUserGroups = []string{"S0LEADS"}
	rec.Approval.ApproverUsers = []string{"U0LEAD1", "U0LEAD2"}
	return rec
}

func deleteStorageRecord() *ops.Record {
	req := ops.Request{ID: "req-d31e7e0000000001", Operation: kube.OpDeleteStorage, Target: ops.Target{Cluster: "ml-prod-eks", Namespace: "ml-platform"},
		Params: ops.Params{"name": "checkpoints"}, Initiator: ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}, Origin: "slash"}
	p := &ops.Plan{Hash: "d00dfeed11", Changes: []ops.Change{{Action: ops.ActionDelete, Kind: "PersistentVolumeClaim", Name: "checkpoints"}},
		Warnings: []string{"the volume's reclaim policy is Delete: its data goes with it"}}
	p.Risk.Add(ops.RiskCritical, "deletes the data of claim checkpoints (500Gi) for good")
	rec := &ops.Record{Request: req, Phase: ops.PhaseAwaitingApproval, Version: 2, Plan: p, Owner: req.Initiator, CreatedAt: t0, UpdatedAt: t0}
	rec = withApproval(rec, 2)
	rec.Approval.Rule = "rule 1: risk critical → 2 of leads, 30m"
	return rec
}

// replaceNodesRecord is a replacement of a faulty HyperPod node awaiting approval: the plan names the node and its
// reason, says the count is kept at no added cost, and that the pods on it stop.
func replaceNodesRecord() *ops.Record {
	req := ops.Request{ID: "req-4e91ace000000001", Operation: aws.OpReplaceNodes, Target: ops.Target{Cluster: "ml-prod-eks"},
		Params: ops.Params{"group": "gpu-workers", "faulty": true}, Initiator: ops.Initiator{Kind: ops.Human, ID: "U0ALICE", Name: "alice"}, Origin: "slash"}
	p := &ops.Plan{Hash: "5eed4e91ac",
		Summary: "Replace 1 of 4 instances (ml.p5.48xlarge) of instance group gpu-workers of ml-hp with BatchReplaceClusterNodes; " +
			"the group keeps its count, so no added hourly cost",
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "HyperPodInstance", Name: "i-0a1b2c3d4e5f60718",
			Fields: []ops.FieldChange{{Path: "InstanceStatus", From: "Failure (GPU XID 79: fallen off the bus)", To: "a new instance"}}}},
		Warnings: []string{"stops 1 pod(s) — training jobs interrupted, inference replicas dropped: " +
			"ml-platform/llama-worker-0 (PyTorchJob llama) on hyperpod-i-0a1b2c3d4e5f60718"}}
	p.Risk.Add(ops.RiskHigh, "replace: the instances and their local storage are gone for good; running work on them stops")
	p.Risk.Add(ops.RiskCritical, "interrupts 1 pod(s) running on the nodes")
	rec := &ops.Record{Request: req, Phase: ops.PhaseAwaitingApproval, Version: 2, Plan: p, Owner: req.Initiator, CreatedAt: t0, UpdatedAt: t0}
	rec = withApproval(rec, 2)
	rec.Approval.Rule = "rule 1: risk critical → 2 of leads, 30m"
	return rec
}
