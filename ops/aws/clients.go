package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/jonboulle/clockwork"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// PricingRegion is where the AWS Pricing API is served from; it answers for every region.
const PricingRegion = "us-east-1"

// The defaults of the polling that follows an accepted change.
const (
	DefaultPollInterval    = time.Duration(config.DefaultPollInterval)
	DefaultMaxPollInterval = time.Duration(config.DefaultMaxPollInterval)
	DefaultWaitTimeout     = 4 * time.Hour
	// DefaultEventsTimeout bounds one read of a HyperPod cluster's events during a change.
	DefaultEventsTimeout = 30 * time.Second
	// DefaultVerifyWait is how long reading back a write whose answer was lost waits for AWS to show the change
	// before concluding it was not made.
	DefaultVerifyWait = time.Duration(config.DefaultVerifyWait)
)

// Clients are the SDK clients HyperOps uses, one SageMaker and one EKS client per registered cluster (in the
// cluster's region, with the endpoint overrides from config) and one Pricing client.
type Clients struct {
	cfg      *config.Config
	regional map[string]regional // by cluster name
	pricing  *pricing.Client
	region   string // the base config's region, for clusters without one

	// PollInterval is the time between two status reads while a change is in progress (default
	// DefaultPollInterval). Set it before the clients are used.
	PollInterval time.Duration
	// MaxPollInterval is the longest time between two status reads (default DefaultMaxPollInterval); the wait
	// grows from PollInterval to it with the change's age.
	MaxPollInterval time.Duration
	// WaitTimeout bounds how long an execution waits for AWS to finish a change (default DefaultWaitTimeout).
	WaitTimeout time.Duration
	// VerifyWait bounds how long reading back a write whose answer was lost waits for AWS to show it (default
	// DefaultVerifyWait).
	VerifyWait time.Duration
	// EventsTimeout bounds one read of a cluster's events while a change is watched (default DefaultEventsTimeout),
	// so a ListClusterEvents that hangs holds the status reads up no longer.
	EventsTimeout time.Duration
	// OnWarning, when set, hears what an operation went on without (a cluster's events it may not read, say), once
	// per cluster and kind of warning; the bot logs it.
	OnWarning func(cluster, msg string)

	warned sync.Map // "kind/cluster" already warned of

	// Clock reads the time reservations are measured against (the real clock when nil).
	Clock clockwork.Clock

	reserved *reservations
}

type regional struct {
	sm  *sagemaker.Client
	eks *eks.Client
}

// New builds the clients from the SDK's default credential chain (IRSA when running in the cluster), with the
// SDK's standard retryer, which retries throttling and transient errors.
func New(ctx context.Context, cfg *config.Config) (*Clients, error) {
	base, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRetryer(func() awssdk.Retryer { return retry.NewStandard() }))
	if err != nil {
		return nil, fmt.Errorf("load the AWS SDK configuration: %w", err)
	}
	return NewWithAWSConfig(cfg, base), nil
}

// NewWithAWSConfig builds the clients from a given SDK configuration (tests pass static credentials and a
// BaseEndpoint). Each cluster's region replaces base.Region when set; cfg.AWS.Endpoints override BaseEndpoint per
// service. A nil base.Retryer gets the SDK's standard retryer.
func NewWithAWSConfig(cfg *config.Config, base awssdk.Config) *Clients {
	if base.Retryer == nil {
		base.Retryer = func() awssdk.Retryer { return retry.NewStandard() }
	}
	c := &Clients{cfg: cfg, regional: map[string]regional{}, region: base.Region,
		PollInterval: cfg.Execution.PollInterval.Std(), MaxPollInterval: cfg.Execution.MaxPollInterval.Std(),
		WaitTimeout: DefaultWaitTimeout, VerifyWait: cfg.Execution.VerifyWait.Std(), reserved: newReservations()}
	ep := cfg.AWS.Endpoints
	for _, cl := range cfg.Clusters {
		rc := base.Copy()
		if cl.Region != "" {
			rc.Region = cl.Region
		}
		c.regional[cl.Name] = regional{
			sm:  sagemaker.NewFromConfig(rc, func(o *sagemaker.Options) { override(&o.BaseEndpoint, ep.SageMaker) }),
			eks: eks.NewFromConfig(rc, func(o *eks.Options) { override(&o.BaseEndpoint, ep.EKS) }),
		}
	}
	pc := base.Copy()
	pc.Region = PricingRegion
	c.pricing = pricing.NewFromConfig(pc, func(o *pricing.Options) { override(&o.BaseEndpoint, ep.Pricing) })
	return c
}

func override(dst **string, endpoint string) {
	if endpoint != "" {
		*dst = awssdk.String(endpoint)
	}
}

// target is a registered cluster with its clients.
type target struct {
	name   string
	region string
	cl     *config.Cluster
	regional
}

// cluster resolves the request's cluster (the first registered one when it names none).
func (c *Clients) cluster(name string) (*target, error) {
	var cl *config.Cluster
	if name == "" {
		cl = c.cfg.DefaultCluster()
	} else {
		cl, _ = c.cfg.Cluster(name)
	}
	if cl == nil {
		names := make([]string, 0, len(c.cfg.Clusters))
		for _, x := range c.cfg.Clusters {
			names = append(names, x.Name)
		}
		return nil, ops.Unknown(ops.CodeUnknownCluster, "cluster", "registered clusters", name, names, "cluster %q is not registered", name)
	}
	region := cl.Region
	if region == "" {
		region = c.region
	}
	return &target{name: cl.Name, region: region, cl: cl, regional: c.regional[cl.Name]}, nil
}

func (c *Clients) pollInterval() time.Duration {
	if c.PollInterval > 0 {
		return c.PollInterval
	}
	return DefaultPollInterval
}

func (c *Clients) maxPollInterval() time.Duration {
	d := c.MaxPollInterval
	if d <= 0 {
		d = DefaultMaxPollInterval
	}
	return max(d, c.pollInterval())
}

func (c *Clients) waitTimeout() time.Duration {
	if c.WaitTimeout > 0 {
		return c.WaitTimeout
	}
	return DefaultWaitTimeout
}

func (c *Clients) verifyWait() time.Duration {
	if c.VerifyWait > 0 {
		return c.VerifyWait
	}
	return DefaultVerifyWait
}

// warnOnce tells OnWarning msg about cluster, unless this process told it a warning of that kind already.
func (c *Clients) warnOnce(cluster, kind, msg string) {
	if _, told := c.warned.LoadOrStore(kind+"/"+cluster, true); told || c.OnWarning == nil {
		return
	}
	c.OnWarning(cluster, msg)
}

func (c *Clients) eventsTimeout() time.Duration {
	if c.EventsTimeout > 0 {
		return c.EventsTimeout
	}
	return DefaultEventsTimeout
}
