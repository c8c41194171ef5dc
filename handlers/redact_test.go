package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/redact"
)

// Outside text is redacted before it is escaped for mrkdwn: a configured pattern written for the raw text (here
// one that expects < and >) still matches, which the Slack client's pass over the escaped text could not.
func TestOutsideTextIsRedactedBeforeEscaping(t *testing.T) {
	r, err := redact.New(nil, []string{`license<(?P<secret>\w+)>`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	SetRedactor(r)
	t.Cleanup(func() { SetRedactor(nil) })
	leak := "AWS said: license<GPL3ABC> & HTTPS://u:pw-Z9@h/x"
	m := ErrorMessage(ops.Errorf(ops.CodeAWSError, "", "retry", "%s", leak))
	raw, _ := json.Marshal(m)
	for _, secret := range []string{"GPL3ABC", "pw-Z9"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("%q is in the rendered error: %s", secret, raw)
		}
	}
	if !strings.Contains(string(raw), "license\\u0026lt;[REDACTED]\\u0026gt;") {
		t.Errorf("want the rest escaped as before, got %s", raw)
	}
}
