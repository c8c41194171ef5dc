package handlers

import (
	"sync/atomic"

	"github.com/hyperops/hyperops/ops/redact"
)

// outsideRedactor redacts every outside string before it is escaped for mrkdwn: once escaped, a secret holding &, <
// or > (or a configured pattern that expects them) no longer matches, so the Slack client's last pass would miss it.
var outsideRedactor atomic.Pointer[redact.Redactor]

// SetRedactor sets the redactor outside text passes through before it is escaped (nil: credential shapes only).
// The process has one configuration, so the redactor is the package's; the bot sets it when it starts.
func SetRedactor(r *redact.Redactor) { outsideRedactor.Store(r) }

// redactOutside removes secrets from outside text that is about to be rendered.
func redactOutside(s string) string { return outsideRedactor.Load().Redact(s) }
