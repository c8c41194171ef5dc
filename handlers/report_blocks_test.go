package handlers

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/report"
)

var updateReportGolden = flag.Bool("update-report-golden", false, "rewrite handlers/testdata/report*.golden")

func reportAt(t *testing.T) time.Time {
	t.Helper()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	return time.Date(2025, 3, 10, 9, 0, 0, 0, la)
}

func fullReport(t *testing.T) report.Report {
	at := reportAt(t)
	return report.Report{
		Name: "daily-capacity", Cluster: "ml-prod-eks", At: at,
		Groups: []report.Group{
			{Name: "infer-g5", InstanceType: "ml.g5.12xlarge", Current: 1, Target: 1, Status: "InService", Nodes: 1, Ready: 1,
				Health: map[string]int{"Schedulable": 1}, States: fleet.HealthCounts{Healthy: 1},
				GPUs: report.GPUs{Total: 4, Allocated: 2, Free: 2, Utilisation: 0.5}, Hourly: 7.09, PriceKnown: true},
			{Name: "spare", InstanceType: "ml.x9.huge", Current: 1, Target: 1, Status: "InService"},
			{Name: "train-p5", InstanceType: "ml.p5.48xlarge", Current: 3, Target: 4, Status: "Updating", Nodes: 3, Ready: 2,
				Health: map[string]int{"Schedulable": 1, "UnschedulablePendingReplacement": 1, "UnschedulablePendingReboot": 1},
				States: fleet.HealthCounts{Healthy: 1, Faulty: 1, Rebooting: 1},
				Unhealthy: []fleet.NodeHealth{
					{Node: "hyperpod-i-0b2c", InstanceID: "i-0b2c", State: fleet.HealthFaulty, Label: "UnschedulablePendingReplacement",
						InstanceStatus: "Failure", Reason: "GPU 3 reported Xid 79 <fallen off the bus>"},
					{Node: "hyperpod-i-0d4e", InstanceID: "i-0d4e", State: fleet.HealthRebooting, Label: "UnschedulablePendingReboot",
						InstanceStatus: "Pending", Reason: "failed a health check; HyperPod marked it for a reboot"},
				},
				GPUs: report.GPUs{Total: 24, Allocated: 12, Free: 12, Utilisation: 0.5}, Hourly: 339.204, PriceKnown: true},
		},
		GPUs: report.GPUs{Total: 28, Allocated: 14, Free: 14, Utilisation: 0.5},
		Pending: report.Pending{Pods: 2, GPUs: 9, Longest: 90 * time.Minute, Oldest: []report.PendingPod{
			{Namespace: "ml-platform", Name: "llm-ft-master-0", GPUs: 8, Since: at.Add(-90 * time.Minute), Waiting: 90 * time.Minute,
				Reason: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."},
			{Namespace: "research", Name: "notebook", GPUs: 1, Since: at.Add(-10 * time.Minute), Waiting: 10 * time.Minute},
		}},
		Workloads: []report.NamespaceWorkloads{
			{Namespace: "ml-platform", Training: []report.Workload{
				{Kind: "Job", Name: "fraud-v17", Pods: 2, Running: 2, GPUs: 12, Since: at.Add(-3 * time.Hour)},
				{Kind: "PyTorchJob", Name: "llm-ft", Pods: 1, GPUs: 8, Since: at.Add(-2 * time.Hour)},
			}},
			{Namespace: "ml-serving", Inference: []report.Workload{
				{Kind: "Deployment", Name: "ranker", Pods: 1, Running: 1, GPUs: 2, Since: at.Add(-48 * time.Hour)},
			}},
		},
		Spend:    report.Spend{Hourly: 346.294, Daily: 8311.056, Unknown: []string{"ml.x9.huge"}, Source: "built-in table: AWS public on-demand list prices"},
		Change:   &report.Change{Since: at.Add(-72 * time.Hour), Figures: report.Figures{Nodes: 1, GPUsTotal: 8, GPUsAllocated: 6, Utilisation: 0.0357, PendingPods: -3, Hourly: 113.068, Training: 1}},
		Warnings: []string{"AWS instance groups unavailable, node counts are the cluster's: ThrottlingException: Rate exceeded <retry later>"},
	}
}

// hugeReport is a cluster far beyond what one message can list.
func hugeReport(t *testing.T) report.Report {
	r := fullReport(t)
	r.Groups = nil
	for i := range 300 {
		r.Groups = append(r.Groups, report.Group{Name: fmt.Sprintf("group-%03d-%s", i, strings.Repeat("x", 40)), InstanceType: "ml.p5.48xlarge",
			Current: 8, Target: 8, Status: "InService", Nodes: 8, Ready: 8, Health: map[string]int{"Schedulable": 8}, States: fleet.HealthCounts{Healthy: 8},
			GPUs: report.GPUs{Total: 64, Allocated: 60, Free: 4}, Hourly: 904.544, PriceKnown: true})
	}
	r.Workloads = nil
	for i := range 200 {
		ns := report.NamespaceWorkloads{Namespace: fmt.Sprintf("team-%03d", i)}
		for j := range 40 {
			ns.Training = append(ns.Training, report.Workload{Kind: "Job", Name: fmt.Sprintf("job-%02d-%s", j, strings.Repeat("y", 30)), Pods: 8, Running: 8, GPUs: 64})
		}
		r.Workloads = append(r.Workloads, ns)
	}
	r.Pending.Pods, r.Pending.Oldest = 5000, nil
	for i := range report.MaxPendingListed {
		r.Pending.Oldest = append(r.Pending.Oldest, report.PendingPod{Namespace: "team-001", Name: fmt.Sprintf("pod-%d", i), GPUs: 8,
			Waiting: time.Duration(i) * 26 * time.Hour, Reason: strings.Repeat("Insufficient nvidia.com/gpu; ", 30)})
	}
	r.Kueue = &report.Kueue{Installed: true, Queue: "team-a", Resource: "nvidia.com/gpu"}
	for i := range 100 {
		cq := fmt.Sprintf("cq-%03d-%s", i, strings.Repeat("z", 200))
		r.Kueue.ClusterQueues = append(r.Kueue.ClusterQueues, report.ClusterQueue{Name: cq, Cohort: strings.Repeat("c", 200), Covered: true,
			Nominal: 1 << 40, Used: 1 << 41, Borrowed: 1 << 40, Pending: 1 << 30})
		for j := range 20 {
			r.Kueue.LocalQueues = append(r.Kueue.LocalQueues, report.LocalQueue{Namespace: fmt.Sprintf("ns-%02d-%s", j, strings.Repeat("n", 60)),
				Name: "team-a", ClusterQueue: cq, Pending: 1 << 30})
		}
	}
	for i := range 9 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("warning %d", i))
	}
	return r
}

// twoQueues is a Kueue view of two ClusterQueues: one borrowing from its cohort, one with workloads waiting.
func twoQueues() *report.Kueue {
	limit := int64(16)
	return &report.Kueue{Installed: true, Version: "v1beta2", Queue: "team-a", Resource: "nvidia.com/gpu",
		LocalQueues: []report.LocalQueue{
			{Namespace: "ml-platform", Name: "team-a", ClusterQueue: "team-a-cq", Pending: 0, Admitted: 3},
			{Namespace: "research", Name: "team-a", ClusterQueue: "shared-<cq>", Pending: 1204, Admitted: 2},
		},
		ClusterQueues: []report.ClusterQueue{
			{Name: "shared-<cq>", Covered: true, Flavors: []string{"p5"}, Nominal: 2048, Used: 2048, Pending: 1204, Reserving: 2, Admitted: 2},
			{Name: "team-a-cq", Cohort: "gpu-pool", Covered: true, Flavors: []string{"p5", "p4d"}, Nominal: 24, BorrowingLimit: &limit,
				Used: 32, Borrowed: 8, Reserving: 3, Admitted: 3},
		},
	}
}

func TestReportBlocksGolden(t *testing.T) {
	tests := []struct {
		name string
		r    func(t *testing.T) report.Report
	}{
		{"full", fullReport},
		{"sections", func(t *testing.T) report.Report {
			r := fullReport(t)
			r.Sections = []string{report.SectionGPUs, report.SectionSpend, report.SectionChart}
			r.Change, r.Warnings = nil, nil
			return r
		}},
		{"empty", func(t *testing.T) report.Report {
			return report.Report{Name: report.OnDemand, Cluster: "ml-dev-eks", At: reportAt(t)}
		}},
		{"huge", hugeReport},
		{"teams", func(t *testing.T) report.Report {
			r := fullReport(t)
			r.Sections = []string{report.SectionGPUs, report.SectionSpend}
			r.Change, r.Warnings = nil, nil
			week := ops.BudgetLimit{Name: "ml-research-weekly", Path: "budgets[1]", Holder: "team S0MLRESEARCH", Window: ops.WindowWeek,
				Limit: ops.Amount{Cost: 5000, GPUHours: 400}}
			day := ops.BudgetLimit{Name: "inference-daily", Path: "budgets[2]", Holder: "team S0INFER on ml-prod-eks", Window: ops.WindowDay,
				Limit: ops.Amount{Cost: 1000}}
			r.Spend.Teams = []ops.BudgetUse{
				{Budget: week, Start: r.At.Add(-50 * time.Hour), End: r.At.Add(118 * time.Hour), Used: ops.Amount{Cost: 3200, GPUHours: 256}},
				{Budget: day, Start: r.At.Add(-9 * time.Hour), End: r.At.Add(15 * time.Hour), Used: ops.Amount{Cost: 1000}},
			}
			return r
		}},
		{"reservations", func(t *testing.T) report.Report {
			r := fullReport(t)
			r.Change, r.Warnings = nil, nil
			end := r.At.Add(3*time.Hour + 20*time.Minute)
			r.Reservations = []ops.CapacityReservation{
				{Group: "train-p5", Plan: "tp-ended", Status: "Expired", EndTime: r.At.Add(-time.Hour), Left: -time.Hour},
				{Group: "train-<p5>", Plan: "tp-evening", Status: "Active", EndTime: end, Left: 3*time.Hour + 20*time.Minute},
			}
			return r
		}},
		{"queues", func(t *testing.T) report.Report {
			r := fullReport(t)
			r.Change, r.Warnings = nil, nil
			r.Kueue = twoQueues()
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks := ReportBlocks(tt.r(t))
			checkReportLimits(t, blocks)
			got, err := json.MarshalIndent(slack.Blocks{BlockSet: blocks}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "report_"+tt.name+".golden")
			if *updateReportGolden {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./handlers -run TestReportBlocksGolden -update-report-golden)", err)
			}
			if string(want) != string(got)+"\n" {
				t.Errorf("blocks differ from %s (rerun with -update-report-golden and review the diff):\n%s", path, got)
			}
		})
	}
}

// checkReportLimits checks the Block Kit limits Slack rejects a message for.
func checkReportLimits(t *testing.T, blocks []slack.Block) {
	t.Helper()
	if len(blocks) > reportMaxBlocks {
		t.Errorf("%d blocks, Slack allows %d", len(blocks), reportMaxBlocks)
	}
	for i, b := range blocks {
		switch b := b.(type) {
		case *slack.HeaderBlock:
			if n := utf8.RuneCountInString(b.Text.Text); n > reportMaxHeaderText {
				t.Errorf("block %d: header of %d characters", i, n)
			}
		case *slack.SectionBlock:
			if b.Text != nil && utf8.RuneCountInString(b.Text.Text) > reportMaxSectionText {
				t.Errorf("block %d: section text of %d characters", i, utf8.RuneCountInString(b.Text.Text))
			}
			if len(b.Fields) > 10 {
				t.Errorf("block %d: %d fields", i, len(b.Fields))
			}
			for _, f := range b.Fields {
				if utf8.RuneCountInString(f.Text) > reportMaxFieldText {
					t.Errorf("block %d: field of %d characters", i, utf8.RuneCountInString(f.Text))
				}
			}
			if b.Text == nil && len(b.Fields) == 0 {
				t.Errorf("block %d: empty section", i)
			}
		case *slack.ContextBlock:
			if n := len(b.ContextElements.Elements); n == 0 || n > 10 {
				t.Errorf("block %d: %d context elements", i, n)
			}
		}
	}
}

func TestReportQueueBlocks(t *testing.T) {
	many := twoQueues()
	for i := range 40 {
		name := fmt.Sprintf("cq-%02d", i)
		many.LocalQueues = append(many.LocalQueues, report.LocalQueue{Namespace: name, Name: "team-a", ClusterQueue: name})
		many.ClusterQueues = append(many.ClusterQueues, report.ClusterQueue{Name: name})
	}
	tests := []struct {
		name      string
		kueue     *report.Kueue
		sections  []string
		blocks    int
		want, not []string
	}{
		{name: "not configured", not: []string{"Kueue"}},
		{name: "not installed", kueue: &report.Kueue{Queue: "team-a", Resource: "nvidia.com/gpu"}, blocks: 1,
			want: []string{"*Kueue*: not installed", "`team-a`"}},
		{name: "no LocalQueue", kueue: &report.Kueue{Installed: true, Queue: "team-a", Resource: "nvidia.com/gpu"}, blocks: 1,
			want: []string{"no LocalQueue `team-a`"}},
		{name: "two queues", kueue: twoQueues(), blocks: 3,
			want: []string{"`shared-&lt;cq&gt;`", "2,048 of 2,048", "1,204 pending", "may borrow 16", "32 of 24 (8 borrowed)", "no cohort to borrow from"},
			not:  []string{"shared-<cq>"}},
		{name: "missing and uncovered", kueue: &report.Kueue{Installed: true, Queue: "q", Resource: "nvidia.com/gpu",
			LocalQueues:   []report.LocalQueue{{Namespace: "a", Name: "q", ClusterQueue: "gone"}, {Namespace: "b", Name: "q", ClusterQueue: "cpu"}},
			ClusterQueues: []report.ClusterQueue{{Name: "cpu"}, {Name: "gone", Missing: true}}}, blocks: 3,
			want: []string{"`gone` does not exist", "none: the queue has no nvidia.com/gpu quota"}},
		{name: "many queues", kueue: many, blocks: reportMaxQueueBlocks, want: []string{"… and 38 more ClusterQueues"}},
		{name: "section off", kueue: twoQueues(), sections: []string{report.SectionGPUs}, not: []string{"Kueue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fullReport(t)
			r.Kueue, r.Sections = tt.kueue, tt.sections
			blocks := ReportBlocks(r)
			checkReportLimits(t, blocks)
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(blocks); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("report does not say %q", w)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(got, w) {
					t.Errorf("report says %q", w)
				}
			}
			if tt.kueue != nil && tt.sections == nil {
				if n := len(reportQueueBlocks(tt.kueue, reportMaxQueueBlocks)); n != tt.blocks {
					t.Errorf("%d queue blocks, want %d", n, tt.blocks)
				}
			}
		})
	}
}

func TestReportBlocksHugeSaysWhatIsLeftOut(t *testing.T) {
	blocks := ReportBlocks(hugeReport(t))
	b, _ := json.Marshal(blocks)
	for _, want := range []string{"more groups", "more namespaces", "and 4990 more", "6 more warnings", "more ClusterQueues", "Estimated spend"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("huge report does not say %q", want)
		}
	}
}

func TestReportFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{reportMoney(8311.056), "$8,311.06"},
		{reportNumber(0), "0"},
		{reportNumber(999), "999"},
		{reportNumber(1024), "1,024"},
		{reportNumber(-1234567), "−1,234,567"},
		{reportMoney(0), "$0.00"},
		{reportMoney(1234567.891), "$1,234,567.89"},
		{reportSignedMoney(-113.068), "−$113.07"},
		{reportSignedMoney(113.068), "+$113.07"},
		{reportAge(45 * time.Second), "45s"},
		{reportAge(90 * time.Minute), "1h30m"},
		{reportAge(3 * time.Hour), "3h"},
		{reportAge(52 * time.Hour), "2d4h"},
		{reportSigned(-3), "−3"},
		{reportSigned(0), "±0"},
		{reportSignedFloat(3.57), "+3.6"},
		{reportSignedFloat(-0.01), "±0"},
		{reportEscape("a <b> & c"), "a &lt;b&gt; &amp; c"},
		{reportClip("abcdef", 4), "abc…"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// The chart is part of the report message: an image of the uploaded file right after the GPU figures, and a line
// saying what it shows; the whole stays within Slack's block limit.
func TestReportWithChart(t *testing.T) {
	for _, r := range []report.Report{fullReport(t), hugeReport(t)} {
		blocks := ReportWithChart(r, "F0CHART")
		if len(blocks) > reportMaxBlocks {
			t.Errorf("%d blocks, Slack allows %d", len(blocks), reportMaxBlocks)
		}
		img := -1
		for i, b := range blocks {
			if im, ok := b.(*slack.ImageBlock); ok && im.SlackFile != nil && im.SlackFile.ID == "F0CHART" {
				img = i
			}
		}
		if img < 0 || img+1 >= len(blocks) {
			t.Fatalf("no chart image in the report")
		}
		if raw, _ := json.Marshal(blocks[img+1]); !strings.Contains(string(raw), "The chart: GPUs of each instance group") {
			t.Errorf("the report does not say what the chart shows: %s", raw)
		}
		if s, ok := blocks[img-1].(*slack.SectionBlock); !ok || len(s.Fields) == 0 {
			t.Errorf("the chart is not right after the GPU figures (block %d)", img)
		}
	}
	if got := ReportWithChart(fullReport(t), ""); len(got) != len(ReportBlocks(fullReport(t))) {
		t.Errorf("without a chart the report changed")
	}
}

// A huge report with many reservations ending keeps within Slack's limits, lists the first ten soonest and counts
// the rest, and still closes with the spend.
func TestReportBlocksHugeWithReservations(t *testing.T) {
	r := hugeReport(t)
	for i := range 25 {
		left := time.Duration(i+1) * 30 * time.Minute
		r.Reservations = append(r.Reservations, ops.CapacityReservation{Group: fmt.Sprintf("group-%02d", i), Plan: fmt.Sprintf("tp-%02d", i),
			Status: "Active", EndTime: r.At.Add(left), Left: left})
	}
	blocks := ReportBlocks(r)
	checkReportLimits(t, blocks)
	b, _ := json.Marshal(blocks)
	for _, want := range []string{"Reservations ending within 24 h* (25)", "tp-09", "and 15 more", "more groups", "Estimated spend"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("huge report with reservations does not say %q", want)
		}
	}
	if strings.Contains(string(b), "tp-10") {
		t.Error("the eleventh reservation is named; at most ten are")
	}
}
