package kube

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Hourly rates of one GPU of the built-in table's types: a node's price over its GPUs.
const (
	p5PerGPU       = 113.068 / 8 // ml.p5.48xlarge: 8 H100s
	g5PerGPU       = 7.09 / 4    // ml.g5.12xlarge: 4 A10Gs
	g5SinglePerGPU = 5.12 / 1    // ml.g5.16xlarge: 1 A10G
)

// TestGPUWorkloadPricedWhereItsPodsMayLand is issue 32 point 7: a budget must count the most expensive place a
// workload's pods may land. A 1-GPU job was priced at the p5 rate, then at the g5 rate once a g5 group existed,
// though its pods could still land on p5 nodes.
func TestGPUWorkloadPricedWhereItsPodsMayLand(t *testing.T) {
	p5 := func(name string) runtime.Object {
		return gpuNodeObj(name, "p5-workers", "ml.p5.48xlarge", 8, "Schedulable")
	}
	g5 := func(name string) runtime.Object {
		return gpuNodeObj(name, "g5-workers", "ml.g5.12xlarge", 4, "Schedulable")
	}
	g5single := func(name string) runtime.Object {
		return gpuNodeObj(name, "g5-small", "ml.g5.16xlarge", 1, "Schedulable")
	}
	cpu := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-1", Labels: map[string]string{LabelInstanceType: "ml.m5.xlarge",
		"sagemaker.amazonaws.com/compute-type": "hyperpod"}}}
	pinG5 := func(c *config.Cluster) { c.GPUNodes.NodeSelector[LabelInstanceType] = "ml.g5.12xlarge" }
	tests := []struct {
		name    string
		op      string
		gpus    int // GPUs of its one pod; 0 is 1
		nodes   []runtime.Object
		cfg     func(*config.Cluster)
		perGPU  float64 // the hourly rate of one GPU the plan must use
		landsOn string  // the type it is priced at
	}{
		{name: "only p5 nodes", nodes: []runtime.Object{p5("p5-1")}, perGPU: p5PerGPU, landsOn: "ml.p5.48xlarge"},
		{name: "a g5 group beside p5, more g5 nodes than p5", nodes: []runtime.Object{p5("p5-1"), g5("g5-1"), g5("g5-2")},
			perGPU: p5PerGPU, landsOn: "ml.p5.48xlarge"},
		{name: "p5 scaled to zero but in the cluster's instanceTypes", nodes: []runtime.Object{g5("g5-1"), g5("g5-2")},
			cfg: func(c *config.Cluster) {
				c.InstanceTypes = []string{"ml.p5.48xlarge", "ml.g5.12xlarge", "ml.m5.xlarge"}
			},
			perGPU: p5PerGPU, landsOn: "ml.p5.48xlarge"},
		{name: "pinned to g5 by the pods' node selector", nodes: []runtime.Object{p5("p5-1"), g5("g5-1"), g5("g5-2")},
			cfg: pinG5, perGPU: g5PerGPU, landsOn: "ml.g5.12xlarge"},
		{name: "pinned to g5 while p5 is the most common type", nodes: []runtime.Object{p5("p5-1"), p5("p5-2"), p5("p5-3"), g5("g5-1")},
			cfg:    func(c *config.Cluster) { pinG5(c); c.InstanceTypes = []string{"ml.p5.48xlarge", "ml.g5.12xlarge"} },
			perGPU: g5PerGPU, landsOn: "ml.g5.12xlarge"},
		{name: "nodes without GPUs do not count", nodes: []runtime.Object{cpu, g5("g5-1")}, perGPU: g5PerGPU, landsOn: "ml.g5.12xlarge"},
		{name: "4-GPU pods do not fit the dearer 1-GPU type", gpus: 4, nodes: []runtime.Object{g5single("g5s-1"), g5single("g5s-2"), g5("g5-1")},
			perGPU: g5PerGPU, landsOn: "ml.g5.12xlarge"},
		{name: "1-GPU pods fit the dearer 1-GPU type", nodes: []runtime.Object{g5single("g5s-1"), g5("g5-1"), g5("g5-2")},
			perGPU: g5SinglePerGPU, landsOn: "ml.g5.16xlarge"},
		{name: "inference beside a g5 group", op: "deploy-inference", nodes: []runtime.Object{p5("p5-1"), g5("g5-1"), g5("g5-2")},
			perGPU: p5PerGPU, landsOn: "ml.p5.48xlarge"},
		{name: "inference pinned to g5", op: "deploy-inference", nodes: []runtime.Object{p5("p5-1"), g5("g5-1"), g5("g5-2")},
			cfg: pinG5, perGPU: g5PerGPU, landsOn: "ml.g5.12xlarge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append([]runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}}, tt.nodes...)
			e := newEnv(t, objs, withConfig(tt.cfg))
			gpus := max(tt.gpus, 1)
			var req *ops.Request
			if tt.op == "deploy-inference" {
				req = request("deploy-inference", map[string]any{"name": "scorer", "image": allowedImg, "replicas": "1", "gpus": fmt.Sprint(gpus)})
			} else {
				req = request("submit-training-job", trainParams(map[string]any{"replicas": "1", "gpus": fmt.Sprint(gpus), "max-hours": "10"}))
			}
			_, p := e.plan(t, req)
			wantHourly := tt.perGPU * float64(gpus)
			if math.Abs(p.Cost.HourlyDelta-wantHourly) > 1e-9 {
				t.Fatalf("priced at $%.4f/h, want $%.4f/h (%s's rate): %+v", p.Cost.HourlyDelta, wantHourly, tt.landsOn, p.Cost)
			}
			if len(p.Cost.Lines) != 1 || !strings.Contains(p.Cost.Lines[0].Item, " of "+tt.landsOn+" ") {
				t.Fatalf("cost lines = %+v, want one priced at %s", p.Cost.Lines, tt.landsOn)
			}
			if !strings.HasPrefix(p.Cost.PricedAt, "priced at "+tt.landsOn+", the ") || !strings.Contains(p.Cost.String(), p.Cost.PricedAt) {
				t.Fatalf("the plan says %q (%s), want it priced at %s in words", p.Cost.PricedAt, p.Cost, tt.landsOn)
			}

			// The charge against a budget is the same worst case: the run's bounded total for a job, the added
			// $/h until the window resets for a server.
			now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
			b := ops.BudgetLimit{Name: "team-daily", Holder: "ml-platform", Window: ops.WindowDay, Limit: ops.Amount{Cost: 100000}}
			ch := ops.Charges([]ops.BudgetLimit{b}, p, now)
			hours := 10.0
			if tt.op == "deploy-inference" {
				hours = ch[0].End.Sub(now).Hours()
			}
			if want := wantHourly * hours; math.Abs(ch[0].Amount.Cost-want) > 1e-6 {
				t.Fatalf("budget charged $%.2f, want $%.2f (%s's rate for %g h)", ch[0].Amount.Cost, want, tt.landsOn, hours)
			}
		})
	}
}

// TestPricedAtSaysWhichTypeAndWhy is what a lead reads under the cost: the type the estimate uses and of which.
func TestPricedAtSaysWhichTypeAndWhy(t *testing.T) {
	p5 := gpuNodeObj("p5-1", "p5-workers", "ml.p5.48xlarge", 8, "Schedulable")
	g5 := gpuNodeObj("g5-1", "g5-workers", "ml.g5.12xlarge", 4, "Schedulable")
	tests := []struct {
		name  string
		nodes []runtime.Object
		op    string
		want  string
		of    string // the types it chose among
	}{
		{name: "several types", nodes: []runtime.Object{p5, g5}, op: "submit-training-job",
			want: "priced at ml.p5.48xlarge, the most expensive type its pods may land on", of: "ml.g5.12xlarge ml.p5.48xlarge"},
		{name: "one type", nodes: []runtime.Object{g5}, op: "submit-training-job",
			want: "priced at ml.g5.12xlarge, the only GPU type its pods may land on"},
		{name: "freeing GPUs", nodes: []runtime.Object{p5, g5, managedJob("fraud-v17", nil)}, op: "stop-training-job",
			want: "priced at ml.g5.12xlarge, the least expensive type its pods may run on, so the saving is not overstated",
			of:   "ml.g5.12xlarge ml.p5.48xlarge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, append([]runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}}, tt.nodes...))
			params := trainParams(map[string]any{"replicas": "1", "gpus": "1"})
			if tt.op == "stop-training-job" {
				params = map[string]any{"name": "fraud-v17"}
			}
			_, p := e.plan(t, request(tt.op, params))
			if p.Cost.PricedAt != tt.want || strings.Join(p.Cost.MayLandOn, " ") != tt.of {
				t.Fatalf("priced at:\n got %q of %q\nwant %q of %q", p.Cost.PricedAt, p.Cost.MayLandOn, tt.want, tt.of)
			}
		})
	}
}

// TestFreedGPUsPricedWhereThePodsMayRun: stopping a job prices what it frees at the least expensive type its pods
// may run on, read from the live object's own constraints.
func TestFreedGPUsPricedWhereThePodsMayRun(t *testing.T) {
	pinnedP5 := managedJob("fraud-v17", nil)
	pinnedP5.Spec.Template.Spec.NodeSelector = map[string]string{LabelInstanceType: "ml.p5.48xlarge"}
	tests := []struct {
		name   string
		job    runtime.Object
		perGPU float64
	}{
		{name: "anywhere", job: managedJob("fraud-v17", nil), perGPU: g5PerGPU},
		{name: "pinned to p5 by its pod template", job: pinnedP5, perGPU: p5PerGPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, []runtime.Object{gpuNodeObj("p5-1", "p5-workers", "ml.p5.48xlarge", 8, "Schedulable"),
				gpuNodeObj("g5-1", "g5-workers", "ml.g5.12xlarge", 4, "Schedulable"), tt.job})
			_, p := e.plan(t, request("stop-training-job", map[string]any{"name": "fraud-v17"}))
			// managedJob runs 2 pods × 4 GPUs.
			if want := -8 * tt.perGPU; math.Abs(p.Cost.HourlyDelta-want) > 1e-9 || p.Cost.GPUs != -8 {
				t.Fatalf("cost = %+v, want $%.4f/h for 8 GPUs freed", p.Cost, want)
			}
		})
	}
}

// TestPlacementFollowsThePodsConstraints: the types a pod may land on are those its node selector and required node
// affinity allow, among the cluster's GPU nodes and the GPU types of its instanceTypes.
func TestPlacementFollowsThePodsConstraints(t *testing.T) {
	nodes := []runtime.Object{gpuNodeObj("p5-1", "p5-workers", "ml.p5.48xlarge", 8, "Schedulable"),
		gpuNodeObj("g5-1", "g5-workers", "ml.g5.12xlarge", 4, "Schedulable")}
	unlabelled := gpuNodeObj("odd-1", "odd", "", 4, "Schedulable")
	delete(unlabelled.Labels, LabelInstanceType)
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	affinity := func(terms ...[]corev1.NodeSelectorRequirement) *corev1.Affinity {
		a := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		for _, e := range terms {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: e})
		}
		return a
	}
	tests := []struct {
		name       string
		spec       corev1.PodSpec
		types      []string // configured instanceTypes
		extra      []runtime.Object
		want       string
		unlabelled bool
	}{
		{name: "unconstrained", want: "ml.g5.12xlarge ml.p5.48xlarge"},
		{name: "configured GPU types count, CPU and Trainium ones do not", types: []string{"ml.p5e.48xlarge", "ml.m5.xlarge", "ml.trn1.32xlarge"},
			want: "ml.g5.12xlarge ml.p5.48xlarge ml.p5e.48xlarge"},
		{name: "affinity In", spec: corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(LabelInstanceType, corev1.NodeSelectorOpIn, "ml.g5.12xlarge")})},
			types: []string{"ml.p5e.48xlarge"}, want: "ml.g5.12xlarge"},
		{name: "affinity NotIn", spec: corev1.PodSpec{Affinity: affinity([]corev1.NodeSelectorRequirement{req(LabelInstanceType, corev1.NodeSelectorOpNotIn, "ml.p5.48xlarge")})},
			types: []string{"ml.p5e.48xlarge"}, want: "ml.g5.12xlarge ml.p5e.48xlarge"},
		{name: "affinity terms are ORed", spec: corev1.PodSpec{Affinity: affinity(
			[]corev1.NodeSelectorRequirement{req(LabelInstanceType, corev1.NodeSelectorOpIn, "ml.g5.12xlarge")},
			[]corev1.NodeSelectorRequirement{req(LabelHyperPodGroup, corev1.NodeSelectorOpIn, "p5-workers")})},
			want: "ml.g5.12xlarge ml.p5.48xlarge"},
		{name: "an empty term matches nothing", spec: corev1.PodSpec{Affinity: affinity(nil)}, want: ""},
		{name: "a group selector: a configured type may carry any group", spec: corev1.PodSpec{NodeSelector: map[string]string{LabelHyperPodGroup: "g5-workers"}},
			types: []string{"ml.p5e.48xlarge"}, want: "ml.g5.12xlarge ml.p5e.48xlarge"},
		{name: "HyperPod nodes only: EKS node group types do not count", spec: corev1.PodSpec{NodeSelector: map[string]string{LabelComputeType: "hyperpod"}},
			types: []string{"p5e.48xlarge", "ml.p5e.48xlarge"}, want: "ml.g5.12xlarge ml.p5.48xlarge ml.p5e.48xlarge"},
		{name: "pinned to a type with no node yet", spec: corev1.PodSpec{NodeSelector: map[string]string{LabelInstanceType: "ml.g5.48xlarge"}},
			types: []string{"ml.p5e.48xlarge"}, want: "ml.g5.48xlarge"},
		{name: "a GPU node without an instance type", extra: []runtime.Object{unlabelled}, want: "ml.g5.12xlarge ml.p5.48xlarge", unlabelled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, append(slices.Clone(nodes), tt.extra...), withConfig(func(c *config.Cluster) { c.InstanceTypes = tt.types }))
			tg, err := e.cs.resolve(request("submit-training-job", nil), true)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := e.reg.placementOf(context.Background(), tg, tt.spec, 1)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range pl.types {
				got = append(got, g.instanceType)
			}
			if strings.Join(got, " ") != tt.want || pl.unlabelled != tt.unlabelled {
				t.Fatalf("types = %v (unlabelled %v), want %q (unlabelled %v)", got, pl.unlabelled, tt.want, tt.unlabelled)
			}
		})
	}
}

// TestUnpricedTypeLeavesTheEstimateIncomplete: a type the pods may land on without a price makes the plan say the
// price is unknown, and the known worst case still counts, so a budget is charged at least that.
func TestUnpricedTypeLeavesTheEstimateIncomplete(t *testing.T) {
	e := newEnv(t, []runtime.Object{gpuNodeObj("p5-1", "p5-workers", "ml.p5.48xlarge", 8, "Schedulable"),
		gpuNodeObj("x9-1", "x9-workers", "ml.x9.mystery", 8, "Schedulable")})
	_, p := e.plan(t, request("submit-training-job", trainParams(map[string]any{"replicas": "1", "gpus": "1", "max-hours": "10"})))
	if p.Cost.Known() || strings.Join(p.Cost.Unknown, " ") != "ml.x9.mystery" || !strings.Contains(p.Cost.String(), "price unknown for ml.x9.mystery") {
		t.Fatalf("cost = %+v (%s), want the price of ml.x9.mystery unknown", p.Cost, p.Cost)
	}
	if math.Abs(p.Cost.HourlyDelta-p5PerGPU) > 1e-9 || math.Abs(p.Cost.Total-10*p5PerGPU) > 1e-9 {
		t.Fatalf("cost = %+v, want the p5 rate counted", p.Cost)
	}
}
