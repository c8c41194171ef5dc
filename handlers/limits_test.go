package handlers

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// slackAccepts fails the test unless Slack would take m: the fake Slack's checks of chat.postMessage.
func slackAccepts(t testing.TB, m Msg) {
	t.Helper()
	if err := checkSlack(m); err != nil {
		t.Fatalf("Slack would refuse the message: %v", err)
	}
}

func checkSlack(m Msg) error {
	var blocks, meta []byte
	if len(m.Blocks) > 0 {
		var err error
		if blocks, err = json.Marshal(m.Blocks); err != nil {
			return fmt.Errorf("marshal blocks: %w", err)
		}
	}
	if m.Metadata != nil {
		var err error
		if meta, err = json.Marshal(m.Metadata); err != nil {
			return fmt.Errorf("marshal metadata: %w", err)
		}
	}
	return fakeslack.CheckMessage(m.Text, blocks, meta)
}

// 10,000 unknown words make a short refusal Slack takes: the first 20 problems and a count of the rest.
func TestRefusalOfTenThousandWordsFitsSlack(t *testing.T) {
	g := NewGrammar("/hp", testSpecs())
	words := make([]string, 10000)
	for i := range words {
		words[i] = fmt.Sprintf("colour%d=%s", i, strings.Repeat("r", 150))
	}
	_, err := g.Parse("train submit name=a image=b " + strings.Join(words, " "))
	if err == nil {
		t.Fatal("want a refusal")
	}
	m := ErrorMessage(err)
	slackAccepts(t, m)
	if !strings.Contains(m.Text, "…and 9980 more problems") {
		t.Fatalf("the refusal does not count the rest: %.500s", m.Text)
	}
	// What people see is the block: as many problems as fit in a section, then the count of all the others.
	shown, _ := json.Marshal(m.Blocks)
	if !regexp.MustCompile(`…and 99[0-9]{2} more problems`).Match(shown) || strings.Contains(string(shown), " …\"") {
		t.Fatalf("the block does not end with the count of the rest: …%s", shown[max(0, len(shown)-300):])
	}
	if n := len(m.Text); n > 20000 {
		t.Fatalf("the refusal is %d bytes", n)
	}
}

func TestAgentReplyToTenThousandUnknownFieldsFitsSlack(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"operation":"submit-training-job","controls":{"requestId":"` + strings.Repeat("r", 5000) + `"},"workload":{"name":"j"`)
	for i := range 10000 {
		fmt.Fprintf(&b, `,"f%05d%s":1`, i, strings.Repeat("x", 300))
	}
	b.WriteString(`}}`)
	_, err := agentapi.Decode([]byte(b.String()), testCatalog())
	body := agentapi.NewBody(nil, strings.Repeat("r", 5000), err)
	m := AgentReply(body)
	slackAccepts(t, m)
	if len(body.Errors) != ops.MaxErrors+1 || body.Errors[ops.MaxErrors].Message != "…and 9980 more problems" || body.Errors[ops.MaxErrors].Omitted != 9980 {
		t.Fatalf("errors = %d, last %+v", len(body.Errors), body.Errors[len(body.Errors)-1])
	}
	// The machine-readable body is still whole JSON the agent can parse, in the text and as metadata.
	start := strings.Index(m.Text, "```json\n")
	end := strings.LastIndex(m.Text, "\n```")
	var back agentapi.Body
	if start < 0 || end < start || json.Unmarshal([]byte(m.Text[start+8:end]), &back) != nil || len(back.Errors) != ops.MaxErrors+1 {
		t.Fatalf("the reply's JSON block does not parse")
	}
}

// Problems whose own text is huge (a value repeated back by a check somewhere) are clipped, not lost.
func TestErrorMessageClipsHugeProblems(t *testing.T) {
	huge := strings.Repeat("v", 100000)
	errs := ops.Errors{ops.Errorf(ops.CodeInvalidArgument, "image", "use an allowed image", "image %q is not allowed", huge)}
	m := ErrorMessage(errs)
	slackAccepts(t, m)
	if !strings.Contains(m.Text, "E_INVALID_ARGUMENT image") {
		t.Fatalf("text = %.200s", m.Text)
	}
	rec := &ops.Record{Request: ops.Request{ID: "r1", Operation: "submit-training-job"}, Phase: ops.PhaseRejected, Errors: errs,
		Result: &ops.Result{Summary: huge, Output: huge, Data: json.RawMessage(`{"log":"` + huge + `"}`)}}
	slackAccepts(t, AgentReply(agentapi.NewBody(rec, "r1", nil)))
	slackAccepts(t, PlanMessage(opSpecs, rec).Msg)
	slackAccepts(t, ResultMessage(opSpecs, rec).Msg)
}
