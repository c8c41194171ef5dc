package kube

import (
	"fmt"
	"sort"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/redact"
)

// Clients are the API clients of one cluster.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// REST is the configuration the clients were built from; impersonated clients are derived from it. It may be
	// nil in tests, and then impersonation is refused.
	REST *rest.Config
	// Logs reads container logs; nil means the pods/log subresource through Kube. Tests substitute it where the
	// fake clientset only ever answers "fake logs".
	Logs LogReader
}

// Cluster is one registered cluster: its config and its clients.
type Cluster struct {
	Config    *config.Cluster
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	REST      *rest.Config
	logs      LogReader
	// redact is applied to the cluster's own text before it is shown: log tails, events, condition messages.
	redact *redact.Redactor
}

// Clusters holds the clients of every registered cluster.
type Clusters struct {
	cfg      *config.Config
	clusters map[string]*Cluster
}

// NewClusters builds clients for every cluster in cfg from its kubeconfig and context: an empty kubeconfig means
// in-cluster when running in a pod, else $KUBECONFIG or ~/.kube/config.
func NewClusters(cfg *config.Config) (*Clusters, error) {
	clients := make(map[string]Clients, len(cfg.Clusters))
	for i := range cfg.Clusters {
		cl := &cfg.Clusters[i]
		rc, err := restConfig(cl)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		boundCalls(rc, cl.RequestTimeout.Std())
		c, err := clientsFor(rc)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		clients[cl.Name] = c
	}
	return NewClustersFromClients(cfg, clients)
}

func restConfig(cl *config.Cluster) (*rest.Config, error) {
	if cl.Kubeconfig == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cl.Kubeconfig != "" {
		rules.ExplicitPath = cl.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cl.Context}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return rc, nil
}

func clientsFor(rc *rest.Config) (Clients, error) {
	rc = rest.CopyConfig(rc)
	if rc.UserAgent == "" {
		rc.UserAgent = "hyperops"
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return Clients{}, fmt.Errorf("build clientset: %w", err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return Clients{}, fmt.Errorf("build dynamic client: %w", err)
	}
	return Clients{Kube: kc, Dynamic: dc, REST: rc}, nil
}

// NewClustersFromClients wires given clients (fake clientsets in tests) to the clusters of cfg. Every cluster of
// cfg needs clients.
func NewClustersFromClients(cfg *config.Config, clients map[string]Clients) (*Clusters, error) {
	redact, err := redact.For(cfg)
	if err != nil {
		return nil, err
	}
	cs := &Clusters{cfg: cfg, clusters: make(map[string]*Cluster, len(cfg.Clusters))}
	for i := range cfg.Clusters {
		cl := &cfg.Clusters[i]
		c, ok := clients[cl.Name]
		if !ok || c.Kube == nil || c.Dynamic == nil {
			return nil, fmt.Errorf("cluster %s: typed and dynamic clients are required", cl.Name)
		}
		cs.clusters[cl.Name] = &Cluster{Config: cl, Kube: c.Kube, Dynamic: c.Dynamic, Discovery: c.Kube.Discovery(),
			REST: c.REST, logs: c.Logs, redact: redact}
	}
	return cs, nil
}

// Config returns the whole configuration.
func (cs *Clusters) Config() *config.Config { return cs.cfg }

// Names lists the registered clusters, sorted.
func (cs *Clusters) Names() []string {
	out := make([]string, 0, len(cs.clusters))
	for n := range cs.clusters {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Get returns a registered cluster, or E_UNKNOWN_CLUSTER.
func (cs *Clusters) Get(name string) (*Cluster, error) {
	if name == "" {
		if d := cs.cfg.DefaultCluster(); d != nil {
			name = d.Name
		}
	}
	c, ok := cs.clusters[name]
	if !ok {
		return nil, ops.Unknown(ops.CodeUnknownCluster, "cluster", "registered clusters", name, cs.Names(), "cluster %q is not registered", name)
	}
	return c, nil
}
