package fakeaws

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/smithy-go/middleware"
)

// faultCall is one SDK call per service, each returning the response metadata on success.
type faultCall struct {
	op   string
	call func(ctx context.Context, c clients) (middleware.Metadata, error)
}

func faultCalls() []faultCall {
	return []faultCall{
		{OpSageMakerDescribeCluster, func(ctx context.Context, c clients) (middleware.Metadata, error) {
			out, err := c.sm.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
			if err != nil {
				return middleware.Metadata{}, err
			}
			return out.ResultMetadata, nil
		}},
		{OpEKSDescribeNodegroup, func(ctx context.Context, c clients) (middleware.Metadata, error) {
			out, err := c.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{
				ClusterName: aws.String("ml-eks"), NodegroupName: aws.String("gpu-ng")})
			if err != nil {
				return middleware.Metadata{}, err
			}
			return out.ResultMetadata, nil
		}},
		{OpPricingGetProducts, func(ctx context.Context, c clients) (middleware.Metadata, error) {
			out, err := c.pr.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")})
			if err != nil {
				return middleware.Metadata{}, err
			}
			return out.ResultMetadata, nil
		}},
	}
}

func seedAll(t *testing.T, srv *Server) {
	t.Helper()
	seedEKS(t, srv)
	err := srv.AddHyperPodCluster(HyperPodCluster{Name: "ml-hp", EKSClusterARN: testEKSARN, InstanceGroups: []InstanceGroup{
		{Name: "gpu", Type: "ml.p5.48xlarge", Count: 1, LifecycleS3URI: testS3URI, ExecutionRole: testRole}}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestThrottlingIsRetriedBySDK(t *testing.T) {
	eachFaultCall(t, 2, "ThrottlingException", http.StatusBadRequest, "Rate exceeded",
		func(t *testing.T, f *fixture, fc faultCall, md middleware.Metadata, err error) {
			if err != nil {
				t.Fatalf("call after two throttles: %v", err)
			}
			if got := f.srv.Calls(fc.op); got != 3 {
				t.Errorf("Calls = %d, want 3 (two throttled, one served)", got)
			}
			if id, ok := awsmiddleware.GetRequestIDMetadata(md); !ok || len(id) != 36 {
				t.Errorf("request id = %q", id)
			}
		})
}

// eachFaultCall runs a subtest per fault call: on a seeded fixture whose operation fails its next times calls with
// code, status and message, it makes the call once and hands check what the call answered.
func eachFaultCall(t *testing.T, times int, code string, status int, message string,
	check func(t *testing.T, f *fixture, fc faultCall, md middleware.Metadata, err error)) {
	for _, fc := range faultCalls() {
		t.Run(fc.op, func(t *testing.T) {
			f := newFixture(t, 0)
			seedAll(t, f.srv)
			f.srv.Fail(fc.op, times, code, status, message)
			md, err := fc.call(ctxT(t), f.c)
			check(t, f, fc, md, err)
		})
	}
}

func TestAccessDeniedIsNotRetried(t *testing.T) {
	eachFaultCall(t, 1, "AccessDeniedException", http.StatusForbidden, "User is not authorized to perform this action",
		func(t *testing.T, f *fixture, fc faultCall, _ middleware.Metadata, err error) {
			if apiCode(err) != "AccessDeniedException" {
				t.Fatalf("err = %v, want AccessDeniedException", err)
			}
			var re interface{ ServiceRequestID() string }
			if !errors.As(err, &re) || re.ServiceRequestID() == "" {
				t.Errorf("error carries no request id: %v", err)
			}
			if got := f.srv.Calls(fc.op); got != 1 {
				t.Errorf("Calls = %d, want 1", got)
			}
			// The failure was used up: the next call is served.
			if _, err := fc.call(ctxT(t), f.c); err != nil {
				t.Errorf("next call: %v", err)
			}
		})
}

func TestInjectedErrorsAreTyped(t *testing.T) {
	f := newFixture(t, 0)
	seedAll(t, f.srv)
	f.srv.Fail(OpEKSDescribeNodegroup, 1, "AccessDeniedException", http.StatusForbidden, "denied")
	f.srv.Fail(OpPricingGetProducts, 1, "InvalidParameterException", http.StatusBadRequest, "bad filter")
	calls := faultCalls()

	_, err := calls[1].call(ctxT(t), f.c)
	var ad *ekstypes.AccessDeniedException
	if !errors.As(err, &ad) || ad.ErrorMessage() != "denied" {
		t.Errorf("EKS: err = %v, want *types.AccessDeniedException", err)
	}
	_, err = calls[2].call(ctxT(t), f.c)
	var ipe *pricingtypes.InvalidParameterException
	if !errors.As(err, &ipe) || ipe.ErrorMessage() != "bad filter" {
		t.Errorf("Pricing: err = %v, want *types.InvalidParameterException", err)
	}
}

func TestFailUntilCleared(t *testing.T) {
	f := newFixture(t, 0)
	seedAll(t, f.srv)
	f.srv.Fail(OpSageMakerDescribeCluster, -1, "ServiceUnavailable", http.StatusServiceUnavailable, "down")
	call := faultCalls()[0]
	if _, err := call.call(ctxT(t), f.c); apiCode(err) != "ServiceUnavailable" {
		t.Fatalf("err = %v", err)
	}
	if got := f.srv.Calls(OpSageMakerDescribeCluster); got != 3 {
		t.Errorf("Calls = %d, want 3 (5xx is retried up to the SDK's 3 attempts)", got)
	}
	f.srv.ClearFaults()
	if _, err := call.call(ctxT(t), f.c); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
}
