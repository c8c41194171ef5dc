package fakeaws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const sigV4Algorithm = "AWS4-HMAC-SHA256"

// sigV4 is the parsed Authorization header of a SigV4-signed request.
type sigV4 struct {
	accessKey     string
	date          string
	region        string
	service       string
	signedHeaders []string
	signature     string
}

// authenticate checks the request's SigV4 Authorization header the way AWS's front end does and returns the
// region from its credential scope. service is the signing name the endpoint expects.
func (s *Server) authenticate(r *http.Request, body []byte, service string) (string, *apiError) {
	header := r.Header.Get("Authorization")
	if header == "" {
		return "", errorf(http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	sig, aerr := parseSigV4(header)
	if aerr != nil {
		return "", aerr
	}
	if r.Header.Get("X-Amz-Date") == "" && r.Header.Get("Date") == "" {
		return "", errorf(http.StatusForbidden, "IncompleteSignatureException",
			"Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. Authorization=%s", header)
	}
	if sig.service != service {
		return "", errorf(http.StatusForbidden, "InvalidSignatureException",
			"Credential should be scoped to correct service: '%s'. ", service)
	}
	if s.opts.SecretKeys != nil {
		if aerr := s.verifySignature(r, body, sig); aerr != nil {
			return "", aerr
		}
	}
	return sig.region, nil
}

func parseSigV4(header string) (sigV4, *apiError) {
	incomplete := func(missing string) (sigV4, *apiError) {
		return sigV4{}, errorf(http.StatusForbidden, "IncompleteSignatureException",
			"Authorization header requires '%s' parameter. Authorization=%s", missing, header)
	}
	algorithm, rest, _ := strings.Cut(header, " ")
	if algorithm != sigV4Algorithm {
		return sigV4{}, errorf(http.StatusForbidden, "IncompleteSignatureException",
			"Authorization header requires '%s' algorithm. Authorization=%s", sigV4Algorithm, header)
	}
	params := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			params[k] = v
		}
	}
	for _, name := range []string{"Credential", "SignedHeaders", "Signature"} {
		if params[name] == "" {
			return incomplete(name)
		}
	}
	scope := strings.Split(params["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return sigV4{}, errorf(http.StatusForbidden, "IncompleteSignatureException",
			"Credential should have 5 slash-separated parts ending in aws4_request: %s", params["Credential"])
	}
	return sigV4{
		accessKey:     scope[0],
		date:          scope[1],
		region:        scope[2],
		service:       scope[3],
		signedHeaders: strings.Split(params["SignedHeaders"], ";"),
		signature:     params["Signature"],
	}, nil
}

// verifySignature re-signs the request with the caller's secret key and the headers it claims to have signed,
// and compares signatures.
func (s *Server) verifySignature(r *http.Request, body []byte, sig sigV4) *apiError {
	secret, ok := s.opts.SecretKeys[sig.accessKey]
	if !ok {
		return errorf(http.StatusForbidden, "UnrecognizedClientException",
			"The security token included in the request is invalid.")
	}
	mismatch := errorf(http.StatusForbidden, "InvalidSignatureException",
		"The request signature we calculated does not match the signature you provided. "+
			"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	signingTime, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return mismatch
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	replay, err := http.NewRequestWithContext(context.Background(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return mismatch
	}
	replay.Host = r.Host
	replay.ContentLength = 0
	replay.Header = http.Header{}
	for _, name := range sig.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			replay.ContentLength = r.ContentLength
		default:
			replay.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	hash := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: sig.accessKey, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, replay, hex.EncodeToString(hash[:]),
		sig.service, sig.region, signingTime); err != nil {
		return mismatch
	}
	want, aerr := parseSigV4(replay.Header.Get("Authorization"))
	if aerr != nil || want.signature != sig.signature {
		return mismatch
	}
	return nil
}

// readBody reads a request body, capped like AWS's front end caps JSON requests.
func readBody(r *http.Request) ([]byte, *apiError) {
	const maxBody = 10 << 20
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "SerializationException", "read request body: %v", err)
	}
	if len(body) > maxBody {
		return nil, errorf(http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException", "Request is too large")
	}
	return body, nil
}
