package fakeaws

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
)

// rpcHandler serves one awsJson operation: it gets the region from the credential scope and the raw body,
// and returns the response document or an AWS error.
type rpcHandler func(ctx context.Context, region string, body []byte) (any, *apiError)

type rpcService struct {
	signingName string
	ops         map[string]rpcHandler
}

func (s *Server) rpcServices() map[string]rpcService {
	return map[string]rpcService{
		"SageMaker": {signingName: "sagemaker", ops: map[string]rpcHandler{
			"DescribeCluster":          s.smDescribeCluster,
			"ListClusterNodes":         s.smListClusterNodes,
			"ListClusterEvents":        s.smListClusterEvents,
			"DescribeClusterNode":      s.smDescribeClusterNode,
			"BatchRebootClusterNodes":  s.smBatchRebootClusterNodes,
			"BatchReplaceClusterNodes": s.smBatchReplaceClusterNodes,
			"UpdateCluster":            s.smUpdateCluster,
			"CreateCluster":            s.smCreateCluster,
			"DeleteCluster":            s.smDeleteCluster,
			"DescribeTrainingPlan":     s.smDescribeTrainingPlan,
		}},
		"AWSPriceListService": {signingName: "pricing", ops: map[string]rpcHandler{
			"GetProducts": s.pricingGetProducts,
		}},
	}
}

// serveJSONRPC serves SageMaker and Pricing, both awsJson1_1: POST / with X-Amz-Target: <Service>.<Operation>.
func (s *Server) serveJSONRPC(w http.ResponseWriter, r *http.Request, target string) {
	svcName, opName, _ := strings.Cut(target, ".")
	svc, ok := s.rpc[svcName]
	handler := svc.ops[opName]
	if !ok || handler == nil {
		writeJSONRPCError(w, errorf(http.StatusBadRequest, "UnknownOperationException", "Unknown operation %s", target))
		return
	}
	if r.Method != http.MethodPost {
		writeJSONRPCError(w, errorf(http.StatusMethodNotAllowed, "UnknownOperationException",
			"%s is only served on POST", target))
		return
	}
	body, aerr := readBody(r)
	if aerr != nil {
		writeJSONRPCError(w, aerr)
		return
	}
	region, aerr := s.authenticate(r, body, svc.signingName)
	if aerr != nil {
		writeJSONRPCError(w, aerr)
		return
	}
	s.serveOp(w, r, target, func() (any, *apiError) { return handler(r.Context(), region, body) }, rpcAnswer)
}

var rpcAnswer = answer{
	ok:  func(w http.ResponseWriter, out any) { writeJSON(w, "application/x-amz-json-1.1", out) },
	err: writeJSONRPCError,
}

// decodeChecked decodes an awsJson request body into a T and runs check on it, the two steps every operation
// whose input has a check of its own begins with.
func decodeChecked[T any](body []byte, check func(T) *apiError) (T, *apiError) {
	var in T
	if aerr := decodeInput(body, &in); aerr != nil {
		return in, aerr
	}
	return in, check(in)
}

// decodeInput unmarshals an awsJson request body; an empty body is an empty input.
func decodeInput(body []byte, in any) *apiError {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, in); err != nil {
		return serializationError(err)
	}
	return nil
}
