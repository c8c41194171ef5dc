package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// Redacted is what a secret is replaced with.
const Redacted = "[REDACTED]"

// credentialShapes match credentials wherever they appear (a log line, an event, an API error), so they are removed
// even when config does not know them. A group named secret is what is replaced; without one, the whole match.
var credentialShapes = []*regexp.Regexp{
	// Slack tokens: bot, user, app-level, configuration and workflow tokens.
	regexp.MustCompile(`\b(?:xox[abposre]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+)\b`),
	// AWS access key ids, and secret keys or session tokens written next to their name.
	regexp.MustCompile(`\b(?:AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16}\b`),
	regexp.MustCompile(`(?i)\b(?:aws_?secret_?access_?key|secret_?access_?key|aws_?session_?token)["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+=]{16,})`),
	// Authorization headers and bearer tokens.
	regexp.MustCompile(`(?i)(?:\bauthorization["']?\s*[:=]\s*["']?(?:bearer|basic|token)?|\bbearer)\s*(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)`),
	// The password of a URL (redis://user:password@host, HTTPS://user:password@host: schemes are case-insensitive).
	regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@`),
	// JSON Web Tokens (Kubernetes service account tokens among them).
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`),
	// PEM private keys; a key whose BEGIN line fell outside the text (a log window) from the start to its END line.
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`),
	regexp.MustCompile(`\A[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
	// GitHub tokens.
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}\b`),
}

// Redactor removes secrets from text that leaves HyperOps: log lines, and cluster or AWS text posted to Slack (log
// tails, events, API error messages). It removes the configured secrets (Slack tokens, the Redis password),
// anything shaped like a credential, and the operator's patterns (config redact.patterns); Text and Tail also cap
// the size. The zero value is not usable; a nil *Redactor removes credential shapes only.
type Redactor struct {
	secrets  []string
	patterns []*regexp.Regexp
	maxChars int
}

// New builds a redactor from secrets (values shorter than 4 characters are ignored: they would redact
// ordinary words), RE2 patterns and the size cap of Text and Tail (0 means config.DefaultRedactMaxChars).
func New(secrets, patterns []string, maxChars int) (*Redactor, error) {
	r := &Redactor{patterns: append([]*regexp.Regexp{}, credentialShapes...), maxChars: maxChars}
	if r.maxChars <= 0 {
		r.maxChars = config.DefaultRedactMaxChars
	}
	for _, s := range secrets {
		if len(s) < 4 {
			continue
		}
		r.secrets = append(r.secrets, s)
		// In JSON (a log line, a fenced reply) the secret appears escaped.
		if q, err := json.Marshal(s); err == nil && string(q[1:len(q)-1]) != s {
			r.secrets = append(r.secrets, string(q[1:len(q)-1]))
		}
		// In Slack mrkdwn text that escaped it before this redactor saw it (the Slack client's last pass).
		if m := mrkdwnEscaped.Replace(s); m != s {
			r.secrets = append(r.secrets, m)
		}
	}
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("redact.patterns[%d]: %w", i, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("redact.patterns[%d] matches the empty string", i)
		}
		r.patterns = append(r.patterns, re)
	}
	return r, nil
}

// mrkdwnEscaped escapes like Slack mrkdwn does: &, < and >.
var mrkdwnEscaped = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// For builds the redactor of a configuration: its secrets and its redact section.
func For(cfg *config.Config) (*Redactor, error) {
	return New(cfg.Secrets(), cfg.Redact.Patterns, cfg.Redact.MaxChars)
}

var shapesOnly = &Redactor{patterns: credentialShapes, maxChars: config.DefaultRedactMaxChars}

// Credentials removes credential shapes from text and caps it at the default size, where no configured
// redactor is at hand (the error messages of an API server or of AWS, as they are wrapped); the configured one
// runs again before anything reaches Slack.
func Credentials(s string) string { return shapesOnly.Text(s) }

// Redact returns s with every secret, credential shape and configured pattern replaced by [REDACTED].
func (r *Redactor) Redact(s string) string {
	if r == nil {
		r = shapesOnly
	}
	s = r.plain(s)
	return replaceSecret(base64Run, s, r.hidesSecret)
}

// plain removes the secrets, credential shapes and patterns that appear as they are.
func (r *Redactor) plain(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, Redacted)
	}
	for _, re := range r.patterns {
		s = replaceSecret(re, s, nil)
	}
	return s
}

// base64Run is a run of base64 (standard or URL alphabet) long enough to hold a credential: a Kubernetes Secret's
// data, a basic-auth header, a token encoded once more by a tool.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/_-]{16,}={0,2}`)

// hidesSecret reports whether a base64 run decodes to text holding a secret or a credential shape.
func (r *Redactor) hidesSecret(run string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(run); err == nil {
			text := string(b)
			return r.plain(text) != text
		}
	}
	return false
}

// replaceSecret replaces each match of re in s, or only its group named secret when the pattern has one; with keep
// set, only the matches it reports.
func replaceSecret(re *regexp.Regexp, s string, keep func(string) bool) string {
	g := re.SubexpIndex("secret")
	matches := re.FindAllStringSubmatchIndex(s, -1)
	if len(matches) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		start, end := m[0], m[1]
		if g > 0 && m[2*g] >= 0 {
			start, end = m[2*g], m[2*g+1]
		}
		if start < last || start == end || (keep != nil && !keep(s[start:end])) {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// Text redacts cluster or AWS text (an event, an error message) and keeps its beginning, at most the cap.
func (r *Redactor) Text(s string) string {
	s = r.Redact(s)
	runes := []rune(s)
	if max := r.limit(); len(runes) > max {
		cut := len(runes) - max
		return string(runes[:max]) + fmt.Sprintf(" … (%d more characters)", cut)
	}
	return s
}

// Tail redacts a log tail and keeps its end, at most the cap: the last lines are the ones that tell why.
func (r *Redactor) Tail(s string) string {
	s = r.Redact(s)
	runes := []rune(s)
	if max := r.limit(); len(runes) > max {
		cut := len(runes) - max
		return fmt.Sprintf("… (%d characters before)\n", cut) + string(runes[cut:])
	}
	return s
}

func (r *Redactor) limit() int {
	if r == nil || r.maxChars <= 0 {
		return config.DefaultRedactMaxChars
	}
	return r.maxChars
}

// Error returns a copy of a user-facing error with its message and next step redacted; an Errors list is redacted
// problem by problem. Anything else is returned as an *Error whose message is redacted.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	if es, ok := err.(ops.Errors); ok {
		out := make(ops.Errors, len(es))
		for i, e := range es {
			out[i] = r.oneError(e)
		}
		return out
	}
	return r.oneError(ops.AsError(err))
}

func (r *Redactor) oneError(e *ops.Error) *ops.Error {
	c := *e
	c.Message, c.Next = r.Text(e.Message), r.Text(e.Next)
	return &c
}
