package fakeaws

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// writeCall is one mutating call the fake serves and how to see whether it took effect.
type writeCall struct {
	op      string
	call    func(ctx context.Context, c clients) error
	changed func(srv *Server) bool
}

func writeCalls() []writeCall {
	return []writeCall{
		{OpSageMakerUpdateCluster, func(ctx context.Context, c clients) error {
			_, err := c.sm.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
				InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 3)}})
			return err
		}, func(srv *Server) bool {
			c, _ := srv.HyperPodCluster("ml-hp")
			return c.Status == StatusUpdating
		}},
		{OpSageMakerCreateCluster, func(ctx context.Context, c clients) error {
			_, err := c.sm.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("ml-hp2"),
				Orchestrator:   &smtypes.ClusterOrchestrator{Eks: &smtypes.ClusterOrchestratorEksConfig{ClusterArn: aws.String(testEKSARN)}},
				InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 1)},
				VpcConfig:      testVpc()})
			return err
		}, func(srv *Server) bool {
			_, ok := srv.HyperPodCluster("ml-hp2")
			return ok
		}},
		{OpSageMakerDeleteCluster, func(ctx context.Context, c clients) error {
			_, err := c.sm.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("ml-hp")})
			return err
		}, func(srv *Server) bool {
			c, _ := srv.HyperPodCluster("ml-hp")
			return c.Status == StatusDeleting
		}},
		{OpEKSUpdateNodegroupConfig, func(ctx context.Context, c clients) error {
			in := scaleInput(nil, nil, aws.Int32(4))
			in.ClientRequestToken = aws.String("tok-1")
			_, err := c.eks.UpdateNodegroupConfig(ctx, in)
			return err
		}, func(srv *Server) bool {
			ng, _ := srv.Nodegroup("ml-eks", "gpu-ng")
			return ng.DesiredSize == 4
		}},
	}
}

// newFaultServer is a fake on the real clock whose transitions outlast the test, with clients that never retry,
// so each SDK call is exactly one call at the fake.
func newFaultServer(t *testing.T) (*Server, clients) {
	t.Helper()
	srv := New(Options{TransitionDelay: time.Hour})
	t.Cleanup(srv.Close)
	seedAll(t, srv)
	cfg := awsConfig(srv, "us-west-2", "secret")
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	return srv, clients{sm: sagemaker.NewFromConfig(cfg), eks: eks.NewFromConfig(cfg)}
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// Every mutating call, struck by each kind of fault before and after it takes effect: the client sees the fault,
// and Applied (and the fake's state) says whether the change was made.
func TestInjectedFaultsOnWrites(t *testing.T) {
	faults := []struct {
		name       string
		fault      Fault
		applied    bool
		status     int    // the HTTP status the client sees; 0 for no response
		code       string // the AWS error code the client sees
		clientWait time.Duration
	}{
		{"throttled before", Fault{When: FaultBefore, Status: 400, Code: "ThrottlingException", Message: "Rate exceeded"}, false, 400, "ThrottlingException", 0},
		{"validation before", Fault{When: FaultBefore, Status: 400, Code: "ValidationException", Message: "bad"}, false, 400, "ValidationException", 0},
		{"limit before", Fault{When: FaultBefore, Status: 400, Code: "ResourceLimitExceeded", Message: "quota"}, false, 400, "ResourceLimitExceeded", 0},
		{"access denied before", Fault{When: FaultBefore, Status: 403, Code: "AccessDeniedException", Message: "no"}, false, 403, "AccessDeniedException", 0},
		{"500 before", Fault{When: FaultBefore, Status: 500, Code: "InternalFailure", Message: "oops"}, false, 500, "InternalFailure", 0},
		{"500 after", Fault{When: FaultAfter, Status: 500, Code: "InternalFailure", Message: "oops"}, true, 500, "InternalFailure", 0},
		{"503 after", Fault{When: FaultAfter, Status: 503, Code: "ServiceUnavailable", Message: "down"}, true, 503, "ServiceUnavailable", 0},
		{"reset before", Fault{When: FaultBefore, Reset: true}, false, 0, "", 0},
		{"reset after", Fault{When: FaultAfter, Reset: true}, true, 0, "", 0},
		{"client gives up before", Fault{When: FaultBefore, Delay: time.Hour}, false, 0, "", 50 * time.Millisecond},
		{"client gives up after", Fault{When: FaultAfter, Delay: time.Hour}, true, 0, "", 50 * time.Millisecond},
		{"slow but served", Fault{When: FaultBefore, Delay: 20 * time.Millisecond}, true, 200, "", 0},
	}
	for _, wc := range writeCalls() {
		for _, fc := range faults {
			t.Run(wc.op+"/"+fc.name, func(t *testing.T) {
				srv, c := newFaultServer(t)
				f := fc.fault
				f.Op = wc.op
				srv.Inject(f)
				ctx := ctxT(t)
				if fc.clientWait > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, fc.clientWait)
					defer cancel()
				}
				err := wc.call(ctx, c)
				switch {
				case fc.status == 200:
					if err != nil {
						t.Fatalf("err = %v, want the call served", err)
					}
				case fc.clientWait > 0:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("err = %v, want the client's deadline", err)
					}
				case fc.status == 0:
					if err == nil || httpStatus(err) != 0 || apiCode(err) != "" {
						t.Fatalf("err = %v, want no HTTP response at all", err)
					}
				default:
					if httpStatus(err) != fc.status || apiCode(err) != fc.code {
						t.Fatalf("err = %v (HTTP %d), want %s %d", err, httpStatus(err), fc.code, fc.status)
					}
				}
				want := 0
				if fc.applied {
					want = 1
				}
				if got := srv.Applied(wc.op); got != want {
					t.Errorf("Applied = %d, want %d", got, want)
				}
				if got := wc.changed(srv); got != fc.applied {
					t.Errorf("state changed = %v, want %v", got, fc.applied)
				}
				if got := srv.Calls(wc.op); got != 1 {
					t.Errorf("Calls = %d, want 1", got)
				}
			})
		}
	}
}

// A fault fires Times times, in the order faults were injected, and negative Times until ClearFaults; then the
// call is served.
func TestInjectTimesAndOrder(t *testing.T) {
	srv, c := newFaultServer(t)
	wc := writeCalls()[3] // EKS: the same token makes every served call the same update
	srv.Inject(Fault{Op: wc.op, When: FaultBefore, Status: 429, Code: "TooManyRequestsException", Times: 2})
	srv.Inject(Fault{Op: wc.op, When: FaultAfter, Status: 500, Code: "ServerException", Times: -1})
	var codes []string
	for range 4 {
		codes = append(codes, apiCode(wc.call(ctxT(t), c)))
	}
	want := []string{"TooManyRequestsException", "TooManyRequestsException", "ServerException", "ServerException"}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("codes = %v, want %v", codes, want)
		}
	}
	srv.ClearFaults()
	if err := wc.call(ctxT(t), c); err != nil {
		t.Fatalf("after ClearFaults: %v", err)
	}
	// Two answers lost after the change, then a served call: one change, because the token was seen.
	if got := srv.Applied(wc.op); got != 1 {
		t.Errorf("Applied = %d, want 1 (same clientRequestToken)", got)
	}
	if got := srv.Calls(wc.op); got != 5 {
		t.Errorf("Calls = %d, want 5", got)
	}
}

// UpdateNodegroupConfig honours clientRequestToken like EKS: an answer lost after the change, then the same
// request again, gives the same update back and makes no second change.
func TestNodegroupTokenAfterLostAnswer(t *testing.T) {
	srv, c := newFaultServer(t)
	srv.Inject(Fault{Op: OpEKSUpdateNodegroupConfig, When: FaultAfter, Reset: true})
	in := scaleInput(nil, nil, aws.Int32(5))
	in.ClientRequestToken = aws.String("tok-lost")
	if _, err := c.eks.UpdateNodegroupConfig(ctxT(t), in); err == nil {
		t.Fatal("the reset call succeeded")
	}
	again, err := c.eks.UpdateNodegroupConfig(ctxT(t), in)
	if err != nil {
		t.Fatalf("resend with the same token: %v", err)
	}
	ng, _ := srv.Nodegroup("ml-eks", "gpu-ng")
	if srv.Applied(OpEKSUpdateNodegroupConfig) != 1 || ng.DesiredSize != 5 || aws.ToString(again.Update.Id) == "" {
		t.Fatalf("Applied %d, desired %d, update %q; want one change to 5", srv.Applied(OpEKSUpdateNodegroupConfig),
			ng.DesiredSize, aws.ToString(again.Update.Id))
	}
	// A new token while the first update runs is a second change, refused because the group is updating.
	in.ClientRequestToken = aws.String("tok-other")
	if _, err := c.eks.UpdateNodegroupConfig(ctxT(t), in); apiCode(err) != "ResourceInUseException" || httpStatus(err) != http.StatusConflict {
		t.Fatalf("other token: %v, want ResourceInUseException", err)
	}
}
