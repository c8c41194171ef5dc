package playground

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperops/hyperops/bot"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/internal/nodesync"
)

// Options shape a playground. The zero value starts the local control plane and serves the page on a free
// loopback port.
type Options struct {
	// Listener serves the page; nil listens on Listen.
	Listener net.Listener
	// Listen is the page's address; it must be a loopback address (default 127.0.0.1:0, a free port).
	Listen string
	// Kubeconfig points at the user's own cluster; empty starts the local control plane with kwok GPU nodes.
	Kubeconfig string
	// Context is the kubeconfig context (empty: its current one).
	Context string
	// BinDir holds the control-plane binaries (default controlplane.BinDir()).
	BinDir string
	// Dir holds the playground's files (config, logs, the plane's data); default a new temp dir, removed on Close.
	Dir string
	// Progress receives the start-up lines meant for a person (default io.Discard).
	Progress io.Writer
	// AWSDelay is how long the fake AWS takes to move nodes after an accepted change (default 2s).
	AWSDelay time.Duration
	// JobRunTime is how long a Job's pods run before kwok completes them (default JobRunTime).
	JobRunTime time.Duration
}

// Playground is a running playground: the fakes, the Kubernetes API, the bot and the page.
type Playground struct {
	Slack  *fakeslack.Server
	AWS    *fakeaws.Server
	Plane  *controlplane.ControlPlane // nil when running against a kubeconfig
	Kube   kubernetes.Interface
	Config *config.Config
	// ConfigPath is the bot's configuration file, for a person to read.
	ConfigPath string
	// BotLog is where the bot's log goes.
	BotLog string
	// Dir holds the playground's files.
	Dir string

	opts    Options
	nodes   *nodesync.NodeSync
	web     *http.Server
	url     string
	botDone chan error
	cancel  context.CancelFunc
	closers []func() error
	closeMu sync.Mutex
	closed  bool
	hub     *hub
	ownDir  bool
	mode    string
	logFile *os.File

	worldMu   sync.Mutex
	lastWorld World

	throttleMu sync.Mutex
	throttleOn bool
}

// Mode says which Kubernetes API the playground uses.
func (p *Playground) Mode() string { return p.mode }

// URL is the page's address, http://127.0.0.1:PORT/.
func (p *Playground) URL() string { return p.url }

// Start brings the playground up and returns once the bot is connected to the fake Slack and the page is served.
// On error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Playground, err error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Listener == nil {
		ln, _, err := Listen(opts.Listen)
		if err != nil {
			return nil, err
		}
		opts.Listener = ln
	}
	p := &Playground{opts: opts, botDone: make(chan error, 1), hub: newHub()}
	p.url = "http://" + opts.Listener.Addr().String() + "/"
	defer func() {
		if err != nil {
			_ = opts.Listener.Close()
			_ = p.Close()
		}
	}()
	if p.Dir = opts.Dir; p.Dir == "" {
		if p.Dir, err = os.MkdirTemp("", "hyperops-playground-"); err != nil {
			return nil, fmt.Errorf("create the playground's directory: %w", err)
		}
		p.ownDir = true
	}
	p.startFakes()
	if err := p.connectKube(ctx); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := p.seed(ctx); err != nil {
		return nil, err
	}
	t1 := time.Now()
	if err := p.startBot(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Progress, "GPU nodes added in %s; bot connected to the fake Slack in %s\n",
		t1.Sub(t0).Round(100*time.Millisecond), time.Since(t1).Round(100*time.Millisecond))
	if err := p.serve(); err != nil {
		return nil, err
	}
	return p, nil
}

// Listen binds the page's loopback address (default 127.0.0.1:0, a free port) and returns its URL. A browser that
// opens the URL before Start returns waits for the page rather than failing.
func Listen(addr string) (net.Listener, string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := checkLoopback(addr); err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, "http://" + ln.Addr().String() + "/", nil
}

// checkLoopback refuses an address a browser elsewhere could reach: the playground acts as anyone who asks.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w (use 127.0.0.1:PORT)", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q is not a loopback address: the playground lets anyone who reaches it act as "+
			"any of its people, so it serves on 127.0.0.1 only (use 127.0.0.1:PORT)", addr)
	}
	return nil
}

func (p *Playground) startFakes() {
	users := []fakeslack.User{}
	members := []string{BotUser}
	dms := map[string][]string{}
	for _, ps := range Personas {
		users = append(users, fakeslack.User{ID: ps.ID, Name: ps.Name, RealName: ps.RealName, IsBot: ps.IsAgent})
		dms[ps.DM] = []string{ps.ID}
		if !ps.IsAgent {
			members = append(members, ps.ID)
		}
	}
	channels := map[string][]string{
		OpsChannel:       members,
		ApprovalsChannel: members,
		ReportsChannel:   members,
	}
	for id, m := range dms {
		channels[id] = m
	}
	p.Slack = fakeslack.New(fakeslack.Options{Users: users, UserGroups: map[string][]string{Leads: {"U0LOU"}},
		Channels: channels, BotUserID: BotUser})
	p.closers = append(p.closers, func() error { p.Slack.Close(); return nil })
	p.hub.watchSlack(p.Slack)

	delay := p.opts.AWSDelay
	if delay == 0 {
		delay = fakeaws.DefaultTransitionDelay
	}
	var hook func(context.Context, fakeaws.NodeChange)
	if p.opts.Kubeconfig == "" {
		hook = func(ctx context.Context, ch fakeaws.NodeChange) {
			if p.nodes != nil {
				p.nodes.Hook(ctx, ch)
			}
		}
	}
	p.AWS = fakeaws.New(fakeaws.Options{Region: Region, TransitionDelay: delay, OnNodesChanged: hook,
		SecretKeys: map[string]string{awsKey: awsSecret}})
	p.closers = append(p.closers, func() error { p.AWS.Close(); return nil })
}

// connectKube starts the local control plane, or connects to the user's cluster.
func (p *Playground) connectKube(ctx context.Context) error {
	if p.opts.Kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: p.opts.Kubeconfig}
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: p.opts.Context}).ClientConfig()
		if err != nil {
			return fmt.Errorf("read the kubeconfig %s: %w", p.opts.Kubeconfig, err)
		}
		if p.Kube, err = kubernetes.NewForConfig(rc); err != nil {
			return fmt.Errorf("connect to the cluster of %s: %w", p.opts.Kubeconfig, err)
		}
		p.mode = "your cluster (" + p.opts.Kubeconfig + ")"
		return nil
	}
	t0 := time.Now()
	fmt.Fprintln(p.opts.Progress, "starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)…")
	runTime := p.opts.JobRunTime
	if runTime <= 0 {
		runTime = JobRunTime
	}
	stages, err := stagesFor(p.opts.BinDir, p.Dir, runTime)
	if err != nil {
		return err
	}
	plane, err := controlplane.Start(ctx, controlplane.Options{BinDir: p.opts.BinDir, StageDir: stages, Dir: p.Dir, WithCRDs: true})
	if err != nil {
		return fmt.Errorf("start the local control plane: %w", err)
	}
	p.Plane, p.Kube = plane, plane.Client()
	p.closers = append(p.closers, plane.Stop)
	p.nodes = nodesync.New(plane)
	p.mode = "local control plane with kwok GPU nodes"
	fmt.Fprintf(p.opts.Progress, "control plane ready in %s\n", time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// seed creates the namespaces and the AWS side: the EKS cluster and the HyperPod cluster whose GPU group's
// instances become kwok nodes.
func (p *Playground) seed(ctx context.Context) error {
	for _, ns := range []string{Namespace, "ml-research"} {
		_, err := p.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	if err := p.AWS.AddEKSCluster(fakeaws.EKSCluster{Name: EKSCluster, Region: Region}); err != nil {
		return fmt.Errorf("seed the EKS cluster: %w", err)
	}
	eks, _ := p.AWS.EKSCluster(EKSCluster)
	err := p.AWS.AddHyperPodCluster(fakeaws.HyperPodCluster{
		Name: HyperPod, Region: Region, EKSClusterARN: eks.ARN, NodeProvisioningMode: fakeaws.ProvisioningContinuous,
		InstanceGroups: []fakeaws.InstanceGroup{{
			Name: GPUGroup, Type: GPUType, Count: GPUNodes, LifecycleS3URI: "s3://playground-lifecycle/scripts/",
			ExecutionRole: "arn:aws:iam::123456789012:role/HyperPodExecutionRole",
		}},
	})
	if err != nil {
		return fmt.Errorf("seed the HyperPod cluster: %w", err)
	}
	if p.Plane == nil {
		return nil
	}
	// The nodes exist now; kwok makes them Ready within seconds, which the side panel shows. Waiting for that
	// here would only delay the page.
	if err := p.nodes.Err(); err != nil {
		return fmt.Errorf("add the GPU nodes: %w", err)
	}
	return nil
}

// startBot writes the configuration and runs the real bot in this process until Close.
func (p *Playground) startBot(ctx context.Context) error {
	kubeconfig := p.opts.Kubeconfig
	if p.Plane != nil {
		kubeconfig = p.Plane.Kubeconfig()
	}
	so := p.Slack.Options()
	cfg, path, err := writeConfig(p.Dir, configData{SlackAPIURL: p.Slack.APIURL(), AWSURL: p.AWS.URL(), Kubeconfig: kubeconfig,
		OwnCluster: p.Plane == nil}, so.AppToken, so.BotToken)
	if err != nil {
		return err
	}
	if p.opts.Context != "" {
		cfg.Clusters[0].Context = p.opts.Context
	}
	p.Config, p.ConfigPath = cfg, path
	p.BotLog = filepath.Join(p.Dir, "bot.log")
	if p.logFile, err = os.OpenFile(p.BotLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return fmt.Errorf("open the bot's log: %w", err)
	}
	p.closers = append(p.closers, p.logFile.Close)
	log := zerolog.New(p.logFile).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the bot's health endpoints: %w", err)
	}
	awsCfg := awssdk.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider(awsKey, awsSecret, "")}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	go func() {
		p.botDone <- bot.RunEmbedded(bctx, cfg, log, bot.Embedding{AWS: &awsCfg, AWSPollInterval: time.Second, Listener: ln})
	}()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	connected := make(chan error, 1)
	go func() {
		_, err := p.Slack.WaitFor(wctx, func(s fakeslack.Snapshot) bool {
			for _, c := range s.Connections {
				if c.Open {
					return true
				}
			}
			return false
		})
		connected <- err
	}()
	select {
	case err := <-connected:
		if err != nil {
			return fmt.Errorf("the bot did not connect to the fake Slack: %w (log: %s)", err, p.BotLog)
		}
		return nil
	case err := <-p.botDone:
		p.botDone <- err
		return fmt.Errorf("the bot stopped before it connected: %v (log: %s)", err, p.BotLog)
	}
}

// Done yields the bot's error once the bot stops by itself.
func (p *Playground) Done() <-chan error { return p.botDone }

// Close stops the page, the bot, the fakes and the control plane, and removes the playground's files unless
// Options.Dir was given.
func (p *Playground) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	p.hub.stop() // first: it ends the pages' event streams, which Shutdown would wait for
	if p.web != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = p.web.Shutdown(sctx)
		cancel()
	}
	if p.cancel != nil {
		p.cancel()
		select {
		case err := <-p.botDone:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("bot: %w", err))
			}
		case <-time.After(15 * time.Second):
			errs = append(errs, errors.New("the bot did not stop within 15s"))
		}
	}
	for i := len(p.closers) - 1; i >= 0; i-- {
		if err := p.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if p.ownDir {
		if err := os.RemoveAll(p.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
