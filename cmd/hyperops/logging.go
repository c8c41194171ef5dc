package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops/redact"
)

// redacted is what a secret is replaced with in the log.
const redacted = redact.Redacted

// redactingWriter passes every log line through the redactor HyperOps uses for all text that leaves it (the
// configured secrets, credential shapes such as Slack tokens and AWS keys, and redact.patterns).
type redactingWriter struct {
	mu  sync.Mutex
	out io.Writer
	r   *redact.Redactor
}

func newRedactingWriter(out io.Writer, r *redact.Redactor) *redactingWriter {
	return &redactingWriter{out: out, r: r}
}

// Write redacts p and writes it whole; it reports len(p) so zerolog does not see a short write.
func (w *redactingWriter) Write(p []byte) (int, error) {
	line := w.r.Redact(string(p))
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := io.WriteString(w.out, line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// newLogger builds the process logger from config: JSON by default, human-readable on a terminal (format auto) or
// when asked, with every secret redacted.
func newLogger(out *os.File, lc config.Log, r *redact.Redactor) zerolog.Logger {
	level, err := zerolog.ParseLevel(lc.Level)
	if err != nil || lc.Level == "" {
		level = zerolog.InfoLevel
	}
	var w io.Writer = out
	console := lc.Format == "console" || (lc.Format == "auto" && isatty.IsTerminal(out.Fd()))
	if console {
		w = zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(newRedactingWriter(w, r)).Level(level).With().Timestamp().Logger()
}
