package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options tunes Start. The zero value starts a plane from the binaries BinDir finds.
type Options struct {
	// BinDir holds the binaries; empty means BinDir().
	BinDir string
	// StageDir holds kwok's Stage files (node/ and pod/ subdirectories); empty means StageDir().
	StageDir string
	// Dir is the parent of the plane's temp dir; empty means os.TempDir().
	Dir string
	// WithCRDs installs the PyTorchJob and HyperPodPyTorchJob CRDs before Start returns.
	WithCRDs bool
	// Users are extra static-token identities for RBAC and impersonation tests.
	Users []User
	// StartTimeout bounds the whole start; zero means 90s (on top of ctx's own deadline).
	StartTimeout time.Duration
	// StopGrace is how long each component gets after SIGTERM before SIGKILL; zero means 5s.
	StopGrace time.Duration
	// KeepDir leaves the temp dir (logs, certs, etcd data) in place after Stop.
	KeepDir bool
	// Verbosity is the klog -v level of the Kubernetes components; zero means 1.
	Verbosity int
}

// User is a static-token identity known to the API server.
type User struct {
	Name   string
	Token  string
	Groups []string
}

// ControlPlane is a running local control plane. Stop it exactly once, also when a test fails.
type ControlPlane struct {
	opts       Options
	dir        string
	ca         *authority
	ports      ports
	procs      []*process
	admin      *rest.Config
	httpClient *http.Client
	client     kubernetes.Interface
	dynamic    dynamic.Interface
	kubecfg    string
	stopOnce   sync.Once
	stopErr    error
	startedAt  time.Time
	readyIn    time.Duration
}

// ports are the loopback ports of one plane.
type ports struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kwok int
}

func (p ports) all() []int {
	return []int{p.etcdClient, p.etcdPeer, p.apiserver, p.controllerManager, p.scheduler, p.kwok}
}

// AdminUser is the static-token identity of the admin kubeconfig (group system:masters).
const AdminUser = "hyperops-e2e-admin"

// Start brings up etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on
// free loopback ports in a new temp dir, and returns once every one of them reports healthy.
// ctx bounds only the start: the processes live until Stop. On error nothing is left running,
// and the error carries the tail of the failing component's log.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	cp := &ControlPlane{opts: opts, startedAt: time.Now()}
	if err := cp.start(ctx); err != nil {
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", stopErr))
		}
		return nil, err
	}
	cp.readyIn = time.Since(cp.startedAt)
	return cp, nil
}

func (o *Options) defaults() error {
	var err error
	if o.BinDir == "" {
		if o.BinDir, err = BinDir(); err != nil {
			return err
		}
	}
	if err := checkBinaries(o.BinDir); err != nil {
		return err
	}
	if o.StageDir == "" {
		if o.StageDir, err = StageDir(); err != nil {
			return err
		}
	}
	for _, sub := range []string{"node", "pod"} {
		if info, err := os.Stat(filepath.Join(o.StageDir, sub)); err != nil || !info.IsDir() {
			return fmt.Errorf("%w (kwok stages: no %s/ in %s)", ErrBinariesMissing, sub, o.StageDir)
		}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
	if o.StopGrace == 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.Verbosity == 0 {
		o.Verbosity = 1
	}
	for _, u := range o.Users {
		if u.Name == "" || u.Token == "" {
			return fmt.Errorf("static user %+v: name and token are required", u)
		}
	}
	return nil
}

func (cp *ControlPlane) start(ctx context.Context) error {
	dir, err := os.MkdirTemp(cp.opts.Dir, "hyperops-controlplane-")
	if err != nil {
		return fmt.Errorf("create control-plane dir: %w", err)
	}
	cp.dir = dir
	if cp.ca, err = newAuthority(); err != nil {
		return err
	}
	p, err := freePorts(6)
	if err != nil {
		return err
	}
	cp.ports = ports{p[0], p[1], p[2], p[3], p[4], p[5]}
	registerPorts(p...)

	if err := cp.startEtcd(ctx); err != nil {
		return err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return err
	}
	if err := cp.connect(); err != nil {
		return err
	}
	if err := cp.startNodeComponents(ctx); err != nil {
		return err
	}
	if err := cp.applyManifests(ctx); err != nil {
		return err
	}
	if cp.opts.WithCRDs {
		if err := cp.InstallCRDs(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Stop terminates every component it started (newest first), waits for each to exit, and
// removes the temp dir unless Options.KeepDir. Calling it again returns the first result.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		for i := len(cp.procs) - 1; i >= 0; i-- {
			if err := cp.procs[i].stop(cp.opts.StopGrace); err != nil {
				errs = append(errs, err)
			}
		}
		if cp.httpClient != nil {
			// Idle keep-alive connections would hold reader goroutines until the peer's
			// close is noticed; dropping them now keeps goleak and the port check exact.
			cp.httpClient.CloseIdleConnections()
		}
		if cp.dir != "" && !cp.opts.KeepDir {
			if err := os.RemoveAll(cp.dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", cp.dir, err))
			}
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// Leftovers returns an error if any process this plane started is still alive or any of
// its ports cannot be bound again; call it after Stop.
func (cp *ControlPlane) Leftovers() error {
	pgids := make([]int, 0, len(cp.procs))
	for _, p := range cp.procs {
		pgids = append(pgids, p.pgid)
	}
	return leftovers(pgids, cp.ports.all())
}

// Dir is the plane's temp dir: component logs (<name>.log), certificates, etcd data.
func (cp *ControlPlane) Dir() string { return cp.dir }

// Kubeconfig is the path of an admin kubeconfig (static token, group system:masters).
func (cp *ControlPlane) Kubeconfig() string { return cp.kubecfg }

// RESTConfig returns a copy of the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.admin) }

// Client returns an admin clientset.
func (cp *ControlPlane) Client() kubernetes.Interface { return cp.client }

// Dynamic returns an admin dynamic client, for custom resources.
func (cp *ControlPlane) Dynamic() dynamic.Interface { return cp.dynamic }

// Host is the API server's URL.
func (cp *ControlPlane) Host() string { return cp.admin.Host }

// ReadyIn is how long Start took from launching etcd to every component being healthy.
func (cp *ControlPlane) ReadyIn() time.Duration { return cp.readyIn }

// PIDs returns the process id of each running component, by name.
func (cp *ControlPlane) PIDs() map[string]int {
	out := make(map[string]int, len(cp.procs))
	for _, p := range cp.procs {
		out[p.name] = p.pgid
	}
	return out
}

// Ports returns the loopback ports in use by this plane.
func (cp *ControlPlane) Ports() []int { return cp.ports.all() }

// LogTail returns the end of a component's log ("etcd", "kube-apiserver", …), for test
// failure messages.
func (cp *ControlPlane) LogTail(component string) string {
	return tailFile(filepath.Join(cp.dir, component+".log"), logTailBytes)
}

// addr is host:port on loopback.
func addr(port int) string { return net.JoinHostPort("127.0.0.1", fmt.Sprint(port)) }
