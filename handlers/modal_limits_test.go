package handlers

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// maxViewLabel is Slack's limit on a modal's title, submit and close: views.open answers invalid_arguments "must be
// less than 25 characters [/view/title/text]" past it (the fake Slack's maxViewTitle is the same).
const maxViewLabel = 24

// modalRenderers are the functions that render a modal the product opens (every function in handlers that returns
// a slack.ModalViewRequest must be here: TestEveryModalIsChecked), each rendering every variant it has.
var modalRenderers = map[string]func(t *testing.T) []slack.ModalViewRequest{
	"DenyModal": func(*testing.T) []slack.ModalViewRequest {
		return []slack.ModalViewRequest{DenyModal(testCatalog(), sampleRecord(ops.PhaseAwaitingApproval), `{"id":"req-1"}`)}
	},
	"DetailsModal": func(*testing.T) []slack.ModalViewRequest {
		var out []slack.ModalViewRequest
		for _, p := range []ops.Phase{ops.PhaseAwaitingApproval, ops.PhaseSucceeded, ops.PhaseFailed} {
			out = append(out, DetailsModal(testCatalog(), sampleRecord(p)))
		}
		return out
	},
	"ConfirmModal": func(t *testing.T) []slack.ModalViewRequest {
		// Every operation's typed-name confirmation: its title and submit come from its spec.
		var out []slack.ModalViewRequest
		for _, s := range append(opSpecs.Specs(), testCatalog().Specs()...) {
			if s.Confirm == nil {
				continue
			}
			rec := sampleRecord(ops.PhaseAwaitingApproval)
			rec.Request.Operation = s.Name
			out = append(out, ConfirmModal(rec, *s.Confirm, `{"id":"req-1"}`))
		}
		if len(out) == 0 {
			t.Fatal("no operation asks for a typed confirmation: the confirm modal was not rendered")
		}
		return out
	},
	"BreakGlassModal": func(*testing.T) []slack.ModalViewRequest {
		return []slack.ModalViewRequest{BreakGlassModal(testCatalog(), glassRecord(false), `{"id":"req-1"}`)}
	},
	"GrantModal": func(*testing.T) []slack.ModalViewRequest {
		waiting := tellingRecord(ops.PhaseAwaitingApproval)
		waiting.Approval.Required, waiting.Approval.Votes = 1, nil
		unsized := tellingRecord(ops.PhaseAwaitingApproval)
		unsized.Plan.Changes = nil
		return []slack.ModalViewRequest{GrantModal(testCatalog(), waiting, `{"id":"req-1"}`), GrantModal(testCatalog(), unsized, `{"id":"req-1"}`)}
	},
}

// Every modal the product opens fits Slack's limits: a title, submit and close of at most 24 characters (issue 31:
// the grant form's "Approve and allow similar" had 25, and Slack refused to open it), and the rest of what
// views.open checks (the fake Slack's own validator: plain_text labels, block kit, private metadata).
func TestEveryModalWithinSlackLimits(t *testing.T) {
	for name, render := range modalRenderers {
		for i, v := range render(t) {
			for field, text := range map[string]*slack.TextBlockObject{"title": v.Title, "submit": v.Submit, "close": v.Close} {
				if text == nil {
					if field == "title" {
						t.Errorf("%s #%d has no title", name, i)
					}
					continue
				}
				if n := utf8.RuneCountInString(text.Text); n > maxViewLabel || n == 0 {
					t.Errorf("%s #%d: the %s %q is %d characters; Slack takes 1 to %d", name, i, field, text.Text, n, maxViewLabel)
				}
				if text.Type != slack.PlainTextType {
					t.Errorf("%s #%d: the %s is %s; Slack takes plain_text only", name, i, field, text.Type)
				}
			}
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if err := fakeslack.CheckView(raw); err != nil {
				t.Errorf("%s #%d: views.open would refuse it: %v", name, i, err)
			}
		}
	}
}

// Every function of handlers that renders a modal is in modalRenderers, and every modal is built in one of them,
// so a new modal cannot skip TestEveryModalWithinSlackLimits.
func TestEveryModalIsChecked(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			renders := fn.Type.Results != nil && slices.ContainsFunc(fn.Type.Results.List, func(r *ast.Field) bool { return isModalType(r.Type) })
			if renders {
				found = append(found, fn.Name.Name)
				if _, ok := modalRenderers[fn.Name.Name]; !ok {
					t.Errorf("%s (%s) renders a modal that TestEveryModalWithinSlackLimits does not check: add it to modalRenderers", fn.Name.Name, f)
				}
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if lit, ok := n.(*ast.CompositeLit); ok && isModalType(lit.Type) {
					t.Errorf("%s (%s) builds a modal inline: render it in a function of its own, checked in modalRenderers", fn.Name.Name, fset.Position(lit.Pos()))
				}
				return true
			})
		}
	}
	for name := range modalRenderers {
		if !slices.Contains(found, name) {
			t.Errorf("modalRenderers lists %s, which handlers no longer has", name)
		}
	}
}

func isModalType(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "slack" && sel.Sel.Name == "ModalViewRequest"
}
