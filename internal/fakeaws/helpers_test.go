package fakeaws

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/smithy-go"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/jonboulle/clockwork"
)

const (
	testRole   = "arn:aws:iam::123456789012:role/hyperpod-exec"
	testS3URI  = "s3://lifecycle-bucket/scripts/"
	testEKSARN = "arn:aws:eks:us-west-2:123456789012:cluster/ml-eks"
)

// clients are the real SDK clients pointed at a fake.
type clients struct {
	sm  *sagemaker.Client
	eks *eks.Client
	pr  *pricing.Client
}

// awsConfig is what a caller of the SDK would build, with the retryer's backoff shortened so retry tests run
// fast; the retryer's decisions (what is retried, how often) stay the SDK's.
func awsConfig(srv *Server, region, secret string) aws.Config {
	return aws.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDFAKEAWS", secret, ""),
		BaseEndpoint: aws.String(srv.URL()),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			})
		},
	}
}

func newClients(srv *Server, region string) clients {
	cfg := awsConfig(srv, region, "secret")
	return clients{sm: sagemaker.NewFromConfig(cfg), eks: eks.NewFromConfig(cfg), pr: pricing.NewFromConfig(cfg)}
}

// hookRecorder collects NodeChanges delivered to OnNodesChanged.
type hookRecorder struct {
	opstest.Log[NodeChange]
}

func (h *hookRecorder) record(_ context.Context, ch NodeChange) { h.Add(ch) }

// fixture is a fake on a fake clock with SDK clients and a hook recorder.
type fixture struct {
	srv   *Server
	clock *clockwork.FakeClock
	hooks *hookRecorder
	c     clients
	delay time.Duration
}

func newFixture(t *testing.T, nodeInterval time.Duration) *fixture {
	t.Helper()
	f := &fixture{clock: clockwork.NewFakeClock(), hooks: &hookRecorder{}, delay: 30 * time.Second}
	f.srv = New(Options{
		Clock: f.clock, TransitionDelay: f.delay, NodeInterval: nodeInterval, OnNodesChanged: f.hooks.record,
	})
	t.Cleanup(f.srv.Close)
	f.c = newClients(f.srv, "us-west-2")
	return f
}

// advance moves the fake clock once a transition timer is waiting on it.
func (f *fixture) advance(t *testing.T, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no transition timer is waiting on the clock: %v", err)
	}
	f.clock.Advance(d)
}

// apiCode is the AWS error code of err, or "" if it is not an API error.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
