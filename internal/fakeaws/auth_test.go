package fakeaws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
)

// rawRequest sends a request the way a hand-rolled client would, optionally SigV4-signed for service.
func rawRequest(t *testing.T, srv *Server, method, path, target, body, signFor string) (*http.Response, map[string]string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, srv.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	}
	if signFor != "" {
		sum := sha256.Sum256([]byte(body))
		creds := aws.Credentials{AccessKeyID: "AKIDRAW", SecretAccessKey: "secret"}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), signFor,
			"us-west-2", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	return resp, doc
}

func TestAuthenticationErrors(t *testing.T) {
	tests := []struct {
		name, method, path, target, signFor string
		wantStatus                          int
		wantCode                            string
	}{
		{"sagemaker unsigned", "POST", "/", "SageMaker.DescribeCluster", "", 403, "MissingAuthenticationTokenException"},
		{"eks unsigned", "GET", "/clusters/ml-eks", "", "", 403, "MissingAuthenticationTokenException"},
		{"sagemaker signed for eks", "POST", "/", "SageMaker.DescribeCluster", "eks", 403, "InvalidSignatureException"},
		{"eks signed for sagemaker", "GET", "/clusters/ml-eks", "", "sagemaker", 403, "InvalidSignatureException"},
		{"unknown target", "POST", "/", "SageMaker.LaunchRockets", "sagemaker", 400, "UnknownOperationException"},
		{"unknown path", "GET", "/rockets", "", "eks", 404, "UnknownOperationException"},
		{"signed sagemaker", "POST", "/", "SageMaker.DescribeCluster", "sagemaker", 200, ""},
		{"signed eks", "GET", "/clusters/ml-eks", "", "eks", 200, ""},
	}
	srv := New(Options{})
	defer srv.Close()
	seedAll(t, srv)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.target != "" {
				body = `{"ClusterName":"ml-hp"}`
			}
			resp, doc := rawRequest(t, srv, tt.method, tt.path, tt.target, body, tt.signFor)
			if resp.Header.Get("x-amzn-RequestId") == "" {
				t.Errorf("no x-amzn-RequestId")
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (%v)", resp.StatusCode, tt.wantStatus, doc)
			}
			if tt.wantCode == "" {
				return
			}
			code := doc["__type"]
			if tt.target == "" {
				code = resp.Header.Get("x-amzn-ErrorType")
			}
			if code != tt.wantCode {
				t.Errorf("code %q, want %s (%v)", code, tt.wantCode, doc)
			}
		})
	}
}

func TestSignatureVerification(t *testing.T) {
	srv := New(Options{SecretKeys: map[string]string{"AKIDFAKEAWS": "right-secret"}})
	defer srv.Close()
	seedAll(t, srv)
	tests := []struct {
		name     string
		secret   string
		wantCode string
	}{
		{"right secret", "right-secret", ""},
		{"wrong secret", "wrong-secret", "InvalidSignatureException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := awsConfig(srv, "us-west-2", tt.secret)
			sm, ek := sagemaker.NewFromConfig(cfg), eks.NewFromConfig(cfg)
			_, err := sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
			if apiCode(err) != tt.wantCode {
				t.Errorf("SageMaker POST: err = %v, want %q", err, tt.wantCode)
			}
			_, err = ek.ListNodegroups(ctxT(t), &eks.ListNodegroupsInput{ClusterName: aws.String("ml-eks"), MaxResults: aws.Int32(5)})
			if apiCode(err) != tt.wantCode {
				t.Errorf("EKS GET with query: err = %v, want %q", err, tt.wantCode)
			}
			_, err = ek.UpdateNodegroupConfig(ctxT(t), &eks.UpdateNodegroupConfigInput{
				ClusterName: aws.String("ml-eks"), NodegroupName: aws.String("system"),
				ScalingConfig: &ekstypes.NodegroupScalingConfig{MaxSize: aws.Int32(5)}})
			if apiCode(err) != tt.wantCode {
				t.Errorf("EKS POST: err = %v, want %q", err, tt.wantCode)
			}
		})
	}
	t.Run("unknown access key", func(t *testing.T) {
		resp, doc := rawRequest(t, srv, "POST", "/", "SageMaker.DescribeCluster", `{"ClusterName":"ml-hp"}`, "sagemaker")
		if resp.StatusCode != 403 || doc["__type"] != "UnrecognizedClientException" {
			t.Errorf("status %d, body %v", resp.StatusCode, doc)
		}
	})
}
