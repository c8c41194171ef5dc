package handlers

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/ops"
)

// TestNoOperationNamedOutsideOps keeps what one operation says with that operation: no non-test file under
// handlers (the MCP server included) names an operation of the catalog, in code or in a comment.
func TestNoOperationNamedOutsideOps(t *testing.T) {
	names := opSpecs.Names()
	if len(names) < 10 {
		t.Fatalf("the catalog has %d operations: %v", len(names), names)
	}
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, n := range names {
				if strings.Contains(line, n) {
					t.Errorf("handlers/%s:%d names the operation %s: say it on its ops.Spec instead", path, i+1, n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("read %d files under handlers, want all of them (the mcp server's too)", files)
	}
}

// TestCatalogSaysEveryChange checks that every change the catalog can make says, in its own file, what it does
// and what reverting it would mean.
func TestCatalogSaysEveryChange(t *testing.T) {
	for _, s := range opSpecs.Specs() {
		if s.ReadOnly() {
			if s.Revert != "" || s.Destructive || s.Confirm != nil {
				t.Errorf("%s changes nothing but says revert %q, destructive %v, confirm %v", s.Name, s.Revert, s.Destructive, s.Confirm)
			}
			continue
		}
		if s.Headline == nil || s.Revert == "" {
			t.Errorf("%s changes things but has headline %v and revert %q", s.Name, s.Headline, s.Revert)
		}
		if c := s.Confirm; c != nil && (c.Param == "" || c.Label == "" || c.Title == "" || c.Submit == "" || c.Warning == nil || !s.Destructive) {
			t.Errorf("%s asks for a typed name but says %+v (destructive %v)", s.Name, *c, s.Destructive)
		}
	}
}

// restartWidget is an operation the catalog does not have, defined as a new one would be: its spec alone says
// how it reads, and nothing in handlers changes for it.
var restartWidget = ops.Spec{Name: "restart-widget", Topic: "widget", Verb: "restart", Summary: "Restart a widget", Mutates: true,
	Params:      []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "widget"}, {Name: "pods", Kind: ops.KindInt, Help: "pods"}},
	Headline:    ops.MustTemplate(`Restart the widget {{.Name}} on {{.Target}} — {{.Plural (.Int "pods" 1) "pod" "pods"}} {{.Strong "go down"}}`),
	Destructive: true, Revert: "nothing to revert: a restarted widget is the same widget",
	Confirm: &ops.Confirmation{Param: "name", Label: "widget name", Title: "Restart widget", Submit: "Restart",
		Warning: ops.MustTemplate(`restarts the widget {{.Name}} in {{.Target}}`)}}

func TestNewOperationRendersFromItsSpec(t *testing.T) {
	cat := ops.NewCatalog()
	cat.Register(fakeOp{restartWidget})
	rec := &ops.Record{Request: ops.Request{ID: "req-w1", Operation: "restart-widget", Target: ops.Target{Cluster: "c1", Namespace: "ml"},
		Params: ops.Params{"name": "w`1", "pods": int64(3)}, Initiator: ops.Initiator{Kind: ops.Human, ID: "U0ALICE"}},
		Phase: ops.PhaseAwaitingApproval, Version: 2, Owner: ops.Initiator{Kind: ops.Human, ID: "U0ALICE"},
		Plan: &ops.Plan{Hash: "abc123", Risk: ops.Risk{Level: ops.RiskCritical}}, Approval: ops.Approval{Required: 1, PlanHash: "abc123"}}

	m := PlanMessage(cat, rec).Msg
	head := blockText(m.Blocks[0])
	if want := "Restart the widget `wˋ1` on `c1/ml` — 3 pods *go down*"; !strings.Contains(head, want) {
		t.Errorf("headline = %q, want it to contain %q (values as code spans, escaped)", head, want)
	}
	if !strings.Contains(m.Text, "Restart the widget w") || strings.Contains(m.Text, "`") {
		t.Errorf("notification text = %q, want the headline without markup", m.Text)
	}
	b := findButton(m, ActionApprove)
	if b == nil || b.Confirm != nil {
		t.Fatalf("Approve = %+v, want a button whose confirmation is the typed-name modal, not Slack's dialog", b)
	}
	if got := Actionable(rec); strings.Join(got, " ") != "hp_approve hp_deny hp_cancel" {
		t.Errorf("choices = %v", got)
	}

	spec, _ := cat.Spec(rec.Request.Operation)
	v := ConfirmModal(rec, *spec.Confirm, `{"id":"req-w1","claim":"w`+"`"+`1"}`)
	if v.Title.Text != "Restart widget" || v.Submit.Text != "Restart" {
		t.Errorf("modal labels = %q %q", v.Title.Text, v.Submit.Text)
	}
	warning := v.Blocks.BlockSet[0].(*slack.SectionBlock).Text.Text
	if want := ":rotating_light: Approving request `req-w1` restarts the widget `wˋ1` in `c1/ml`."; warning != want {
		t.Errorf("warning = %q, want %q", warning, want)
	}
	cb := slack.InteractionCallback{Type: slack.InteractionTypeViewSubmission}
	cb.View.CallbackID, cb.View.PrivateMetadata = v.CallbackID, v.PrivateMetadata
	cb.View.State = &slack.ViewState{Values: map[string]map[string]slack.BlockAction{confirmBlock: {confirmAction: {Value: "w1"}}}}
	if ValidateSubmission(cb) == nil {
		t.Error("a submission with the wrong name was accepted")
	}
	cb.View.State.Values[confirmBlock][confirmAction] = slack.BlockAction{Value: "w`1"}
	if r := ValidateSubmission(cb); r != nil {
		t.Errorf("the exact name was refused: %+v", r)
	}
	if got := blockText(DetailsModal(cat, rec).Blocks.BlockSet[0]); !strings.Contains(got, "Restart the widget") {
		t.Errorf("details headline = %q", got)
	}
}
