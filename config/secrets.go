package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Secrets returns the secret values in the configuration (Slack tokens, the Redis password, both as written and
// percent-decoded), for log redaction. Empty values are left out.
func (c *Config) Secrets() []string {
	var out []string
	candidates := []string{c.Slack.AppToken, c.Slack.BotToken, c.Redis.Password, c.Redis.Sentinel.Password}
	candidates = append(candidates, redisPasswords(c.Redis.URL)...)
	for _, s := range candidates {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// redisPasswords returns the passwords of a Redis URL — its userinfo's, and a Sentinel URL's sentinel_password —
// as written and decoded. It reads the URL by hand rather than with url.Parse so that it still finds the password
// of a URL that does not parse.
func redisPasswords(raw string) []string {
	var out []string
	if _, pw, ok := strings.Cut(urlUserinfo(raw), ":"); ok && pw != "" {
		// A lone user part is a user name, not a secret (go-redis reads it that way too).
		out = append(out, pw)
		if decoded, err := url.PathUnescape(pw); err == nil && decoded != pw {
			out = append(out, decoded)
		}
	}
	if _, query, ok := strings.Cut(raw, "?"); ok {
		query, _, _ = strings.Cut(query, "#")
		for _, kv := range strings.Split(query, "&") {
			if pw, ok := strings.CutPrefix(kv, "sentinel_password="); ok && pw != "" {
				out = append(out, pw)
				if decoded, err := url.QueryUnescape(pw); err == nil && decoded != pw {
					out = append(out, decoded)
				}
			}
		}
	}
	return out
}

// urlUserinfo returns the "user:password" part of scheme://user:password@host/…, or "".
func urlUserinfo(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	return rest[:at]
}

// ErrSlackTokens is wrapped by every error CheckSlackTokens returns.
var ErrSlackTokens = errors.New("slack tokens")

const howToGetTokens = `How to get them:
  1. At https://api.slack.com/apps choose "Create New App" → "From an app manifest", pick the workspace, and paste
     deploy/slack-app-manifest.yaml.
  2. Under "Socket Mode", enable Socket Mode.
  3. Under "Basic Information" → "App-Level Tokens", generate a token with the connections:write scope:
     that is SLACK_APP_TOKEN (it starts with xapp-).
  4. Under "Install App", install the app to the workspace and copy the "Bot User OAuth Token":
     that is SLACK_BOT_TOKEN (it starts with xoxb-).
  5. export SLACK_APP_TOKEN=xapp-… SLACK_BOT_TOKEN=xoxb-…   and start hyperops again.
No Slack workspace, AWS account or cluster yet? Try HyperOps in a browser first: make playground (hyperops playground).`

// CheckSlackTokens checks that both Slack tokens are present and of the right kind; run calls it before connecting.
// The error says how to obtain a missing token, and which token has the wrong prefix; it never contains a token.
func (c *Config) CheckSlackTokens() error {
	var missing, wrong []string
	for _, t := range []struct {
		key, env, prefix, kind, value string
	}{
		{"slack.appToken", "SLACK_APP_TOKEN", "xapp-", "an app-level token (Socket Mode)", c.Slack.AppToken},
		{"slack.botToken", "SLACK_BOT_TOKEN", "xoxb-", "a bot token", c.Slack.BotToken},
	} {
		switch {
		case t.value == "":
			missing = append(missing, fmt.Sprintf("%s (${%s})", t.key, t.env))
		case strings.TrimSpace(t.value) != t.value:
			wrong = append(wrong, fmt.Sprintf("%s (${%s}) has leading or trailing white space; copy the token again", t.key, t.env))
		case !strings.HasPrefix(t.value, t.prefix):
			wrong = append(wrong, fmt.Sprintf("%s (${%s}) must be %s starting with %s, but %s%s",
				t.key, t.env, t.kind, t.prefix, tokenStart(t.value), swapHint(t.value, t.prefix)))
		}
	}
	var msgs []string
	if len(missing) > 0 {
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		msgs = append(msgs, fmt.Sprintf("Slack tokens are missing: %s %s empty.\n%s", strings.Join(missing, " and "), verb, howToGetTokens))
	}
	msgs = append(msgs, wrong...)
	if len(msgs) == 0 {
		return nil
	}
	return &slackTokenError{msg: strings.Join(msgs, "\n")}
}

// slackTokenError carries CheckSlackTokens' message as is and matches ErrSlackTokens for errors.Is.
type slackTokenError struct{ msg string }

func (e *slackTokenError) Error() string        { return e.msg }
func (e *slackTokenError) Is(target error) bool { return target == ErrSlackTokens }

// tokenStart describes how a token starts ("it starts with \"xoxb-\"") without any of the secret after the prefix.
func tokenStart(token string) string {
	if i := strings.IndexByte(token, '-'); i > 0 && i <= 4 && strings.HasPrefix(token, "x") {
		return fmt.Sprintf("it starts with %q", token[:i+1])
	}
	return "it does not look like a Slack token"
}

func swapHint(value, want string) string {
	switch {
	case want == "xapp-" && strings.HasPrefix(value, "xoxb-"), want == "xoxb-" && strings.HasPrefix(value, "xapp-"):
		return "; SLACK_APP_TOKEN and SLACK_BOT_TOKEN look swapped"
	case want == "xoxb-" && strings.HasPrefix(value, "xoxp-"):
		return "; that is a user token: use the Bot User OAuth Token from \"Install App\""
	}
	return ""
}
