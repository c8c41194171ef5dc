package playground

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeslack"
)

// startPlayground starts a playground on the local control plane (binaries from `make e2e-tools`, or
// $HYPEROPS_E2E_BIN) and stops it when the test ends.
func startPlayground(t *testing.T) *Playground {
	t.Helper()
	return startPlaygroundWith(t, Options{})
}

// startPlaygroundWith is startPlayground with options.
func startPlaygroundWith(t *testing.T, opts Options) *Playground {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start the playground: %v", err)
	}
	t.Cleanup(func() {
		if err := pg.Close(); err != nil {
			t.Errorf("close the playground: %v", err)
		}
	})
	return pg
}

func loopbackURL(t *testing.T, what, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s %q: %v", what, raw, err)
	}
	ip := net.ParseIP(u.Hostname())
	if u.Scheme != "http" || ip == nil || !ip.IsLoopback() {
		t.Errorf("%s is %q, want an http URL on the loopback interface (a local fake)", what, raw)
	}
}

// TestNothingReachesRealServices checks that every endpoint the bot is configured with is a local fake, that
// prices come from the built-in table (no Pricing API), and that the bot's Slack and AWS traffic arrives at the
// fakes: a status request reads the fake AWS, and the bot's token check went to the fake Slack.
func TestNothingReachesRealServices(t *testing.T) {
	pg := startPlayground(t)
	cfg := pg.Config
	loopbackURL(t, "slack.apiURL", cfg.Slack.APIURL)
	loopbackURL(t, "aws.endpoints.sagemaker", cfg.AWS.Endpoints.SageMaker)
	loopbackURL(t, "aws.endpoints.eks", cfg.AWS.Endpoints.EKS)
	loopbackURL(t, "aws.endpoints.pricing", cfg.AWS.Endpoints.Pricing)
	if cfg.Pricing.Source != config.PricingBuiltin {
		t.Errorf("pricing.source = %q, want builtin (no call to the AWS Pricing API)", cfg.Pricing.Source)
	}
	if cfg.Redis.URL != "" {
		t.Errorf("redis.url = %q, want the embedded Redis", cfg.Redis.URL)
	}
	if !strings.HasPrefix(cfg.Slack.BotToken, "xoxb-fake") || !strings.HasPrefix(cfg.Slack.AppToken, "xapp-1-fake") {
		t.Errorf("the bot's tokens are not the fake Slack's")
	}
	if n := len(pg.Slack.APICalls("auth.test")); n == 0 {
		t.Errorf("the fake Slack saw no auth.test: the bot's token check went elsewhere")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := pg.AWS.Calls("SageMaker.DescribeCluster")
	if a := pg.send(ctx, request{As: "engineer", Channel: OpsChannel, Text: "/hp capacity show"}); !a.OK {
		t.Fatalf("/hp capacity show: %s", a.Error)
	}
	if _, err := pg.Slack.WaitFor(ctx, func(s fakeslack.Snapshot) bool { return pg.AWS.Calls("SageMaker.DescribeCluster") > before }); err != nil {
		t.Fatalf("/hp capacity show never read the fake AWS's DescribeCluster: %v", err)
	}
}

// TestPageRefusesOtherOrigins: the page answers only requests addressed to the loopback host, and actions only as
// JSON, so neither a rebinding DNS name nor another site's form can act as one of its people.
func TestPageRefusesOtherOrigins(t *testing.T) {
	h := guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, tc := range []struct {
		host string
		want int
	}{{"127.0.0.1:8090", http.StatusTeapot}, {"localhost:8090", http.StatusTeapot}, {"evil.example:8090", http.StatusForbidden}, {"10.0.0.5", http.StatusForbidden}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = tc.host
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Host %s: status %d, want %d", tc.host, rec.Code, tc.want)
		}
		if tc.want == http.StatusTeapot && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("Host %s: no content security policy keeping the page to itself", tc.host)
		}
	}
	act := jsonAction(func(context.Context, request) answer { return answer{OK: true} })
	rec := httptest.NewRecorder()
	act(rec, httptest.NewRequest(http.MethodPost, "/api/click", strings.NewReader("as=lead1")))
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("a form post: status %d, want 415", rec.Code)
	}
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "192.168.1.4:8090"} {
		if ln, _, err := Listen(addr); err == nil {
			ln.Close()
			t.Errorf("Listen(%q) succeeded, want a refusal (loopback only)", addr)
		}
	}
}
