package aws

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/pricing"
	"github.com/hyperops/hyperops/ops/state"
)

const (
	testCluster    = "ml-prod"
	testDevCluster = "ml-dev"
	testRoleARN    = "arn:aws:iam::123456789012:role/HyperPodExecutionRole"
	testS3         = "s3://lifecycle-bucket/scripts/"
	priceP5        = 113.068 // ml.p5.48xlarge in ops' built-in table
)

var (
	testSubnets        = []string{"subnet-0a1b2c3d4e5f60718", "subnet-0f1e2d3c4b5a69788"}
	testSecurityGroups = []string{"sg-0123456789abcdef0"}
)

// fixture is a fake AWS seeded with one production cluster (HyperPod ml-hp on EKS ml-eks, plus a managed node
// group) and one dev cluster with only EKS (for bootstrap), the real SDK clients pointed at it through the
// endpoint overrides in config, and an engine whose store and locker are ops/state on a real redis-server.
type fixture struct {
	srv      *fakeaws.Server
	cfg      *config.Config
	clients  *Clients
	catalog  *ops.Catalog
	engine   *engine.Engine
	store    *state.Store
	progress *progressLog
	nodes    *hookNodes
}

type fixtureOptions struct {
	hyperPodStatus  string        // status the ml-hp cluster is seeded with (default InService)
	transitionDelay time.Duration // fake's delay before nodes move (default 20ms)
	gpuCount        int           // ml-hp gpu group's seeded count (default 2)
	writeTimeout    time.Duration // the engine's write timeout (default the engine's)
	// recoveryDuration is how long the fake's reboots and replacements take (default 150ms: many poll intervals)
	recoveryDuration time.Duration
	// nodeInterval is the fake's time between two node changes of a transition (default 2ms)
	nodeInterval time.Duration
	// noEvents seeds ml-hp without NodeProvisioningMode Continuous, so ListClusterEvents is refused
	noEvents bool
	// planEndsIn, when set, puts the gpu group on training plan tp-gpu, which ends that long from now.
	planEndsIn time.Duration
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	if o.transitionDelay == 0 {
		o.transitionDelay = 20 * time.Millisecond
	}
	if o.gpuCount == 0 {
		o.gpuCount = 2
	}
	if o.recoveryDuration == 0 {
		o.recoveryDuration = 150 * time.Millisecond
	}
	if o.nodeInterval == 0 {
		o.nodeInterval = 2 * time.Millisecond
	}
	provisioning := fakeaws.ProvisioningContinuous
	if o.noEvents {
		provisioning = ""
	}
	f := &fixture{store: opstest.NewRedisStore(t).Store, progress: &progressLog{}, nodes: newHookNodes(map[string]string{"ml-eks": testCluster, "dev-eks": testDevCluster})}
	f.srv = fakeaws.New(fakeaws.Options{TransitionDelay: o.transitionDelay, NodeInterval: o.nodeInterval, OnNodesChanged: f.nodes.record,
		RecoveryDuration: o.recoveryDuration})
	t.Cleanup(f.srv.Close)
	must(t, f.srv.AddEKSCluster(fakeaws.EKSCluster{Name: "ml-eks"}))
	must(t, f.srv.AddEKSCluster(fakeaws.EKSCluster{Name: "dev-eks"}))
	eksARN := eksARN(t, f.srv, "ml-eks")
	group := func(name, typ string, n int) fakeaws.InstanceGroup {
		return fakeaws.InstanceGroup{Name: name, Type: typ, Count: n, LifecycleS3URI: testS3, ExecutionRole: testRoleARN}
	}
	gpu := group("gpu", "ml.p5.48xlarge", o.gpuCount)
	if o.planEndsIn != 0 {
		arn, err := f.srv.AddTrainingPlan(fakeaws.TrainingPlan{Name: "tp-gpu", InstanceType: "ml.p5.48xlarge", Count: 8,
			Start: time.Now().Add(-time.Hour), End: time.Now().Add(o.planEndsIn)})
		must(t, err)
		gpu.TrainingPlanARN = arn
	}
	must(t, f.srv.AddHyperPodCluster(fakeaws.HyperPodCluster{
		Name: "ml-hp", Status: o.hyperPodStatus, EKSClusterARN: eksARN, NodeProvisioningMode: provisioning,
		InstanceGroups: []fakeaws.InstanceGroup{
			gpu, group("controller", "ml.m5.2xlarge", 1), group("a100", "ml.p4d.24xlarge", 1),
		},
	}))
	must(t, f.srv.AddNodegroup(fakeaws.Nodegroup{Cluster: "ml-eks", Name: "cpu", InstanceTypes: []string{"g5.12xlarge"},
		MinSize: 1, MaxSize: 4, DesiredSize: 2}))

	f.cfg = testConfig(f.srv.URL())
	f.clients = NewWithAWSConfig(f.cfg, testAWSConfig())
	f.clients.PollInterval = 5 * time.Millisecond
	f.clients.WaitTimeout = 20 * time.Second
	f.clients.VerifyWait = 200 * time.Millisecond
	f.catalog = ops.NewCatalog()
	Register(f.catalog, f.clients, pricing.NewTable(nil), f.nodes)
	f.engine = engine.New(f.catalog, f.store, f.store, nil, engine.Options{
		Replica: "test", Notifier: f.progress, LockTTL: 10 * time.Second, WriteTimeout: o.writeTimeout,
		Risk: ops.RiskPolicy{MediumHourly: 50, HighHourly: 500},
	})
	return f
}

func testConfig(url string) *config.Config {
	return &config.Config{
		Clusters: []config.Cluster{
			{
				Name: testCluster, Region: "us-west-2", Environment: config.EnvStaging,
				HyperPod:      config.HyperPod{ClusterName: "ml-hp"},
				EKS:           config.EKS{ClusterName: "ml-eks"},
				InstanceTypes: []string{"ml.p5.48xlarge", "ml.m5.2xlarge", "g5.12xlarge"},
				Limits:        config.Limits{MaxNodesPerGroup: 16},
			},
			{
				Name: testDevCluster, Region: "us-west-2", Environment: config.EnvDevelopment,
				HyperPod: config.HyperPod{ClusterName: "dev-hp", Templates: map[string]config.Template{
					"gpu-small": {
						InstanceGroups: []config.InstanceGroup{
							{Name: "controller", InstanceType: "ml.m5.2xlarge", InstanceCount: 1},
							{Name: "workers", InstanceType: "ml.g5.12xlarge", InstanceCount: 2, ThreadsPerCore: 1, VolumeSizeGB: 500},
						},
						LifecycleScript: testS3, OnCreate: "on_create.sh", ExecutionRole: "hyperpod-exec",
						VPC: config.VPC{Subnets: testSubnets, SecurityGroups: testSecurityGroups},
					},
				}},
				EKS:           config.EKS{ClusterName: "dev-eks"},
				InstanceTypes: []string{"ml.m5.2xlarge", "ml.g5.12xlarge"},
				Limits:        config.Limits{MaxNodesPerGroup: 4},
			},
		},
		AWS: config.AWS{
			Roles:     map[string]string{"hyperpod-exec": testRoleARN},
			Endpoints: config.Endpoints{SageMaker: url, EKS: url, Pricing: url},
		},
	}
}

// testAWSConfig is what New would load, with static credentials and the standard retryer's backoff shortened;
// what the retryer retries stays the SDK's decision.
func testAWSConfig() awssdk.Config {
	return awssdk.Config{
		Region:      "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDHYPEROPS", "secret", ""),
		Retryer: func() awssdk.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			})
		},
	}
}

func eksARN(t *testing.T, srv *fakeaws.Server, name string) string {
	t.Helper()
	c, ok := srv.EKSCluster(name)
	if !ok {
		t.Fatalf("EKS cluster %s not seeded", name)
	}
	return c.ARN
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func human(id string) ops.Initiator { return ops.Initiator{Kind: ops.Human, ID: id, Name: id} }

func scaleRequest(id, cluster, group string, count any) ops.Request {
	return ops.Request{ID: id, Operation: OpScaleCapacity, Target: ops.Target{Cluster: cluster},
		Params: ops.Params{"group": group, "count": count}, Initiator: human("U0ALICE")}
}

// codeOf is the ops error code of err, or "".
func codeOf(err error) ops.Code {
	var ue *ops.Error
	if errors.As(err, &ue) {
		return ue.Code
	}
	return ""
}

func asOpsError(t *testing.T, err error) *ops.Error {
	t.Helper()
	var ue *ops.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %v (%T) is not an *ops.Error", err, err)
	}
	return ue
}

// progressLog is an engine.Notifier that keeps the progress steps executions report.
type progressLog struct {
	opstest.Log[string]
}

func (p *progressLog) Changed(context.Context, *ops.Record, ops.Transition) {}

func (p *progressLog) Progress(_ context.Context, _ *ops.Record, msg string) { p.Add(msg) }

// has reports whether some step contains every fragment.
func (p *progressLog) has(fragments ...string) bool {
	for _, s := range p.All() {
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(s, f)
		}
		if ok {
			return true
		}
	}
	return false
}

// hookNodes is the Kubernetes view the fake's OnNodesChanged hook builds, like the e2e tier's kwok nodes: nodes
// join Ready when AWS adds them and go away when AWS removes them.
type hookNodes struct {
	mu      sync.Mutex
	cluster map[string]string                    // EKS cluster name → registered cluster
	groups  map[string]map[string]map[string]int // cluster → group → node name → 1
	types   map[string]string                    // group → instance type
	pods    []fleet.NodePod                      // what runs on the nodes (PodsOnNodes)
}

// PodsOnNodes makes hookNodes an fleet.NodePodReader, as ops/kube's Clusters is: the pods set with runPod.
func (h *hookNodes) PodsOnNodes(_ context.Context, _ string, nodes []string) ([]fleet.NodePod, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []fleet.NodePod
	for _, p := range h.pods {
		if slices.Contains(nodes, p.Node) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (h *hookNodes) runPod(p fleet.NodePod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods = append(h.pods, p)
}

func newHookNodes(cluster map[string]string) *hookNodes {
	return &hookNodes{cluster: cluster, groups: map[string]map[string]map[string]int{}, types: map[string]string{}}
}

func (h *hookNodes) record(_ context.Context, ch fakeaws.NodeChange) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl := h.cluster[ch.EKSClusterName]
	if h.groups[cl] == nil {
		h.groups[cl] = map[string]map[string]int{}
	}
	g := h.groups[cl][ch.InstanceGroup]
	if g == nil {
		g = map[string]int{}
		h.groups[cl][ch.InstanceGroup] = g
	}
	h.types[ch.InstanceGroup] = ch.InstanceType
	for _, n := range ch.Added {
		g[string(n)] = 1
	}
	for _, n := range ch.Removed {
		delete(g, string(n))
	}
}

func (h *hookNodes) NodeGroups(_ context.Context, cluster string) ([]fleet.GroupNodes, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []fleet.GroupNodes
	for name, nodes := range h.groups[cluster] {
		out = append(out, fleet.GroupNodes{Group: name, InstanceType: h.types[name], Nodes: len(nodes), Ready: len(nodes),
			Health: map[string]int{"Schedulable": len(nodes)}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// memCache is an in-memory Cache that honours TTLs, as Redis does.
type memCache struct {
	mu   sync.Mutex
	vals map[string][]byte
	exp  map[string]time.Time
	ttls []time.Duration
	now  func() time.Time
}

func newMemCache() *memCache {
	return &memCache{vals: map[string][]byte{}, exp: map[string]time.Time{}, now: time.Now}
}

func (c *memCache) CacheGet(_ context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vals[key]
	if !ok || !c.now().Before(c.exp[key]) {
		return nil, false, nil
	}
	return slices.Clone(v), true, nil
}

func (c *memCache) CacheSet(_ context.Context, key string, val []byte, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vals[key] = slices.Clone(val)
	c.exp[key] = c.now().Add(ttl)
	c.ttls = append(c.ttls, ttl)
	return nil
}

// count is how many nodes Kubernetes has in a group.
func (h *hookNodes) count(cluster, group string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.groups[cluster][group])
}
