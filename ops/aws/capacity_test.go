package aws

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/pricing"
)

func TestGetCapacity(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	rec, err := f.engine.Submit(ctxT(t), ops.Request{Operation: OpGetCapacity, Target: ops.Target{Cluster: testCluster},
		Initiator: human("U0BOB")})
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit: %v %+v", err, rec)
	}
	var c Capacity
	must(t, json.Unmarshal(rec.Result.Data, &c))
	if c.HyperPod == nil || c.HyperPod.Status != "InService" || len(c.HyperPod.Groups) != 3 {
		t.Fatalf("hyperpod %+v", c.HyperPod)
	}
	gpu := c.HyperPod.Groups[0]
	if gpu.Name != "gpu" || gpu.Current != 2 || gpu.Target != 2 || gpu.Instances["Running"] != 2 || !gpu.PriceKnown ||
		!near(gpu.Hourly, 2*priceP5) || gpu.Kubernetes == nil || gpu.Kubernetes.Ready != 2 {
		t.Errorf("gpu %+v", gpu)
	}
	if c.EKS == nil || c.EKS.Status != "ACTIVE" || len(c.EKS.Nodegroups) != 1 {
		t.Fatalf("eks %+v", c.EKS)
	}
	cpu := c.EKS.Nodegroups[0]
	if cpu.Name != "cpu" || cpu.Current != -1 || cpu.Target != 2 || cpu.Min != 1 || cpu.Max != 4 || cpu.Kubernetes == nil || cpu.Kubernetes.Nodes != 2 {
		t.Errorf("cpu %+v", cpu)
	}
	// gpu 2 × 113.068 + controller 1 × 0.461 + a100 1 × 37.688 + cpu 2 × 5.672, from the built-in table.
	want := 2*priceP5 + 0.461 + 37.688 + 2*5.672
	if !near(c.Hourly, want) || len(c.Unknown) != 0 {
		t.Errorf("hourly %v unknown %v, want %v", c.Hourly, c.Unknown, want)
	}
	if !strings.Contains(rec.Result.Summary, "HyperPod ml-hp InService (3 groups)") || !strings.Contains(rec.Result.Output, "2 nodes, 2 Ready") {
		t.Errorf("summary %q output %q", rec.Result.Summary, rec.Result.Output)
	}
	if len(rec.Result.Details) != 4 {
		t.Errorf("details %+v", rec.Result.Details)
	}
}

// The wiring may pass no Kubernetes view and no pricer: capacity is still reported, with prices unknown.
func TestCapacityWithoutKubernetesOrPrices(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	c, err := f.clients.Capacity(ctxT(t), testCluster, nil, nil)
	must(t, err)
	if c.Hourly != 0 || strings.Join(c.Unknown, ",") != "g5.12xlarge,ml.m5.2xlarge,ml.p4d.24xlarge,ml.p5.48xlarge" {
		t.Errorf("hourly %v unknown %v", c.Hourly, c.Unknown)
	}
	for _, g := range c.HyperPod.Groups {
		if g.Kubernetes != nil || g.PriceKnown {
			t.Errorf("group %+v", g)
		}
	}
}

// A cluster whose HyperPod cluster is not bootstrapped yet still shows, and scales, its EKS node groups.
func TestCapacityBeforeBootstrap(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	must(t, f.srv.AddNodegroup(fakeaws.Nodegroup{Cluster: "dev-eks", Name: "system", InstanceTypes: []string{"ml.m5.2xlarge"},
		MinSize: 1, MaxSize: 3, DesiredSize: 1}))
	c, err := f.clients.Capacity(ctxT(t), testDevCluster, pricing.NewTable(nil), f.nodes)
	must(t, err)
	if c.HyperPod != nil || c.EKS == nil || len(c.EKS.Nodegroups) != 1 || len(c.Warnings) != 1 ||
		!strings.Contains(c.Warnings[0], "HyperPod cluster dev-hp does not exist yet") {
		t.Errorf("capacity %+v", c)
	}
	rec, err := f.engine.Submit(ctxT(t), scaleRequest("scale-system", testDevCluster, "system", 2))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("scale: %v %+v", err, rec)
	}
	if ng, _ := f.srv.Nodegroup("dev-eks", "system"); ng.DesiredSize != 2 {
		t.Errorf("node group %+v", ng)
	}
}

// TestHyperPodInstances: every instance of the cluster's HyperPod cluster, over pages of 100, with HyperPod's status
// and message; a throttled page is retried by the SDK's retryer; a cluster without HyperPod has none, and
// get-capacity lists the instances that are not Running.
func TestHyperPodInstances(t *testing.T) {
	f := newFixture(t, fixtureOptions{gpuCount: 120})
	hp, _ := f.srv.HyperPodCluster("ml-hp")
	faulty := hp.InstanceGroups[0].Nodes[7].InstanceID
	must(t, f.srv.MarkNodeFaulty("ml-hp", faulty, "GPU 3 reported Xid 79"))
	f.srv.Fail(fakeaws.OpSageMakerListClusterNodes, 2, "ThrottlingException", 400, "Rate exceeded")

	got, err := f.clients.HyperPodInstances(ctxT(t), testCluster)
	must(t, err)
	if len(got) != 122 {
		t.Fatalf("%d instances, want 122 (120 gpu, 1 controller, 1 a100)", len(got))
	}
	// Two pages, the first of them twice more for the throttling.
	if n := f.srv.Calls(fakeaws.OpSageMakerListClusterNodes); n != 4 {
		t.Errorf("ListClusterNodes called %d times, want 4", n)
	}
	var failed []fleet.InstanceHealth
	for _, in := range got {
		if in.Status != "Running" {
			failed = append(failed, in)
		}
	}
	if want := []fleet.InstanceHealth{{Group: "gpu", InstanceID: faulty, Status: "Failure", Message: "GPU 3 reported Xid 79"}}; !reflect.DeepEqual(failed, want) {
		t.Errorf("not running: %+v, want %+v", failed, want)
	}
	if none, err := f.clients.HyperPodInstances(ctxT(t), testDevCluster); err != nil || none != nil {
		t.Errorf("a cluster without HyperPod: %v, %v", none, err)
	}

	c, err := f.clients.Capacity(ctxT(t), testCluster, nil, nil)
	must(t, err)
	if g := c.HyperPod.Groups[0]; g.Instances["Failure"] != 1 || len(g.NotRunning) != 1 || g.NotRunning[0].Message != "GPU 3 reported Xid 79" {
		t.Errorf("get-capacity's gpu group: %+v", g)
	}
}

func TestInstanceMessage(t *testing.T) {
	long := strings.Repeat("x", 400)
	if got := instanceMessage(long); len([]rune(got)) != maxInstanceMessage || !strings.HasSuffix(got, "…") {
		t.Errorf("a 400-character message became %d characters", len([]rune(got)))
	}
	if got := instanceMessage("health check failed, token AKIAABCDEFGHIJKLMNOP"); strings.Contains(got, "AKIAABCDEFGHIJKLMNOP") {
		t.Errorf("a credential shape survived: %q", got)
	}
}
