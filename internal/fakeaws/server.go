package fakeaws

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Defaults used when the corresponding Options field is zero.
const (
	DefaultRegion          = "us-west-2"
	DefaultAccountID       = "123456789012"
	DefaultTransitionDelay = 2 * time.Second
)

// Options configures a Server. The zero value is usable.
type Options struct {
	// Region is where clusters added without a region live. Default DefaultRegion.
	Region string
	// AccountID is the account in every ARN the server mints. Default DefaultAccountID.
	AccountID string
	// TransitionDelay is how long an accepted change (UpdateCluster, CreateCluster, DeleteCluster,
	// UpdateNodegroupConfig) stays in progress before nodes start to come and go. Default DefaultTransitionDelay;
	// a negative value means no delay.
	TransitionDelay time.Duration
	// NodeInterval is the time between two node changes within one transition. Zero means every node of the
	// transition changes at once; a positive value moves one node at a time.
	NodeInterval time.Duration
	// RecoveryDuration is how long BatchRebootClusterNodes and BatchReplaceClusterNodes take to bring an instance
	// back or replace it. Default DefaultRecoveryDuration.
	RecoveryDuration time.Duration
	// Clock drives every delay and timestamp. Default the real clock; tests pass a clockwork.FakeClock.
	Clock clockwork.Clock
	// SecretKeys maps access key IDs to secret keys. When set, requests signed by an unknown key are refused
	// with UnrecognizedClientException and signatures are verified like AWS does; when nil, any well-formed
	// SigV4 Authorization header is accepted.
	SecretKeys map[string]string
	// OnNodesChanged, when set, is called after nodes join or leave an instance group or node group, without
	// any lock held, before the transition that caused it reports completion.
	OnNodesChanged func(ctx context.Context, change NodeChange)
}

// Server is a fake AWS endpoint serving SageMaker, EKS and Pricing on one loopback address.
type Server struct {
	opts     Options
	clock    clockwork.Clock
	listener net.Listener
	http     *http.Server
	served   chan struct{}
	eksMux   *http.ServeMux
	rpc      map[string]rpcService
	sched    *scheduler
	ctx      context.Context
	cancel   context.CancelFunc
	faults   *faults

	mu        sync.Mutex
	hyperpod  map[string]*hpCluster // key regionKey(region, name)
	failNext  map[string]string     // HyperPod cluster name → failure message for its next transition
	eks       map[string]*eksCluster
	plans     map[string]*trainingPlan // key regionKey(region, name)
	prices    []Price
	closeOnce sync.Once
}

// New starts a Server on 127.0.0.1 with a free port. It panics if no loopback port can be opened, like
// httptest.NewServer, because a test cannot continue without it.
func New(opts Options) *Server {
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccountID
	}
	if opts.TransitionDelay == 0 {
		opts.TransitionDelay = DefaultTransitionDelay
	} else if opts.TransitionDelay < 0 {
		opts.TransitionDelay = 0
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("fakeaws: listen on loopback: %v", err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:     opts,
		clock:    opts.Clock,
		listener: ln,
		served:   make(chan struct{}),
		sched:    newScheduler(opts.Clock),
		ctx:      ctx,
		cancel:   cancel,
		faults:   newFaults(),
		hyperpod: map[string]*hpCluster{},
		failNext: map[string]string{},
		eks:      map[string]*eksCluster{},
		plans:    map[string]*trainingPlan{},
	}
	s.eksMux = s.newEKSMux()
	s.rpc = s.rpcServices()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("fakeaws: serve: %v", err))
		}
	}()
	return s
}

// URL is the base URL to give the SDK clients as BaseEndpoint, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// Close stops pending transitions, cancels the context passed to hooks, waits for running hooks and closes
// the listener and every connection. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.sched.close()
		_ = s.http.Close()
		<-s.served
	})
}

// ServeHTTP routes a request to SageMaker or Pricing (by X-Amz-Target) or to EKS (by path).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amzn-RequestId", newRequestID())
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.serveJSONRPC(w, r, target)
		return
	}
	s.serveEKS(w, r)
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func regionKey(region, name string) string { return region + "/" + name }
