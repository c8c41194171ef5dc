package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCheckSlackTokens(t *testing.T) {
	const (
		app = "xapp-1-A0123-456-abcdef"
		bot = "xoxb-123-456-secretpart"
	)
	tests := []struct {
		name     string
		app, bot string
		want     []string // substrings of the error; none means no error
	}{
		{"both set", app, bot, nil},
		{"both missing", "", "", []string{
			"slack.appToken (${SLACK_APP_TOKEN}) and slack.botToken (${SLACK_BOT_TOKEN}) are empty",
			"https://api.slack.com/apps", "deploy/slack-app-manifest.yaml", "enable Socket Mode",
			"connections:write", "SLACK_APP_TOKEN (it starts with xapp-)", "install the app to the workspace",
			"SLACK_BOT_TOKEN (it starts with xoxb-)", "export SLACK_APP_TOKEN=xapp-… SLACK_BOT_TOKEN=xoxb-…"}},
		{"bot missing", app, "", []string{"Slack tokens are missing: slack.botToken (${SLACK_BOT_TOKEN}) is empty", "Install App"}},
		{"swapped", bot, app, []string{
			`slack.appToken (${SLACK_APP_TOKEN}) must be an app-level token (Socket Mode) starting with xapp-, but it starts with "xoxb-"; SLACK_APP_TOKEN and SLACK_BOT_TOKEN look swapped`,
			`slack.botToken (${SLACK_BOT_TOKEN}) must be a bot token starting with xoxb-, but it starts with "xapp-"`}},
		{"user token as bot token", app, "xoxp-1-2-3", []string{`it starts with "xoxp-"; that is a user token`}},
		{"not a token", app, "hunter2", []string{"slack.botToken", "it does not look like a Slack token"}},
		{"pasted with a newline", app, bot + " ", []string{"slack.botToken (${SLACK_BOT_TOKEN}) has leading or trailing white space"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Slack: Slack{AppToken: tt.app, BotToken: tt.bot}}
			err := c.CheckSlackTokens()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckSlackTokens() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrSlackTokens) {
				t.Fatalf("CheckSlackTokens() = %v, want an error wrapping ErrSlackTokens", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			for _, secret := range []string{"A0123-456-abcdef", "secretpart", "hunter2"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows a token: %v", err)
				}
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"none", Config{}, nil},
		{"tokens", Config{Slack: Slack{AppToken: "xapp-1", BotToken: "xoxb-2"}}, []string{"xapp-1", "xoxb-2"}},
		{"redis password", Config{Redis: Redis{URL: "redis://:s3cret@redis:6379/0"}}, []string{"s3cret"}},
		{"redis user and password", Config{Redis: Redis{URL: "rediss://app:s3cret@redis:6380"}}, []string{"s3cret"}},
		{"escaped password", Config{Redis: Redis{URL: "redis://:p%40ss@redis:6379"}}, []string{"p%40ss", "p@ss"}},
		{"redis user only", Config{Redis: Redis{URL: "redis://app@redis:6379"}}, nil},
		{"redis without auth", Config{Redis: Redis{URL: "redis://redis:6379"}}, nil},
		{"sentinel URL passwords", Config{Redis: Redis{URL: "redis-sentinel://:s3cret@s1,s2/m?sentinel_password=p%26w&x=1"}},
			[]string{"s3cret", "p%26w", "p&w"}},
		{"sentinel and cluster fields", Config{Redis: Redis{Password: "data", Sentinel: RedisSentinel{Password: "sent"}}},
			[]string{"data", "sent"}},
		{"unparseable URL still redacted", Config{Redis: Redis{URL: "redis://:s3cret@redis:port"}}, []string{"s3cret"}},
	}
	for _, tt := range tests {
		if got := tt.cfg.Secrets(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Secrets() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestSecretsFromEnvironment(t *testing.T) {
	t.Setenv("SLACK_APP_TOKEN", "xapp-1-from-env")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-2-from-env")
	cfg, err := Parse(Example, "example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckSlackTokens(); err != nil {
		t.Errorf("CheckSlackTokens() = %v", err)
	}
	if got := cfg.Secrets(); !slices.Equal(got, []string{"xapp-1-from-env", "xoxb-2-from-env"}) {
		t.Errorf("Secrets() = %q", got)
	}
}
