package faults

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/bot"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/ops/state"
	"github.com/hyperops/hyperops/ops/state/redistest"
)

// Every world's fake AWS carries its accepted changes out after transition: longer than a poll (so an execution
// really waits), far shorter than a real HyperPod scale, so the matrix stays within its budget.
const (
	transition = 3 * time.Second
	awsPoll    = 500 * time.Millisecond
	// kubeBudget is the Kubernetes execution budget of every world: a cell whose API request is held past the
	// client's patience ends within it.
	kubeBudget = 40 * time.Second
	// EKSGroup is the EKS managed node group every world's fake AWS has.
	EKSGroup = "ng-faults"
	// TeamChannel is a second command channel: a cell whose fault is on the request's own channel types it
	// there, so the healthy request beside it (in harness.OpsChannel) keeps a channel that works.
	TeamChannel = "C0TEAM"
	// AuditChannel is the audit channel of a world with audit set.
	AuditChannel = "C0AUDIT"
	// Template is the HyperPod template every world registers for bootstrap-cluster.
	Template = "faults-small"
)

// worldOptions are what a cell needs of its world beyond the common one.
type worldOptions struct {
	// noHyperPod leaves the HyperPod cluster out of the fake AWS, for bootstrap-cluster to create it.
	noHyperPod bool
	// replica starts a replica of the world's Redis (world.replica), for a cell that points the bot at it.
	replica bool
	// audit sets slack.auditChannel to AuditChannel.
	audit bool
}

func (o worldOptions) with(p worldOptions) worldOptions {
	return worldOptions{noHyperPod: o.noHyperPod || p.noHyperPod, replica: o.replica || p.replica, audit: o.audit || p.audit}
}

// world is one cell's environment: its own Redis (behind a TCP fault proxy), fake Slack and fake AWS, the shared
// control plane behind a Kubernetes fault proxy, and one bot running in this process.
type world struct {
	*harness.World
	redisProxy *faultproxy.TCP
	// replica is a replica of Redis (nil unless worldOptions.replica).
	replica *redistest.Server
	kube    *faultproxy.Kube
	log     *syncBuffer
}

// syncBuffer is the bot's log, written by its goroutines and read by a failing test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newWorld starts a cell's world and its bot; everything stops when the test ends.
func newWorld(t *testing.T, opts worldOptions) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	w := &world{World: &harness.World{T: t, Plane: plane, Dir: t.TempDir(), Prefix: "faults-" + suffix()}, log: &syncBuffer{}}
	w.Redis = redistest.Start(t)
	if opts.replica {
		w.replica = redistest.StartWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(w.Redis.Port()))
	}
	var err error
	if w.redisProxy, err = faultproxy.NewTCP(w.Redis.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.redisProxy.Close() })
	// The test's own view of Redis goes around the proxy: a fault on the bot's wire never blinds the checks.
	w.RDB = redis.NewClient(&redis.Options{Addr: w.Redis.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = w.RDB.Close() })
	w.Store = state.New(w.RDB, state.Options{KeyPrefix: w.Prefix})
	if w.kube, err = faultproxy.NewKube(plane.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.kube.Close() })
	w.Slack = newSlack()
	t.Cleanup(w.Slack.Close)
	w.AWS = fakeaws.New(fakeaws.Options{Region: harness.Region, TransitionDelay: transition,
		SecretKeys: map[string]string{harness.BotKey: harness.BotSecret}})
	t.Cleanup(w.AWS.Close)
	if err := seedAWS(w.AWS, !opts.noHyperPod); err != nil {
		t.Fatal(err)
	}
	if err := ensureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, err := w.config(opts)
	if err != nil {
		t.Fatal(err)
	}
	w.startBot(ctx, cfg)
	return w
}

func newSlack() *fakeslack.Server {
	return fakeslack.New(fakeslack.Options{
		Users: []fakeslack.User{
			{ID: harness.Alice, Name: "alice", RealName: "Alice Engineer"},
			{ID: harness.Lead1, Name: "lead1", RealName: "Lee Lead"},
			{ID: harness.Lead2, Name: "lead2", RealName: "Lou Lead"},
			{ID: harness.Agent, Name: "ops-agent", RealName: "Ops Agent", IsBot: true},
		},
		UserGroups: map[string][]string{harness.Leads: {harness.Lead2}},
		Channels: map[string][]string{
			harness.OpsChannel:       {"U0BOT", harness.Alice, harness.Lead1, harness.Lead2},
			TeamChannel:              {"U0BOT", harness.Alice, harness.Lead1, harness.Lead2},
			AuditChannel:             {"U0BOT", harness.Lead1},
			harness.ApprovalsChannel: {"U0BOT", harness.Lead1, harness.Lead2},
			harness.ReportChannel:    {"U0BOT", harness.Lead1},
			harness.AgentDM:          {harness.Agent},
		},
	})
}

// seedAWS creates the EKS cluster with the node group EKSGroup and, with hyperPod, the HyperPod cluster with one
// instance of harness.GPUGroup.
func seedAWS(s *fakeaws.Server, hyperPod bool) error {
	if err := s.AddEKSCluster(fakeaws.EKSCluster{Name: harness.EKSCluster, Region: harness.Region}); err != nil {
		return fmt.Errorf("seed the EKS cluster: %w", err)
	}
	eks, _ := s.EKSCluster(harness.EKSCluster)
	if hyperPod {
		err := s.AddHyperPodCluster(fakeaws.HyperPodCluster{
			Name: harness.HyperPod, Region: harness.Region, EKSClusterARN: eks.ARN,
			InstanceGroups: []fakeaws.InstanceGroup{{Name: harness.GPUGroup, Type: harness.GPUType, Count: 1,
				LifecycleS3URI: "s3://faults-lifecycle/scripts/", ExecutionRole: "arn:aws:iam::123456789012:role/HyperPodExecutionRole"}},
		})
		if err != nil {
			return fmt.Errorf("seed the HyperPod cluster: %w", err)
		}
	}
	return s.AddNodegroup(fakeaws.Nodegroup{Cluster: harness.EKSCluster, Name: EKSGroup,
		InstanceTypes: []string{harness.EKSType}, MinSize: 0, MaxSize: 2, DesiredSize: 0})
}

func ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harness.Namespace}}
	_, err := plane.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", harness.Namespace, err)
	}
	return nil
}

// templateYAML registers Template for bootstrap-cluster: one instance of harness.GPUGroup, like the seeded cluster.
const templateYAML = `      clusterName: ` + harness.HyperPod + `
      templates:
        ` + Template + `:
          instanceGroups: [{name: ` + harness.GPUGroup + `, instanceType: ` + harness.GPUType + `, instanceCount: 1}]
          lifecycleScript: "s3://faults-lifecycle/scripts/"
          executionRole: hyperpod-exec
          vpc: {subnets: [subnet-0123456789abcdef0], securityGroups: [sg-0123456789abcdef0]}
`

// config is the e2e configuration with this world's endpoints: Redis and the API server through their proxies;
// the HyperPod template, the second command channel and, with opts.audit, the audit channel.
func (w *world) config(opts worldOptions) (*config.Config, error) {
	kubeconfig := filepath.Join(w.Dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: faults, cluster: {server: %q}}]
users: [{name: faults, user: {}}]
contexts: [{name: faults, context: {cluster: faults, user: faults}}]
current-context: faults
`, w.kube.URL())
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		return nil, err
	}
	text, err := harness.RenderConfig(harness.ConfigData{SlackAPIURL: w.Slack.APIURL(), RedisURL: "redis://" + w.redisProxy.Addr() + "/0",
		KeyPrefix: w.Prefix, Kubeconfig: kubeconfig, AWSURL: w.AWS.URL()})
	if err != nil {
		return nil, err
	}
	so := w.Slack.Options()
	text = strings.NewReplacer("${SLACK_APP_TOKEN}", so.AppToken, "${SLACK_BOT_TOKEN}", so.BotToken,
		"${HYPEROPS_LISTEN}", "127.0.0.1:0", "${HYPEROPS_MCP_LISTEN}", `""`,
		"      clusterName: "+harness.HyperPod+"\n", templateYAML,
		"  channels: ["+harness.OpsChannel+"]", "  channels: ["+harness.OpsChannel+", "+TeamChannel+"]").Replace(text)
	if !strings.Contains(text, Template+":") || !strings.Contains(text, TeamChannel+"]") {
		return nil, fmt.Errorf("the generated config changed shape: the template or %s could not be added", TeamChannel)
	}
	if opts.audit {
		text = strings.Replace(text, "  approvalsChannel: ", "  auditChannel: "+AuditChannel+"\n  approvalsChannel: ", 1)
	}
	cfg, err := config.Parse([]byte(text), "faults.yaml")
	if err != nil {
		return nil, err
	}
	cfg.Execution.Budgets.Kubernetes = config.Duration(kubeBudget)
	return cfg, nil
}

// startBot runs the bot in this process until the test ends, and waits for its Socket Mode connection.
func (w *world) startBot(ctx context.Context, cfg *config.Config) {
	t := w.T
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(w.log).With().Timestamp().Logger().Level(zerolog.DebugLevel)
	awsCfg := awssdk.Config{Region: harness.Region, Credentials: credentials.NewStaticCredentialsProvider(harness.BotKey, harness.BotSecret, "")}
	bctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- bot.RunEmbedded(bctx, cfg, log, bot.Embedding{AWS: &awsCfg, AWSPollInterval: awsPoll, Listener: ln})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "context canceled") {
				t.Errorf("the bot stopped with %v", err)
			}
		case <-time.After(patience):
			t.Errorf("the bot did not stop within %s of its context ending", patience)
		}
		if t.Failed() {
			t.Logf("=== bot log (tail)\n%s", tail(w.log.String(), 60))
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, patience)
	defer wcancel()
	if _, err := w.Slack.WaitFor(wctx, func(s fakeslack.Snapshot) bool {
		for _, c := range s.Connections {
			if c.Open {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the bot did not connect to the fake Slack: %v\n%s", err, tail(w.log.String(), 40))
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// suffix makes a world's key prefix unique.
func suffix() string { return randomName("w") }

// replicaClient talks to the world's replica directly.
func (w *world) replicaClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: w.replica.Addr(), MaxRetries: -1})
}
