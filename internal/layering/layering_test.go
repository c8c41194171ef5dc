package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hyperops/hyperops"

// names are the outside libraries a package comment may forbid, by the name the docs give them, with the import
// path prefixes each stands for. A module package is named in backquotes (`ops/state`) and stands for itself only:
// `handlers` forbids the Slack surface, not handlers/agentapi beside it.
var names = map[string][]string{
	"Slack":       {"github.com/slack-go/slack"},
	"Redis":       {"github.com/redis/go-redis"},
	"client-go":   {"k8s.io/client-go"},
	"the AWS SDK": {"github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go"},
	"the MCP SDK": {"github.com/modelcontextprotocol/go-sdk"},
	"chromedp":    {"github.com/chromedp"},
}

// ruled are the packages whose comment must say what they never import: the layers of the architecture (see
// docs/architecture.md). Test kits, fakes and the binary wire everything together and are free.
var ruled = []string{
	"ops", "ops/grants", "ops/pricing", "ops/redact", "ops/audit", "ops/progress", "ops/readings", "ops/fleet", "ops/engine", "ops/kube", "ops/aws", "ops/state", "ops/report", "ops/report/collect",
	"approvals", "handlers", "handlers/agentapi", "handlers/mcp", "bot", "bot/schedule", "config", "config/endpoint",
}

var neverImports = regexp.MustCompile(`(?i)it never imports ([^.]+)\.`)

// TestPackagesImportWhatTheirDocAllows links each package's "It never imports …" sentence to what go list says it
// links (its non-test dependencies, transitively), so `go list -deps ./handlers/...` can never show go-redis again
// without this failing.
func TestPackagesImportWhatTheirDocAllows(t *testing.T) {
	pkgs := list(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		rel := rel(p.ImportPath)
		if !slices.Contains(ruled, rel) {
			continue
		}
		seen[rel] = true
		m := neverImports.FindStringSubmatch(strings.Join(strings.Fields(p.Doc), " "))
		if m == nil {
			t.Errorf("%s: its package comment does not say what it never imports (\"It never imports Slack, Redis or `ops/state`.\")", rel)
			continue
		}
		forbidden, err := prefixes(m[1])
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		for _, dep := range p.Deps {
			for _, f := range forbidden {
				if dep == f || !strings.HasPrefix(f, module) && strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s links %s, which its package comment forbids (%q)", rel, dep, m[0])
				}
			}
		}
	}
	for _, r := range ruled {
		if !seen[r] {
			t.Errorf("%s: no such package; keep the list of ruled packages in step with the tree", r)
		}
	}
}

// TestTheRuleCanFail checks the parse of a sentence: a rule that named nothing would pass every package.
func TestTheRuleCanFail(t *testing.T) {
	got, err := prefixes("Slack, Redis, client-go or `ops/state`")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"github.com/slack-go/slack", "github.com/redis/go-redis", "k8s.io/client-go", module + "/ops/state"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("prefixes = %v, want %v", got, want)
	}
	if _, err := prefixes("Slack or Postgres"); err == nil {
		t.Error("an unknown name was accepted: a typo in a package comment would forbid nothing")
	}
}

// prefixes reads "A, B, `c/d` or E" into the import path prefixes the names stand for.
func prefixes(list string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(strings.ReplaceAll(list, " or ", ", "), ",") {
		name := strings.TrimSpace(part)
		if pkg, ok := strings.CutPrefix(name, "`"); ok {
			out = append(out, module+"/"+strings.TrimSuffix(pkg, "`"))
			continue
		}
		ps, ok := names[name]
		if !ok {
			return nil, errors.New("unknown name " + `"` + name + `"` + " in \"It never imports …\": use one of Slack, Redis, client-go, the AWS SDK, the MCP SDK, chromedp, or a module package in backquotes")
		}
		out = append(out, ps...)
	}
	return out, nil
}

type pkg struct {
	ImportPath string
	Dir        string
	Deps       []string
	// Doc is the package comment, read from the package's files.
	Doc string
}

// list runs go list over the module's packages, with what each links, and reads the comment of the ruled ones.
func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,Deps", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if slices.Contains(ruled, rel(p.ImportPath)) {
			p.Doc = comment(t, p.Dir)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// comment returns the package comment of the Go files in dir (tests left out).
func comment(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		if file.Doc != nil {
			doc = append(doc, file.Doc.Text())
		}
	}
	return strings.Join(doc, "\n")
}

// rel is a module package's path inside the module ("" for the root).
func rel(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
}
