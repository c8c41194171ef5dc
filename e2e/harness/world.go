package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// Options shape one World. The zero value gives two replicas, one GPU node and the fake AWS's default delay.
type Options struct {
	// Replicas is how many bot processes run (default 2).
	Replicas int
	// GPUNodes is how many instances the HyperPod instance group GPUGroup starts with (default 1; -1 for none).
	GPUNodes int
	// TransitionDelay is the fake AWS's delay before an accepted change moves nodes (default 2s).
	TransitionDelay time.Duration
	// ReadyTimeout bounds each replica's start (default Patience).
	ReadyTimeout time.Duration
	// ReportSchedule is the cron schedule (UTC) of the capacity report posted to ReportChannel (default
	// DefaultReportSchedule).
	ReportSchedule string
}

// World is one scenario's environment: its own fake Slack, fake AWS, Redis and bot replicas, over the shared
// control plane. Everything it starts is stopped when the test ends.
type World struct {
	T      testing.TB
	Plane  *controlplane.ControlPlane
	Slack  *fakeslack.Server
	AWS    *fakeaws.Server
	Redis  *redistest.Server
	RDB    *redis.Client
	Store  *state.Store
	Nodes  *NodeSync
	Prefix string
	Dir    string
	Config string
	// Replicas are the running bot processes, in start order.
	Replicas []*Replica

	bin string
	env []string
}

// Start builds a World for t: namespace Namespace exists in the plane, the fake AWS has the HyperPod cluster
// HyperPod (its nodes mirrored into the plane), and every replica answers /readyz. It fails t on any error.
func Start(t testing.TB, plane *controlplane.ControlPlane, bin string, opts Options) *World {
	t.Helper()
	if opts.Replicas == 0 {
		opts.Replicas = 2
	}
	if opts.GPUNodes == 0 {
		opts.GPUNodes = 1
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = Patience
	}
	// Every replica may take ReadyTimeout to start, after the plane's nodes and the config check.
	ctx, cancel := context.WithTimeout(t.Context(), Patience+time.Duration(opts.Replicas)*opts.ReadyTimeout)
	defer cancel()
	w := &World{T: t, Plane: plane, Dir: t.TempDir(), bin: bin, Prefix: "e2e-" + randomSuffix()}
	w.Redis = redistest.Start(t)
	w.RDB = redis.NewClient(&redis.Options{Addr: w.Redis.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = w.RDB.Close() })
	w.Store = state.New(w.RDB, state.Options{KeyPrefix: w.Prefix})

	w.Slack = fakeslack.New(fakeslack.Options{
		Users: []fakeslack.User{
			{ID: Alice, Name: "alice", RealName: "Alice Engineer"},
			{ID: Lead1, Name: "lead1", RealName: "Lee Lead"},
			{ID: Lead2, Name: "lead2", RealName: "Lou Lead"},
			{ID: Agent, Name: "ops-agent", RealName: "Ops Agent", IsBot: true},
		},
		UserGroups: map[string][]string{Leads: {Lead2}},
		Channels: map[string][]string{
			OpsChannel:       {"U0BOT", Alice, Lead1, Lead2},
			ApprovalsChannel: {"U0BOT", Lead1, Lead2},
			ReportChannel:    {"U0BOT", Lead1},
			AgentDM:          {Agent},
		},
	})
	t.Cleanup(w.Slack.Close)

	w.Nodes = NewNodeSync(plane)
	delay := opts.TransitionDelay
	if delay == 0 {
		delay = fakeaws.DefaultTransitionDelay
	}
	w.AWS = fakeaws.New(fakeaws.Options{TransitionDelay: delay, OnNodesChanged: w.Nodes.Hook,
		SecretKeys: map[string]string{BotKey: BotSecret}})
	t.Cleanup(w.AWS.Close)
	t.Cleanup(func() { w.removeNodes() })

	if err := w.ensureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.seedAWS(opts.GPUNodes); err != nil {
		t.Fatal(err)
	}
	if err := w.waitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	w.env = w.replicaEnv()
	var err error
	w.Config, err = WriteConfig(ctx, bin, w.Dir, ConfigData{
		SlackAPIURL: w.Slack.APIURL(), RedisURL: w.Redis.URL(), KeyPrefix: w.Prefix,
		Kubeconfig: plane.Kubeconfig(), AWSURL: w.AWS.URL(), ReportSchedule: opts.ReportSchedule,
	}, w.env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stopReplicas)
	for i := range opts.Replicas {
		if _, err := w.StartReplica(ctx, fmt.Sprintf("replica-%d", i), opts.ReadyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// replicaEnv is the bots' whole environment: tokens and AWS credentials as production passes them, HOME in the
// world's dir so nothing of the developer's ~/.aws or ~/.kube is read.
func (w *World) replicaEnv() []string {
	opts := w.Slack.Options()
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + w.Dir,
		"TMPDIR=" + w.Dir,
		"SLACK_APP_TOKEN=" + opts.AppToken,
		"SLACK_BOT_TOKEN=" + opts.BotToken,
		"AWS_ACCESS_KEY_ID=" + BotKey,
		"AWS_SECRET_ACCESS_KEY=" + BotSecret,
		"AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// StartReplica starts one more bot process and waits until it is ready; the Socket Mode connection that
// appeared meanwhile is recorded as its own.
func (w *World) StartReplica(ctx context.Context, name string, timeout time.Duration) (*Replica, error) {
	before := openConns(w.Slack)
	r, err := startReplica(w.bin, w.Config, name, w.Dir, w.env)
	if err != nil {
		return nil, err
	}
	w.Replicas = append(w.Replicas, r)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := r.WaitReady(rctx); err != nil {
		return r, err
	}
	for _, id := range openConns(w.Slack) {
		if !slices.Contains(before, id) {
			r.addConn(id)
		}
	}
	if len(r.ConnIDs()) == 0 {
		return r, fmt.Errorf("%s is ready but no new Socket Mode connection appeared in the fake Slack", name)
	}
	return r, nil
}

func openConns(s *fakeslack.Server) []string {
	var out []string
	for _, c := range s.Connections() {
		if c.Open {
			out = append(out, c.ID)
		}
	}
	return out
}

// ReplicaOf returns the replica that owns a Socket Mode connection, e.g. the one a click was delivered to.
func (w *World) ReplicaOf(connID string) (*Replica, bool) {
	for _, r := range w.Replicas {
		if slices.Contains(r.ConnIDs(), connID) {
			return r, true
		}
	}
	return nil, false
}

func (w *World) stopReplicas() {
	for _, r := range w.Replicas {
		if err := r.Stop(Patience); err != nil {
			w.T.Errorf("stop %s: %v", r.Name, err)
		}
	}
	if w.T.Failed() {
		for _, r := range w.Replicas {
			w.T.Logf("=== %s log tail (%s)\n%s", r.Name, r.LogPath, r.LogTail())
		}
	}
}

func (w *World) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	_, err := w.Plane.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	return nil
}

// seedAWS creates the EKS cluster and the HyperPod cluster with GPUGroup at n instances; the hook adds their nodes.
func (w *World) seedAWS(n int) error {
	if n < 0 {
		n = 0
	}
	if err := w.AWS.AddEKSCluster(fakeaws.EKSCluster{Name: EKSCluster, Region: Region}); err != nil {
		return fmt.Errorf("seed the EKS cluster: %w", err)
	}
	eks, _ := w.AWS.EKSCluster(EKSCluster)
	err := w.AWS.AddHyperPodCluster(fakeaws.HyperPodCluster{
		Name: HyperPod, Region: Region, EKSClusterARN: eks.ARN, NodeProvisioningMode: fakeaws.ProvisioningContinuous,
		InstanceGroups: []fakeaws.InstanceGroup{{
			Name: GPUGroup, Type: GPUType, Count: n,
			LifecycleS3URI: "s3://e2e-lifecycle/scripts/", ExecutionRole: "arn:aws:iam::123456789012:role/HyperPodExecutionRole",
		}},
	})
	if err != nil {
		return fmt.Errorf("seed the HyperPod cluster: %w", err)
	}
	return w.Nodes.Err()
}

// GroupNodes lists the HyperPod group's instances as the fake AWS has them.
func (w *World) GroupNodes() []fakeaws.Node {
	hp, ok := w.AWS.HyperPodCluster(HyperPod)
	if !ok {
		return nil
	}
	for _, g := range hp.InstanceGroups {
		if g.Name == GPUGroup {
			return g.Nodes
		}
	}
	return nil
}

func (w *World) waitNodesReady(ctx context.Context) error {
	for _, n := range w.GroupNodes() {
		if _, err := w.Plane.WaitNodeReady(ctx, string(n.Name)); err != nil {
			return err
		}
	}
	return nil
}

// removeNodes deletes the nodes of this world's HyperPod cluster from the shared plane, so the next scenario
// starts with only its own.
func (w *World) removeNodes() {
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	nodes, err := w.Plane.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "sagemaker.amazonaws.com/cluster-name=" + HyperPod})
	if err != nil {
		w.T.Errorf("list this world's nodes: %v", err)
		return
	}
	for _, n := range nodes.Items {
		if err := w.Plane.RemoveNode(ctx, n.Name); err != nil {
			w.T.Errorf("remove node: %v", err)
		}
	}
}

// ClusterNodes returns the names of the API server's nodes of the HyperPod group.
func (w *World) ClusterNodes(ctx context.Context) ([]string, error) {
	nodes, err := w.Plane.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{
		LabelSelector: "sagemaker.amazonaws.com/cluster-name=" + HyperPod + "," + controlplane.LabelInstanceGroup + "=" + GPUGroup})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out, nil
}

// Logs returns what the people saw privately (ephemerals) and every replica's log tail, for failure messages.
func (w *World) Logs() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.WriteString("=== requests in redis\n")
	if recs, err := w.Store.List(ctx, engine.ListQuery{Limit: 50}); err != nil {
		fmt.Fprintf(&b, "(cannot list: %v)\n", err)
	} else {
		for _, r := range recs {
			fmt.Fprintf(&b, "- %s %s phase=%s replica=%s errors=%v history:%s\n", r.ID(), r.Request.Operation, r.Phase, r.Replica, r.Errors, history(r))
			if r.Plan != nil {
				fmt.Fprintf(&b, "  plan: %s; risk %+v; cost $%.2f/h; serverValidated=%v warnings=%v\n", r.Plan.Summary, r.Plan.Risk, r.Plan.Cost.HourlyDelta, r.Plan.ServerValidated, r.Plan.Warnings)
			}
		}
	}
	b.WriteString("=== ephemerals\n")
	for _, e := range w.Slack.Snapshot().Ephemerals {
		fmt.Fprintf(&b, "- to %s in %s: %s\n", e.User, e.Channel, oneLine(Visible(e.Text, e.Blocks)))
	}
	for _, r := range w.Replicas {
		fmt.Fprintf(&b, "=== %s (%s)\n%s\n", r.Name, r.LogPath, r.LogTail())
	}
	return b.String()
}
