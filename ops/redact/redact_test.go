package redact

import (
	"errors"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

func TestRedactorRemovesSecrets(t *testing.T) {
	r, err := New([]string{"hunter2-redis", "s3cr\"et", "p&ss<w>rd-42"}, []string{`(?i)password\s*=\s*(?P<secret>\S+)`, `ACME-[0-9]{6}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"configured secret", "connecting with hunter2-redis now", "connecting with [REDACTED] now"},
		{"secret escaped in JSON", `{"msg":"s3cr\"et"}`, `{"msg":"[REDACTED]"}`},
		{"secret with & < >", "auth p&ss<w>rd-42 refused", "auth [REDACTED] refused"},
		{"secret with & < > escaped for mrkdwn", "auth p&amp;ss&lt;w&gt;rd-42 refused", "auth [REDACTED] refused"},
		{"slack bot token", "token xoxb-123-456-abcdef leaked", "token [REDACTED] leaked"},
		{"slack app token", "xapp-1-A0-123-abc", "[REDACTED]"},
		{"AWS access key id", "key AKIAIOSFODNN7EXAMPLE used", "key [REDACTED] used"},
		{"AWS secret key by name", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=[REDACTED]"},
		{"bearer token", "Authorization: Bearer abcdefgh12345678", "Authorization: Bearer [REDACTED]"},
		{"URL password", "dial redis://app:p4ss@redis:6379/0 failed", "dial redis://app:[REDACTED]@redis:6379/0 failed"},
		{"JWT", "token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlMTIz end", "token [REDACTED] end"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nnext", "[REDACTED]\nnext"},
		{"configured pattern, group only", "db password = swordfish ok", "db password = [REDACTED] ok"},
		{"configured pattern, whole match", "ticket ACME-123456 opened", "ticket [REDACTED] opened"},
		{"private key whose BEGIN is outside the window", "Pe8sQ2xv\nMIIEabc\n-----END RSA PRIVATE KEY-----\nnext", "[REDACTED]\nnext"},
		{"private key, an END left after a whole one", "tail\n-----END PRIVATE KEY-----\nok -----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----", "[REDACTED]\nok [REDACTED]"},
		{"upper-case URL scheme", "GET HTTPS://admin:pw123@api:6443/x", "GET HTTPS://admin:[REDACTED]@api:6443/x"},
		{"mixed-case URL scheme", "Redis://app:pw123@redis:6379", "Redis://app:[REDACTED]@redis:6379"},
		{"base64 of a slack token", "data: {token: eG94Yi0xMjMtNDU2LWFiY2RlZg==}", "data: {token: [REDACTED]}"},
		{"base64 of an AWS credentials file", "credentials: W2RlZmF1bHRdCmF3c19hY2Nlc3Nfa2V5X2lkID0gQUtJQUlPU0ZPRE5ON0VYQU1QTEUKYXdzX3NlY3JldF9hY2Nlc3Nfa2V5ID0gd0phbHJYVXRuRkVNSS9LN01ERU5HL2JQeFJmaUNZRVhBTVBMRUtFWQo= end", "credentials: [REDACTED] end"},
		{"unpadded URL base64 of a configured secret", "env cmVkaXM6Ly9hcHA6aHVudGVyMi1yZWRpc0ByZWRpczo2Mzc5", "env [REDACTED]"},
		{"base64 of ordinary text is left alone", "config: cmVwbGljYXM6IDMgaW1hZ2U6IHNjb3Jlcjp2Mw==", "config: cmVwbGljYXM6IDMgaW1hZ2U6IHNjb3Jlcjp2Mw=="},
		{"ordinary text is left alone", "epoch 3 loss 0.12 basic configuration http://host:8080/p@x", "epoch 3 loss 0.12 basic configuration http://host:8080/p@x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Fatalf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactorCapsSize(t *testing.T) {
	r, err := New(nil, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	log := strings.Repeat("line\n", 1000) + "the error that matters"
	tail := r.Tail(log)
	if !strings.HasSuffix(tail, "the error that matters") || !strings.HasPrefix(tail, "… (4022 characters before)\n") {
		t.Fatalf("tail = %.60q…%q", tail, tail[len(tail)-30:])
	}
	if n := len([]rune(tail)); n > 1000+40 {
		t.Fatalf("tail is %d characters", n)
	}
	text := r.Text(strings.Repeat("é", 5000))
	if !strings.HasSuffix(text, " … (4000 more characters)") || len([]rune(text)) != 1000+len([]rune(" … (4000 more characters)")) {
		t.Fatalf("text ends %q", text[len(text)-40:])
	}
}

func TestRedactorRefusesBadPatterns(t *testing.T) {
	for _, p := range []string{`(?<=x)`, `a*`} {
		if _, err := New(nil, []string{p}, 0); err == nil {
			t.Errorf("pattern %q accepted", p)
		}
	}
}

func TestRedactorRedactsErrors(t *testing.T) {
	var r *Redactor // credential shapes only
	err := ops.Errors{ops.Errorf(ops.CodeClusterUnavailable, "", "retry", "could not read: token xoxb-1-2-3 refused")}
	got := r.Error(err)
	var es ops.Errors
	if !errors.As(got, &es) || es[0].Message != "could not read: token [REDACTED] refused" || es[0].Code != ops.CodeClusterUnavailable {
		t.Fatalf("got %v", got)
	}
	if err[0].Message == es[0].Message {
		t.Fatal("the original error was changed")
	}
}

func TestRedactCredentialsWithoutConfig(t *testing.T) {
	got := Credentials("dial tcp: Get https://admin:hunter2@api:6443/x with token xoxb-9-9-zz " + strings.Repeat("x", 30000))
	if strings.Contains(got, "hunter2") || strings.Contains(got, "xoxb-9-9-zz") || len([]rune(got)) > 20100 {
		t.Fatalf("got %.120q (%d characters)", got, len([]rune(got)))
	}
}
