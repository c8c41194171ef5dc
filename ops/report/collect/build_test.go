package collect

import (
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/pricing"
	"github.com/hyperops/hyperops/ops/report"

	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

func newBuilder(objs []runtime.Object, groups GroupSource, samples SampleStore) (*Builder, *clockwork.FakeClock) {
	clock := clockwork.NewFakeClockAt(t0)
	return &Builder{Kube: kubeFor(objs...), Groups: groups, Pricer: pricing.NewTable(nil), Samples: samples, Clock: clock}, clock
}

var prodSpec = Spec{Report: "daily-capacity", Cluster: "ml-prod-eks", Region: "us-west-2"}

func TestBuildFigures(t *testing.T) {
	aws := fakeGroups{groups: []GroupStatus{
		{Name: "train-p5", InstanceType: "ml.p5.48xlarge", Current: 3, Target: 4, Status: "Updating"},
		{Name: "infer-g5", InstanceType: "ml.g5.12xlarge", Current: 1, Target: 1, Status: "InService"},
		{Name: "spare", InstanceType: "ml.x9.huge", Current: 1, Target: 1, Status: "InService"},
	}}
	b, _ := newBuilder(fixture(), aws, nil)
	r, err := b.Build(context.Background(), prodSpec)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	wantGroups := []report.Group{
		{Name: "infer-g5", InstanceType: "ml.g5.12xlarge", Current: 1, Target: 1, Status: "InService", Nodes: 1, Ready: 1,
			Health: map[string]int{"Schedulable": 1}, States: fleet.HealthCounts{Healthy: 1}, GPUs: report.GPUs{Total: 4, Allocated: 2, Free: 2, Utilisation: 0.5},
			Hourly: 7.09, PriceKnown: true},
		{Name: "spare", InstanceType: "ml.x9.huge", Current: 1, Target: 1, Status: "InService"},
		{Name: "train-p5", InstanceType: "ml.p5.48xlarge", Current: 3, Target: 4, Status: "Updating", Nodes: 3, Ready: 2,
			Health: map[string]int{"Schedulable": 2, "UnschedulablePendingReplacement": 1}, States: fleet.HealthCounts{Healthy: 2, Faulty: 1},
			Unhealthy: []fleet.NodeHealth{{Node: "p5-3", State: fleet.HealthFaulty, Label: "UnschedulablePendingReplacement",
				Reason: "failed a health check; HyperPod marked it for replacement"}},
			GPUs: report.GPUs{Total: 24, Allocated: 12, Free: 12, Utilisation: 0.5}, Hourly: 3 * 113.068, PriceKnown: true},
	}
	if !reflect.DeepEqual(r.Groups, wantGroups) {
		t.Errorf("groups:\n got %+v\nwant %+v", r.Groups, wantGroups)
	}
	if want := (report.GPUs{Total: 28, Allocated: 14, Free: 14, Utilisation: 0.5}); r.GPUs != want {
		t.Errorf("GPUs = %+v, want %+v", r.GPUs, want)
	}
	if r.Pending.Pods != 2 || r.Pending.GPUs != 9 || r.Pending.Longest != 90*time.Minute {
		t.Errorf("pending = %d pods, %d GPUs, longest %v; want 2, 9, 1h30m", r.Pending.Pods, r.Pending.GPUs, r.Pending.Longest)
	}
	if len(r.Pending.Oldest) != 2 || r.Pending.Oldest[0].Name != "llm-ft-master-0" || !strings.Contains(r.Pending.Oldest[0].Reason, "Insufficient") ||
		r.Pending.Oldest[1].Name != "notebook" || r.Pending.Oldest[1].Waiting != 10*time.Minute {
		t.Errorf("pending pods = %+v", r.Pending.Oldest)
	}
	wantWork := []report.NamespaceWorkloads{
		{Namespace: "ml-platform", Training: []report.Workload{
			{Kind: "Job", Name: "fraud-v17", Pods: 2, Running: 2, GPUs: 12, Since: t0.Add(-3 * time.Hour)},
			{Kind: "PyTorchJob", Name: "llm-ft", Pods: 1, Running: 0, GPUs: 8, Since: t0.Add(-2 * time.Hour)},
		}},
		{Namespace: "ml-serving", Inference: []report.Workload{
			{Kind: "Deployment", Name: "ranker", Pods: 1, Running: 1, GPUs: 2, Since: t0.Add(-48 * time.Hour)},
		}},
	}
	if !reflect.DeepEqual(r.Workloads, wantWork) {
		t.Errorf("workloads:\n got %+v\nwant %+v", r.Workloads, wantWork)
	}
	wantHourly := 3*113.068 + 7.09
	if math.Abs(r.Spend.Hourly-wantHourly) > 1e-9 || math.Abs(r.Spend.Daily-24*wantHourly) > 1e-9 {
		t.Errorf("spend = %v/h %v/day, want %v/h", r.Spend.Hourly, r.Spend.Daily, wantHourly)
	}
	if !reflect.DeepEqual(r.Spend.Unknown, []string{"ml.x9.huge"}) || r.Spend.Source != pricing.BuiltinSource {
		t.Errorf("spend unknown %v source %q", r.Spend.Unknown, r.Spend.Source)
	}
	if len(r.Warnings) != 0 || r.Change != nil || len(r.History) != 1 {
		t.Errorf("warnings %v change %v history %d; want none, nil, 1", r.Warnings, r.Change, len(r.History))
	}
}

func TestBuildDegradesWithoutAWSOrSamples(t *testing.T) {
	tests := []struct {
		name     string
		groups   GroupSource
		samples  SampleStore
		warnings []string
		current  int
	}{
		{name: "no AWS view configured", current: 3},
		{name: "AWS unreachable", groups: fakeGroups{err: errors.New("ThrottlingException")}, warnings: []string{"AWS instance groups unavailable"}, current: 3},
		{name: "Redis unreachable", groups: fakeGroups{}, samples: &memSamples{err: ops.ErrStateUnavailable},
			warnings: []string{"earlier reports unavailable", "not recorded"}, current: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBuilder(fixture(), tt.groups, tt.samples)
			r, err := b.Build(context.Background(), prodSpec)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if len(r.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings = %q, want %d containing %q", r.Warnings, len(tt.warnings), tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.Contains(r.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, r.Warnings[i], w)
				}
			}
			g := r.Groups[len(r.Groups)-1]
			if g.Name != "train-p5" || g.Current != tt.current || g.Target != tt.current || g.Status != "" {
				t.Errorf("train-p5 = %+v, want the node count (%d) as current and target", g, tt.current)
			}
		})
	}
}

func TestBuildClusterErrors(t *testing.T) {
	broken := fake.NewClientset()
	broken.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	tests := []struct {
		name    string
		cluster string
		kube    KubeClients
		code    ops.Code
	}{
		{"unknown cluster", "nope", kubeFor(), ops.CodeUnknownCluster},
		{"API server down", "ml-prod-eks", func(string) (kubernetes.Interface, error) { return broken, nil }, ops.CodeClusterUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Builder{Kube: tt.kube, Pricer: pricing.NewTable(nil)}
			_, err := b.Build(context.Background(), Spec{Report: "r", Cluster: tt.cluster})
			if got := ops.AsError(err); got == nil || got.Code != tt.code {
				t.Fatalf("err = %v, want code %s", err, tt.code)
			}
		})
	}
}

func TestBuildChangeAndHistory(t *testing.T) {
	samples := &memSamples{}
	objs := fixture()
	b, clock := newBuilder(objs, nil, samples)
	spec := prodSpec
	spec.Samples = 3
	first, err := b.Build(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if first.Change != nil {
		t.Fatalf("first report has a change: %+v", first.Change)
	}
	// A day later one more node joined and a pending pod got placed on it.
	clock.Advance(24 * time.Hour)
	cs, _ := b.Kube("ml-prod-eks")
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, hpNode("p5-4", "train-p5", "ml.p5.48xlarge", 8, true, "Schedulable"), createOpts); err != nil {
		t.Fatal(err)
	}
	p, _ := cs.CoreV1().Pods("ml-platform").Get(ctx, "llm-ft-master-0", getOpts)
	p.Spec.NodeName, p.Status.Phase = "p5-4", corev1.PodRunning
	if _, err := cs.CoreV1().Pods("ml-platform").Update(ctx, p, updateOpts); err != nil {
		t.Fatal(err)
	}
	second, err := b.Build(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := &report.Change{Since: t0, Figures: report.Figures{Nodes: 1, GPUsTotal: 8, GPUsAllocated: 8, Utilisation: 22.0/36 - 0.5, PendingPods: -1, Hourly: 113.068}}
	if c := second.Change; c == nil || !c.Since.Equal(want.Since) || c.Nodes != want.Nodes || c.GPUsTotal != want.GPUsTotal ||
		c.GPUsAllocated != want.GPUsAllocated || math.Abs(c.Utilisation-want.Utilisation) > 1e-9 || c.PendingPods != want.PendingPods ||
		math.Abs(c.Hourly-want.Hourly) > 1e-9 {
		t.Errorf("change = %+v, want %+v", c, want)
	}
	for range 3 {
		clock.Advance(24 * time.Hour)
		if _, err := b.Build(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	last, err := b.Build(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(last.History) != 3 || !last.History[2].At.Equal(clock.Now()) {
		t.Errorf("history = %+v, want the 3 newest ending now", last.History)
	}
	stored, _ := samples.Samples(ctx, SeriesName("daily-capacity", "ml-prod-eks"))
	if len(stored) != 3 {
		t.Errorf("series keeps %d samples, want 3", len(stored))
	}
}

func TestSpecsFor(t *testing.T) {
	cfg := &config.Config{Clusters: []config.Cluster{{Name: "a", Region: "us-west-2"}, {Name: "b", Region: "eu-west-1"}}}
	tests := []struct {
		name   string
		report config.Report
		want   []string
	}{
		{"named clusters", config.Report{Name: "r", Clusters: []string{"b"}, Timezone: "America/Los_Angeles"}, []string{"b/eu-west-1"}},
		{"all clusters", config.Report{Name: "r", Timezone: "UTC"}, []string{"a/us-west-2", "b/eu-west-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range SpecsFor(cfg, &tt.report) {
				got = append(got, s.Cluster+"/"+s.Region)
				if s.Location.String() != tt.report.Timezone || s.Report != "r" {
					t.Errorf("spec %+v: want zone %s", s, tt.report.Timezone)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("specs = %v, want %v", got, tt.want)
			}
		})
	}
}

// selectingFake is a fake clientset whose pod lists honour field selectors as the API server does: the fields a pod
// list may select on, anything else a 400.
func selectingFake(objs ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objs...)
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		la := a.(k8stesting.ListActionImpl)
		sel := la.GetListRestrictions().Fields
		for _, r := range sel.Requirements() {
			switch r.Field {
			case "metadata.name", "metadata.namespace", "spec.nodeName", "status.phase":
			default:
				return true, nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
		obj, err := cs.Tracker().List(la.GetResource(), la.GetKind(), la.GetNamespace(), la.ListOptions)
		if err != nil {
			return true, nil, err
		}
		l := obj.(*corev1.PodList)
		kept := l.Items[:0]
		for i := range l.Items {
			p := &l.Items[i]
			if sel.Matches(fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace,
				"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}) {
				kept = append(kept, *p)
			}
		}
		l.Items = kept
		return true, l, nil
	})
	return cs
}

func TestBuildAsksForLivePodsOnly(t *testing.T) {
	// Finished pods on a node and in a namespace with live ones: whether the server leaves them out or not, they
	// hold no GPUs, and the pod list asks the server to leave them out.
	objs := append(fixture(),
		gpuPod("ml-platform", "done-0", 8, t0.Add(-5*time.Hour), onNode("p5-3"), phase(corev1.PodSucceeded)),
		gpuPod("research", "crashed", 4, t0.Add(-5*time.Hour), phase(corev1.PodFailed)),
	)
	tests := []struct {
		name string
		cs   *fake.Clientset
	}{
		{"server honours the field selector", selectingFake(objs...)},
		{"server ignores the field selector", fake.NewClientset(objs...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Builder{Kube: func(string) (kubernetes.Interface, error) { return tt.cs, nil }, Pricer: pricing.NewTable(nil),
				Clock: clockwork.NewFakeClockAt(t0)}
			r, err := b.Build(context.Background(), prodSpec)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if want := (report.GPUs{Total: 28, Allocated: 14, Free: 14, Utilisation: 0.5}); r.GPUs != want {
				t.Errorf("GPUs = %+v, want %+v", r.GPUs, want)
			}
			if r.Pending.Pods != 2 || r.Pending.GPUs != 9 {
				t.Errorf("pending = %d pods, %d GPUs; want 2, 9", r.Pending.Pods, r.Pending.GPUs)
			}
			lists := 0
			for _, a := range tt.cs.Actions() {
				if a.GetVerb() != "list" || a.GetResource().Resource != "pods" {
					continue
				}
				lists++
				want := fields.ParseSelectorOrDie("status.phase!=Succeeded,status.phase!=Failed").String()
				if got := a.(k8stesting.ListAction).GetListRestrictions().Fields.String(); got != want {
					t.Errorf("pod list selects %q, want %q", got, want)
				}
			}
			if lists == 0 {
				t.Error("no pod list was made")
			}
		})
	}
}

// TestBuildNodeHealth: the report counts each group's nodes healthy, faulty, rebooting and replacing, with HyperPod's
// reason where AWS gave one, and the labels alone when AWS cannot be read.
func TestBuildNodeHealth(t *testing.T) {
	objs := []runtime.Object{
		hpNode("hyperpod-i-0a", "train-p5", "ml.p5.48xlarge", 8, true, "Schedulable"),
		hpNode("hyperpod-i-0b", "train-p5", "ml.p5.48xlarge", 8, true, "UnschedulablePendingReplacement"),
		hpNode("hyperpod-i-0c", "train-p5", "ml.p5.48xlarge", 8, false, "UnschedulablePendingReboot"),
		hpNode("hyperpod-i-0d", "train-p5", "ml.p5.48xlarge", 8, false, "UnschedulablePendingReplacement"),
	}
	groups := []GroupStatus{{Name: "train-p5", InstanceType: "ml.p5.48xlarge", Current: 4, Target: 4, Status: "InService",
		Instances: []fleet.InstanceHealth{
			{Group: "train-p5", InstanceID: "i-0b", Status: "Failure", Message: "GPU 3 reported Xid 79"},
			{Group: "train-p5", InstanceID: "i-0c", Status: "Pending"},
			{Group: "train-p5", InstanceID: "i-0d", Status: "ShuttingDown"},
		}}}
	tests := []struct {
		name   string
		source GroupSource
		want   fleet.HealthCounts
		reason string
	}{
		{"AWS says why", fakeGroups{groups: groups}, fleet.HealthCounts{Healthy: 1, Faulty: 1, Rebooting: 1, Replacing: 1}, "GPU 3 reported Xid 79"},
		{"AWS unavailable: the labels", fakeGroups{err: errors.New("ThrottlingException")}, fleet.HealthCounts{Healthy: 1, Faulty: 3},
			"failed a health check; HyperPod marked it for replacement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBuilder(objs, tt.source, nil)
			r, err := b.Build(context.Background(), prodSpec)
			if err != nil {
				t.Fatal(err)
			}
			g := r.Groups[0]
			if g.States != tt.want {
				t.Errorf("states = %+v, want %+v", g.States, tt.want)
			}
			if len(g.Unhealthy) != 3 || g.Unhealthy[0].Node != "hyperpod-i-0b" || g.Unhealthy[0].Reason != tt.reason {
				t.Errorf("unhealthy = %+v, want hyperpod-i-0b first with %q", g.Unhealthy, tt.reason)
			}
		})
	}
}

// teamSpend answers TeamSpend with uses, or err.
type teamSpend struct {
	uses []ops.BudgetUse
	err  error
	asks []string
}

func (s *teamSpend) TeamSpend(_ context.Context, cluster string) ([]ops.BudgetUse, error) {
	s.asks = append(s.asks, cluster)
	return s.uses, s.err
}

// The spend section carries each team budget's use of the cluster; a ledger that cannot be read is a warning and
// the rest of the report stands; a report without the spend section does not ask.
func TestBuildTeamSpend(t *testing.T) {
	use := ops.BudgetUse{Budget: ops.BudgetLimit{Name: "ml-research-weekly", Holder: "team S0ML", Window: ops.WindowWeek,
		Limit: ops.Amount{Cost: 5000}}, Used: ops.Amount{Cost: 500}}
	t.Run("read", func(t *testing.T) {
		b, _ := newBuilder(fixture(), nil, nil)
		src := &teamSpend{uses: []ops.BudgetUse{use}}
		b.Teams = src
		r, err := b.Build(context.Background(), prodSpec)
		if err != nil || len(r.Spend.Teams) != 1 || r.Spend.Teams[0].Used.Cost != 500 || len(r.Warnings) != 0 {
			t.Fatalf("Build = teams %+v, warnings %q, %v; want the team's $500 and no warning", r.Spend.Teams, r.Warnings, err)
		}
		if len(src.asks) != 1 || src.asks[0] != prodSpec.Cluster {
			t.Errorf("asked for %q, want %q once", src.asks, prodSpec.Cluster)
		}
	})
	t.Run("ledger unreachable", func(t *testing.T) {
		b, _ := newBuilder(fixture(), nil, nil)
		b.Teams = &teamSpend{err: ops.ErrStateUnavailable}
		r, err := b.Build(context.Background(), prodSpec)
		if err != nil || r.Spend.Teams != nil || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "team spend unavailable") {
			t.Fatalf("Build = teams %+v, warnings %q, %v; want a warning and the rest", r.Spend.Teams, r.Warnings, err)
		}
	})
	t.Run("no spend section", func(t *testing.T) {
		b, _ := newBuilder(fixture(), nil, nil)
		src := &teamSpend{uses: []ops.BudgetUse{use}}
		b.Teams = src
		spec := prodSpec
		spec.Sections = []string{report.SectionGPUs}
		if _, err := b.Build(context.Background(), spec); err != nil || len(src.asks) != 0 {
			t.Fatalf("Build: %v; asked %q, want no question", err, src.asks)
		}
	})
}

// reservationReader plays ops/aws's reservation reader.
type reservationReader struct {
	reservations []ops.CapacityReservation
	err          error
}

func (r reservationReader) Reservations(context.Context, string) ([]ops.CapacityReservation, error) {
	return r.reservations, r.err
}

// TestBuildListsReservationsEndingWithinADay: the report lists the training plans that end within a day (soonest
// first, one already ended included) and not one that ends in three days; one whose end is unknown is a warning,
// and reservations that cannot be read at all are one warning, the rest of the report standing.
func TestBuildListsReservationsEndingWithinADay(t *testing.T) {
	b, clock := newBuilder(fixture(), nil, nil)
	now := clock.Now()
	tp := func(group, plan string, left time.Duration) ops.CapacityReservation {
		return ops.CapacityReservation{Group: group, Plan: plan, Status: "Active", EndTime: now.Add(left), Left: left}
	}
	b.Reservations = reservationReader{reservations: []ops.CapacityReservation{
		tp("gpu-a", "tp-three-days", 72*time.Hour),
		tp("gpu-b", "tp-evening", 3*time.Hour+20*time.Minute),
		tp("gpu-c", "tp-ended", -time.Hour),
		{Group: "gpu-d", Plan: "tp-unknown", Unknown: "AWS SageMaker DescribeTrainingPlan failed: ThrottlingException: Rate exceeded"},
	}}
	r, err := b.Build(context.Background(), prodSpec)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, res := range r.Reservations {
		listed = append(listed, res.Plan)
	}
	if strings.Join(listed, ",") != "tp-ended,tp-evening" {
		t.Errorf("listed %v, want tp-ended then tp-evening (and not tp-three-days)", listed)
	}
	if w := strings.Join(r.Warnings, "\n"); !strings.Contains(w, "instance group gpu-d runs on training plan tp-unknown: reservation end unknown (AWS SageMaker DescribeTrainingPlan failed: ThrottlingException") {
		t.Errorf("warnings %q do not say tp-unknown's end is unknown", r.Warnings)
	}

	b.Reservations = reservationReader{err: errors.New("E_AWS_ERROR: DescribeCluster throttled")}
	r, err = b.Build(context.Background(), prodSpec)
	if err != nil || len(r.Groups) == 0 || len(r.Reservations) != 0 ||
		!strings.Contains(strings.Join(r.Warnings, "\n"), "reservations (training plans) unavailable") {
		t.Errorf("with reservations unreadable: %v, groups %d, reservations %+v, warnings %q", err, len(r.Groups), r.Reservations, r.Warnings)
	}
}
