package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceCIDR is the cluster's service range; the API server's certificate carries its first
// address so in-cluster clients of kubernetes.default would verify too.
const (
	serviceCIDR     = "10.96.0.0/16"
	serviceIP       = "10.96.0.1"
	saIssuer        = "https://kubernetes.default.svc.cluster.local"
	readyPollPeriod = 100 * time.Millisecond
)

func (cp *ControlPlane) path(name string) string { return filepath.Join(cp.dir, name) }

func (cp *ControlPlane) bin(name string) string { return filepath.Join(cp.opts.BinDir, name) }

// env is the children's environment: HOME is the plane's dir so kwok never reads a
// developer's ~/.kwok/kwok.yaml, and nothing else leaks in from the test process.
func (cp *ControlPlane) env() []string {
	return []string{"HOME=" + cp.dir, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + cp.dir}
}

func (cp *ControlPlane) launch(name string, args []string) (*process, error) {
	p, err := startProcess(name, cp.bin(name), args, cp.dir, cp.env())
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	return p, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	client := "http://" + addr(cp.ports.etcdClient)
	peer := "http://" + addr(cp.ports.etcdPeer)
	p, err := cp.launch("etcd", []string{
		"--name=e2e",
		"--data-dir=" + cp.path("etcd-data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=e2e=" + peer,
		"--log-level=warn",
		// Test data is disposable: skipping fsync makes every API write much cheaper.
		"--unsafe-no-fsync=true",
	})
	if err != nil {
		return err
	}
	probe := &http.Client{Timeout: 2 * time.Second}
	defer probe.CloseIdleConnections()
	return waitReady(ctx, p, func(ctx context.Context) error {
		return get(ctx, probe, client+"/health", "", `"health":"true"`)
	})
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	if err := cp.writeAPIServerFiles(); err != nil {
		return err
	}
	p, err := cp.launch("kube-apiserver", []string{
		"--etcd-servers=http://" + addr(cp.ports.etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cp.ports.apiserver),
		// A loopback advertise address cannot back the kubernetes Service endpoints.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + cp.path("apiserver-certs"),
		"--tls-cert-file=" + cp.path("apiserver.crt"),
		"--tls-private-key-file=" + cp.path("apiserver.key"),
		"--client-ca-file=" + cp.path("ca.crt"),
		"--token-auth-file=" + cp.path("tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + saIssuer,
		"--service-account-key-file=" + cp.path("sa.pub"),
		"--service-account-signing-key-file=" + cp.path("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		// pods/log is proxied to kwok's kubelet endpoint; its serving certificate is signed by the
		// plane's CA, so the API server verifies it instead of skipping TLS verification.
		"--kubelet-certificate-authority=" + cp.path("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
		fmt.Sprintf("--v=%d", cp.opts.Verbosity),
	})
	if err != nil {
		return err
	}
	probe, err := cp.tlsProbe()
	if err != nil {
		return err
	}
	defer probe.CloseIdleConnections()
	url := "https://" + addr(cp.ports.apiserver) + "/readyz"
	return waitReady(ctx, p, func(ctx context.Context) error {
		return get(ctx, probe, url, cp.adminToken(), "ok")
	})
}

// writeAPIServerFiles writes the CA, the serving pair, the service-account keys and the
// static token file.
func (cp *ControlPlane) writeAPIServerFiles() error {
	if err := os.WriteFile(cp.path("ca.crt"), cp.ca.certPEM, 0o600); err != nil {
		return fmt.Errorf("write CA: %w", err)
	}
	serving, err := cp.ca.serving("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)})
	if err != nil {
		return err
	}
	if _, _, err := writeKeyPair(cp.dir, "apiserver", serving); err != nil {
		return err
	}
	private, public, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	if err := os.WriteFile(cp.path("sa.key"), private, 0o600); err != nil {
		return fmt.Errorf("write service-account key: %w", err)
	}
	if err := os.WriteFile(cp.path("sa.pub"), public, 0o600); err != nil {
		return fmt.Errorf("write service-account public key: %w", err)
	}
	return os.WriteFile(cp.path("tokens.csv"), []byte(tokenFile(cp.users())), 0o600)
}

// users are the static-token identities: the admin first, then Options.Users.
func (cp *ControlPlane) users() []User {
	return append([]User{{Name: AdminUser, Token: cp.adminToken(), Groups: []string{"system:masters"}}}, cp.opts.Users...)
}

// adminToken is derived from the plane's CA serial so each plane has its own.
func (cp *ControlPlane) adminToken() string { return "admin-" + cp.ca.cert.SerialNumber.Text(36) }

// tokenFile renders the API server's --token-auth-file: token,user,uid,"group1,group2".
func tokenFile(users []User) string {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s,%s,%s", u.Token, u.Name, u.Name)
		if len(u.Groups) > 0 {
			fmt.Fprintf(&b, ",%q", strings.Join(u.Groups, ","))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// connect builds the admin clients and writes the admin kubeconfig.
func (cp *ControlPlane) connect() error {
	cp.admin = cp.TokenConfig(cp.adminToken())
	hc, err := rest.HTTPClientFor(cp.admin)
	if err != nil {
		return fmt.Errorf("admin HTTP client: %w", err)
	}
	cp.httpClient = hc
	if cp.client, err = kubernetes.NewForConfigAndClient(cp.admin, hc); err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	if cp.dynamic, err = dynamic.NewForConfigAndClient(cp.admin, hc); err != nil {
		return fmt.Errorf("admin dynamic client: %w", err)
	}
	cp.kubecfg = cp.path("admin.kubeconfig")
	return cp.writeKubeconfig(cp.kubecfg, AdminUser, &clientcmdapi.AuthInfo{Token: cp.adminToken()})
}

// TokenConfig returns a client configuration that authenticates with a static token
// (the admin's or one of Options.Users).
func (cp *ControlPlane) TokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + addr(cp.ports.apiserver),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.ca.certPEM},
		QPS:             100,
		Burst:           200,
	}
}

// UserConfig returns a client configuration for any user and groups, authenticated by a
// client certificate the plane's CA signs on the spot: RBAC sees exactly that identity.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	kp, err := cp.ca.client(user, groups)
	if err != nil {
		return nil, err
	}
	cfg := cp.TokenConfig("")
	cfg.CertData, cfg.KeyData = kp.certPEM, kp.keyPEM
	return cfg, nil
}

// writeKubeconfig writes a kubeconfig for the plane's API server with the given credentials.
func (cp *ControlPlane) writeKubeconfig(path, user string, auth *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{
		Server:                   "https://" + addr(cp.ports.apiserver),
		CertificateAuthorityData: cp.ca.certPEM,
	}
	cfg.AuthInfos[user] = auth
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// clientKubeconfig issues a client certificate for user/groups and writes name.kubeconfig.
func (cp *ControlPlane) clientKubeconfig(name, user string, groups ...string) (string, error) {
	kp, err := cp.ca.client(user, groups)
	if err != nil {
		return "", err
	}
	path := cp.path(name + ".kubeconfig")
	return path, cp.writeKubeconfig(path, user, &clientcmdapi.AuthInfo{
		ClientCertificateData: kp.certPEM,
		ClientKeyData:         kp.keyPEM,
	})
}

// startNodeComponents starts the controller manager, the scheduler and kwok together and
// waits until all three are healthy.
func (cp *ControlPlane) startNodeComponents(ctx context.Context) error {
	probe, err := cp.tlsProbe()
	if err != nil {
		return err
	}
	defer probe.CloseIdleConnections()
	type pending struct {
		p   *process
		url string
	}
	var waits []pending
	for _, start := range []func() (*process, string, error){cp.startControllerManager, cp.startScheduler, cp.startKwok} {
		p, url, err := start()
		if err != nil {
			return err
		}
		waits = append(waits, pending{p, url})
	}
	for _, w := range waits {
		if err := waitReady(ctx, w.p, func(ctx context.Context) error {
			return get(ctx, probe, w.url, "", "ok")
		}); err != nil {
			return err
		}
	}
	return nil
}

func (cp *ControlPlane) startControllerManager() (*process, string, error) {
	kubeconfig, err := cp.clientKubeconfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return nil, "", err
	}
	serving, err := cp.servingPair("kube-controller-manager")
	if err != nil {
		return nil, "", err
	}
	caKey, err := cp.ca.caKeyPEM()
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(cp.path("ca.key"), caKey, 0o600); err != nil {
		return nil, "", fmt.Errorf("write CA key: %w", err)
	}
	p, err := cp.launch("kube-controller-manager", []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cp.ports.controllerManager),
		"--tls-cert-file=" + serving[0],
		"--tls-private-key-file=" + serving[1],
		"--controllers=*",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + cp.path("sa.key"),
		// Only the CA certificate: it is what lands in every service account's ca.crt.
		"--root-ca-file=" + cp.path("ca.crt"),
		"--cluster-signing-cert-file=" + cp.path("ca.crt"),
		"--cluster-signing-key-file=" + cp.path("ca.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--profiling=false",
		fmt.Sprintf("--v=%d", cp.opts.Verbosity),
	})
	return p, "https://" + addr(cp.ports.controllerManager) + "/healthz", err
}

func (cp *ControlPlane) startScheduler() (*process, string, error) {
	kubeconfig, err := cp.clientKubeconfig("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return nil, "", err
	}
	serving, err := cp.servingPair("kube-scheduler")
	if err != nil {
		return nil, "", err
	}
	p, err := cp.launch("kube-scheduler", []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cp.ports.scheduler),
		"--tls-cert-file=" + serving[0],
		"--tls-private-key-file=" + serving[1],
		"--leader-elect=false",
		"--profiling=false",
		fmt.Sprintf("--v=%d", cp.opts.Verbosity),
	})
	return p, "https://" + addr(cp.ports.scheduler) + "/healthz", err
}

// NodeAnnotation marks the nodes kwok manages; AddNode sets it.
const (
	NodeAnnotation      = "kwok.x-k8s.io/node"
	NodeAnnotationValue = "fake"
)

func (cp *ControlPlane) startKwok() (*process, string, error) {
	// kwok needs cluster-wide write access to node and pod status and to leases.
	kubeconfig, err := cp.clientKubeconfig("kwok", "kwok-controller", "system:masters")
	if err != nil {
		return nil, "", err
	}
	serving, err := cp.servingPair("kwok")
	if err != nil {
		return nil, "", err
	}
	stages, _, err := stageFiles(cp.opts.StageDir)
	if err != nil {
		return nil, "", err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + NodeAnnotation + "=" + NodeAnnotationValue,
		"--server-address=" + addr(cp.ports.kwok),
		"--tls-cert-file=" + serving[0],
		"--tls-private-key-file=" + serving[1],
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--node-port=%d", cp.ports.kwok),
	}
	for _, s := range stages {
		args = append(args, "--config="+s)
	}
	logsConfig, err := cp.writeKwokLogsConfig()
	if err != nil {
		return nil, "", err
	}
	args = append(args, "--config="+logsConfig)
	p, err := cp.launch("kwok", args)
	return p, "https://" + addr(cp.ports.kwok) + "/healthz", err
}

// stageFiles lists the kwok Stage files under node/, pod/ and volume/. Other manifests kwok
// ships alongside them (its StorageClass) are not configuration; applyManifests creates them.
func stageFiles(dir string) (stages, manifests []string, err error) {
	for _, sub := range []string{"node", "pod", "volume"} {
		matches, err := filepath.Glob(filepath.Join(dir, sub, "*.yaml"))
		if err != nil {
			return nil, nil, fmt.Errorf("list kwok stages: %w", err)
		}
		for _, m := range matches {
			data, err := os.ReadFile(m)
			if err != nil {
				return nil, nil, fmt.Errorf("read kwok stage: %w", err)
			}
			if strings.Contains(string(data), "\nkind: Stage\n") {
				stages = append(stages, m)
			} else {
				manifests = append(manifests, m)
			}
		}
	}
	if len(stages) == 0 {
		return nil, nil, fmt.Errorf("%w (no kwok stage files in %s)", ErrBinariesMissing, dir)
	}
	return stages, manifests, nil
}

// servingPair issues a loopback serving certificate for a component and returns the
// paths of its certificate and key.
func (cp *ControlPlane) servingPair(name string) ([2]string, error) {
	kp, err := cp.ca.serving(name, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return [2]string{}, err
	}
	certFile, keyFile, err := writeKeyPair(cp.dir, name+"-serving", kp)
	return [2]string{certFile, keyFile}, err
}

// tlsProbe is an HTTP client that trusts only the plane's CA.
func (cp *ControlPlane) tlsProbe() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.ca.certPEM) {
		return nil, fmt.Errorf("load plane CA into a pool")
	}
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

// waitReady polls check until it succeeds, the process exits, or ctx ends; failures carry
// the last check error and the tail of the component's log.
func waitReady(ctx context.Context, p *process, check func(context.Context) error) error {
	ticker := time.NewTicker(readyPollPeriod)
	defer ticker.Stop()
	var last error
	for {
		if exited, err := p.exited(); exited {
			return fmt.Errorf("%s exited during start (%v); log tail:\n%s", p.name, err, p.tail())
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); log tail:\n%s", p.name, ctx.Err(), last, p.tail())
		case <-ticker.C:
		}
	}
}

// get GETs url and wants a 200 whose body contains want.
func get(ctx context.Context, client *http.Client, url, token, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("build request for %s: %w", url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return nil
}
