package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
)

// tokenPattern matches Slack tokens and AWS access key ids wherever they appear (config values, error messages from
// libraries, URLs), so they are redacted even when config does not know them.
var tokenPattern = regexp.MustCompile(`\b(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|(?:AKIA|ASIA)[A-Z0-9]{16})\b`)

// redacted is what a secret is replaced with in the log.
const redacted = "[REDACTED]"

// redactingWriter replaces known secrets and anything shaped like a token before a log line is written.
type redactingWriter struct {
	mu      sync.Mutex
	out     io.Writer
	secrets [][]byte
}

func newRedactingWriter(out io.Writer, secrets []string) *redactingWriter {
	w := &redactingWriter{out: out}
	for _, s := range secrets {
		if len(s) < 4 { // shorter values would redact ordinary words
			continue
		}
		w.secrets = append(w.secrets, []byte(s))
		// In a JSON log line the secret appears escaped.
		if q, err := json.Marshal(s); err == nil && !bytes.Equal(q[1:len(q)-1], []byte(s)) {
			w.secrets = append(w.secrets, q[1:len(q)-1])
		}
	}
	return w
}

// Write redacts p and writes it whole; it reports len(p) so zerolog does not see a short write.
func (w *redactingWriter) Write(p []byte) (int, error) {
	line := p
	for _, s := range w.secrets {
		line = bytes.ReplaceAll(line, s, []byte(redacted))
	}
	line = tokenPattern.ReplaceAll(line, []byte(redacted))
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.out.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// newLogger builds the process logger from config: JSON by default, human-readable on a terminal (format auto) or
// when asked, with every secret redacted.
func newLogger(out *os.File, lc config.Log, secrets []string) zerolog.Logger {
	level, err := zerolog.ParseLevel(lc.Level)
	if err != nil || lc.Level == "" {
		level = zerolog.InfoLevel
	}
	var w io.Writer = out
	console := lc.Format == "console" || (lc.Format == "auto" && isatty.IsTerminal(out.Fd()))
	if console {
		w = zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(newRedactingWriter(w, secrets)).Level(level).With().Timestamp().Logger()
}
