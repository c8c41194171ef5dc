package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops/redact"
	"github.com/rs/zerolog"
)

func TestLoggerRedactsSecrets(t *testing.T) {
	const (
		appToken = "xapp-1-A0123-4567-abcdef"
		botToken = "xoxb-1111-2222-abcdefghij"
		redisPW  = "s3cr\"et-pw"
	)
	tests := []struct {
		name string
		log  func(l zerolog.Logger)
		leak string
	}{
		{"config value in a field", func(l zerolog.Logger) { l.Info().Str("token", botToken).Msg("connecting") }, botToken},
		{"token inside an error", func(l zerolog.Logger) {
			l.Error().Err(errors.New("socket mode: invalid_auth for " + appToken)).Msg("connect failed")
		}, appToken},
		{"unknown token shape in a message", func(l zerolog.Logger) { l.Warn().Msg("got xoxp-9999-8888-zzzz from a payload") }, "xoxp-9999-8888-zzzz"},
		{"redis password with JSON escaping", func(l zerolog.Logger) { l.Info().Str("url", "redis://:"+redisPW+"@r:6379").Msg("redis") }, `s3cr\"et-pw`},
		{"aws access key id", func(l zerolog.Logger) { l.Info().Msg("creds AKIAABCDEFGHIJKLMNOP used") }, "AKIAABCDEFGHIJKLMNOP"},
		{"a configured pattern", func(l zerolog.Logger) { l.Info().Msg("license=ZX81SPECTRUM loaded") }, "ZX81SPECTRUM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			r, err := redact.New([]string{appToken, botToken, redisPW}, []string{`license=(?P<secret>\w+)`}, 0)
			if err != nil {
				t.Fatal(err)
			}
			l := zerolog.New(newRedactingWriter(&buf, r))
			tt.log(l)
			out := buf.String()
			if strings.Contains(out, tt.leak) {
				t.Fatalf("secret %q leaked into the log: %s", tt.leak, out)
			}
			if !strings.Contains(out, redacted) {
				t.Fatalf("no %s marker in %s", redacted, out)
			}
		})
	}
}

func TestRedactionKeepsOrdinaryText(t *testing.T) {
	var buf bytes.Buffer
	r, err := redact.New([]string{"", "ab"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := zerolog.New(newRedactingWriter(&buf, r))
	l.Info().Str("cluster", "ml-prod-eks").Msg("about to scale")
	if got := buf.String(); !strings.Contains(got, "ml-prod-eks") || !strings.Contains(got, "about to scale") || strings.Contains(got, redacted) {
		t.Fatalf("ordinary text changed: %s", got)
	}
}
