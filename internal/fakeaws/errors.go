package fakeaws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// Operation names, as Fail and Calls take them. SageMaker and Pricing use their X-Amz-Target; EKS, which is
// REST and has no target header, is named "EKS.<Operation>".
const (
	OpSageMakerDescribeCluster  = "SageMaker.DescribeCluster"
	OpSageMakerListClusterNodes = "SageMaker.ListClusterNodes"
	OpSageMakerUpdateCluster    = "SageMaker.UpdateCluster"
	OpSageMakerCreateCluster    = "SageMaker.CreateCluster"
	OpSageMakerDeleteCluster    = "SageMaker.DeleteCluster"
	OpEKSDescribeCluster        = "EKS.DescribeCluster"
	OpEKSListNodegroups         = "EKS.ListNodegroups"
	OpEKSDescribeNodegroup      = "EKS.DescribeNodegroup"
	OpEKSUpdateNodegroupConfig  = "EKS.UpdateNodegroupConfig"
	OpEKSDescribeUpdate         = "EKS.DescribeUpdate"
	OpPricingGetProducts        = "AWSPriceListService.GetProducts"
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

// faults holds injected failures and per-operation call counts.
type faults struct {
	mu      sync.Mutex
	pending map[string][]*injected
	calls   map[string]int
}

type injected struct {
	remaining int // negative: until ClearFaults
	err       apiError
}

func newFaults() *faults {
	return &faults{pending: map[string][]*injected{}, calls: map[string]int{}}
}

// record counts a call to op and returns the injected failure it must answer with, if any.
func (f *faults) record(op string) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	queue := f.pending[op]
	if len(queue) == 0 {
		return nil
	}
	head := queue[0]
	if head.remaining > 0 {
		head.remaining--
		if head.remaining == 0 {
			f.pending[op] = queue[1:]
		}
	}
	e := head.err
	return &e
}

// Fail makes the next `times` calls of op (one of the Op constants) answer with the given AWS error code,
// HTTP status and message instead of being served; a negative times fails every call until ClearFaults.
// Failures queue per operation in the order they were added. Examples: ("ThrottlingException", 400), which
// the SDK retries; ("AccessDeniedException", 403), which it does not.
func (s *Server) Fail(op string, times int, code string, status int, message string) {
	if times == 0 {
		return
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.pending[op] = append(s.faults.pending[op], &injected{
		remaining: times,
		err:       apiError{status: status, code: code, message: message},
	})
}

// ClearFaults drops every injected failure that has not fired yet.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.pending = map[string][]*injected{}
}

// Calls is how many authenticated requests for op (one of the Op constants) reached the server, including ones
// answered with an injected failure; each SDK retry counts as a call.
func (s *Server) Calls(op string) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.calls[op]
}
