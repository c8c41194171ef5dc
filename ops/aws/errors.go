package aws

import (
	"context"
	"errors"
	"fmt"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/redact"
)

// APIFailure is what AWS said when a call failed: the service and operation, AWS's error code and message, and
// the request id AWS support asks for. It is the cause (Err) of the E_AWS_ERROR errors this package returns.
type APIFailure struct {
	Service   string
	Operation string
	Code      string
	Message   string
	RequestID string
	Err       error
}

func (f *APIFailure) Error() string {
	return fmt.Sprintf("%s %s: %s: %s (request id %s)", f.Service, f.Operation, f.Code, f.Message, f.RequestID)
}

// Unwrap returns the SDK's error.
func (f *APIFailure) Unwrap() error { return f.Err }

// awsError turns an SDK error into E_AWS_ERROR carrying AWS's message, error code and request id.
func awsError(service, operation string, err error) error {
	if err == nil {
		return nil
	}
	var ue *ops.Error
	if errors.As(err, &ue) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ops.Wrap(err, ops.CodeAWSError, "", "retry; the call did not finish before the request's deadline",
			"%s %s was interrupted: %v", service, operation, err)
	}
	f := &APIFailure{Service: service, Operation: operation, Err: err}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		f.RequestID = re.ServiceRequestID()
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ops.Wrap(f, ops.CodeAWSError, "", "check the network path to AWS and the endpoint overrides in aws.endpoints",
			"could not reach AWS %s for %s: %s", service, operation, redact.Credentials(err.Error()))
	}
	f.Code, f.Message = ae.ErrorCode(), redact.Credentials(ae.ErrorMessage())
	msg := fmt.Sprintf("AWS %s %s failed: %s: %s", service, operation, f.Code, f.Message)
	if f.RequestID != "" {
		msg += " (request id " + f.RequestID + ")"
	}
	return &ops.Error{Code: ops.CodeAWSError, Message: msg, Next: nextStep(service, operation, f.Code), Err: f}
}

// nextStep says what a person can do about an AWS error code.
func nextStep(service, operation, code string) string {
	switch code {
	case "AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "UnrecognizedClientException":
		return fmt.Sprintf("grant the bot's IAM role %s:%s (or check its credentials), then retry", iamPrefix(service), operation)
	case "ValidationException", "InvalidParameterException", "BadRequestException":
		return "AWS refused the request as sent; fix the named value (or the template in config) and retry"
	case "ResourceNotFound", "ResourceNotFoundException":
		return "check the cluster names under hyperpod/eks in config against the AWS account and region"
	case "ThrottlingException", "TooManyRequestsException", "Throttling":
		return "AWS is throttling the bot; retry in a minute"
	case "ConflictException", "ResourceInUse", "ResourceInUseException":
		return "another change is in progress on AWS; wait for it to finish and retry"
	}
	return "retry; if it persists, look the request id up with AWS support"
}

func iamPrefix(service string) string {
	switch service {
	case serviceSageMaker:
		return "sagemaker"
	case serviceEKS:
		return "eks"
	case servicePricing:
		return "pricing"
	}
	return service
}

// The service names used in messages.
const (
	serviceSageMaker = "SageMaker"
	serviceEKS       = "EKS"
	servicePricing   = "Pricing"
)

// apiCode is the AWS error code of err, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
