package fakeaws

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Operation names, as Inject, Fail, Calls and Applied take them. SageMaker and Pricing use their X-Amz-Target; EKS, which is
// REST and has no target header, is named "EKS.<Operation>".
const (
	OpSageMakerDescribeCluster          = "SageMaker.DescribeCluster"
	OpSageMakerListClusterNodes         = "SageMaker.ListClusterNodes"
	OpSageMakerListClusterEvents        = "SageMaker.ListClusterEvents"
	OpSageMakerUpdateCluster            = "SageMaker.UpdateCluster"
	OpSageMakerCreateCluster            = "SageMaker.CreateCluster"
	OpSageMakerDeleteCluster            = "SageMaker.DeleteCluster"
	OpSageMakerDescribeClusterNode      = "SageMaker.DescribeClusterNode"
	OpSageMakerBatchRebootClusterNodes  = "SageMaker.BatchRebootClusterNodes"
	OpSageMakerBatchReplaceClusterNodes = "SageMaker.BatchReplaceClusterNodes"
	OpSageMakerDescribeTrainingPlan     = "SageMaker.DescribeTrainingPlan"
	OpEKSDescribeCluster                = "EKS.DescribeCluster"
	OpEKSListNodegroups                 = "EKS.ListNodegroups"
	OpEKSDescribeNodegroup              = "EKS.DescribeNodegroup"
	OpEKSUpdateNodegroupConfig          = "EKS.UpdateNodegroupConfig"
	OpEKSDescribeUpdate                 = "EKS.DescribeUpdate"
	OpPricingGetProducts                = "AWSPriceListService.GetProducts"
)

// apiError is an AWS error response: HTTP status, error code (the shape name) and message, plus the extra
// members some services put next to the message (EKS's clusterName, nodegroupName).
type apiError struct {
	status  int
	code    string
	message string
	extra   map[string]string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%d): %s", e.code, e.status, e.message) }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func validationError(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "ValidationException", format, args...)
}

// modeledUpperMessage lists the awsJson error shapes whose modeled message member is "Message"; AWS's
// framework errors (validation, throttling, auth) use "message".
var modeledUpperMessage = map[string]bool{
	"ResourceNotFound": true, "ResourceInUse": true, "ResourceLimitExceeded": true, "ConflictException": true,
	"InvalidParameterException": true, "NotFoundException": true, "InvalidNextTokenException": true,
	"ExpiredNextTokenException": true, "InternalErrorException": true,
}

// writeJSONRPCError writes an awsJson1_1 error: the code in "__type", the message beside it.
func writeJSONRPCError(w http.ResponseWriter, e *apiError) {
	body := map[string]string{"__type": e.code}
	key := "message"
	if modeledUpperMessage[e.code] {
		key = "Message"
	}
	body[key] = e.message
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(body)
}

// writeRESTError writes a REST-JSON error: the code in x-amzn-ErrorType, {"message": …} in the body.
func writeRESTError(w http.ResponseWriter, e *apiError) {
	body := map[string]string{"message": e.message}
	for k, v := range e.extra {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", e.code)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}
