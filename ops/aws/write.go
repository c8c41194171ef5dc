package aws

import (
	"context"
	"errors"
	"net"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/smithy-go"

	"github.com/hyperops/hyperops/ops"
)

// refusedOnly is the retry policy of a SageMaker write, which has no idempotency token: the SDK may retry only
// what AWS refused before acting (throttling). A 5xx, a dropped connection or a timeout can come after the change
// was made, and a second UpdateCluster would then meet the first one's ConflictException.
func refusedOnly(o *sagemaker.Options) { o.Retryer = throttleRetryer{o.Retryer} }

// throttleRetryer is a retryer that retries only throttling errors, and only when its inner retryer would.
type throttleRetryer struct{ awssdk.Retryer }

var throttled = retry.RetryableErrorCode{Codes: retry.DefaultThrottleErrorCodes}

func (r throttleRetryer) IsErrorRetryable(err error) bool {
	return throttled.IsErrorRetryable(err) == awssdk.TrueTernary && r.Retryer.IsErrorRetryable(err)
}

func (r throttleRetryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if v2, ok := r.Retryer.(awssdk.RetryerV2); ok {
		return v2.GetAttemptToken(ctx)
	}
	return r.GetInitialToken(), nil
}

// writeError is awsError for a call that changes AWS: when the answer may have been lost after AWS acted (a 5xx,
// no response at all, a timeout or cancel), the error also matches ops.ErrOutcomeUnknown, so the engine reads
// back instead of giving up or sending again.
func writeError(service, operation string, err error) error {
	if err == nil {
		return nil
	}
	e := awsError(service, operation, err)
	if lostAnswer(err) {
		return ops.OutcomeUnknown(e)
	}
	return e
}

// lostAnswer reports whether the call may have taken effect although it failed. AWS's 4xx answers are refusals
// made before acting; a request that never left (a refused connection, a body that would not serialize) did not act.
func lostAnswer(err error) bool {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() > 0 {
		return re.HTTPStatusCode() >= 500
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return false
	}
	var se *smithy.SerializationError
	return !errors.As(err, &se)
}

// errNoReadBack is the cause when not one read finished before the read-back's time ran out.
var errNoReadBack = errors.New("no read-back finished in time")

// readBack polls look every PollInterval for at most VerifyWait until it says the change was applied; a verdict
// other than applied is only final when the wait is over (AWS may show a change a moment after making it).
func (c *Clients) readBack(ctx context.Context, look func(ctx context.Context) (ops.Verdict, error)) (ops.Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, c.verifyWait())
	defer cancel()
	tick := time.NewTicker(c.pollInterval())
	defer tick.Stop()
	v, err := ops.VerdictUnknown, error(errNoReadBack)
	for {
		got, gerr := look(ctx)
		if got == ops.VerdictApplied {
			return got, nil
		}
		if gerr == nil || ctx.Err() == nil {
			v, err = got, gerr // a read cut short by the wait's end says nothing new
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-tick.C:
		}
	}
}
