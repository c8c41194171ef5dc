package bot

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/hyperops/hyperops/handlers"
	"github.com/hyperops/hyperops/handlers/agentapi"
	hmcp "github.com/hyperops/hyperops/handlers/mcp"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// The inventory of the product's interactive paths (issue 31), and what the end-to-end tests of this package drove
// through the running bot.
//
// The inventory is derived from the code, never listed by hand: the action ids are the exported Action* constants of
// package handlers and the modals' callback ids its exported *Callback constants (go/ast over its source, which
// also refuses a button or a modal whose id is a bare string literal, so nothing escapes the constants); the Home
// buttons are the action ids the Home's own rendering functions put on a button (home*.go and every function they
// call, with the choices they offer mapped through choiceActions); the slash subcommands are the grammar built
// from the service's catalog (every spec the bot registers, and the built-ins: help, requests, request …, report,
// watch, unwatch, budget, grants …); the MCP tools are what a real MCP server over that catalog lists to an agent
// allowed everything; the DM operations are the agent contract's: every catalog operation and get-request.
//
// "Driven" is recorded, not guessed from the source: every harness adds, when its test ends, what its fake Slack
// delivered over the Socket Mode connection and the bot acknowledged (the action id of each click, on a message or
// in Home, a menu's choice counting as the action it chose; the callback id of each modal submitted; the slash
// subcommand of each command; the operation of each agent DM), and what each replica's MCP server answered (its
// per-tool call counter). TestEveryInteractivePathIsDriven runs after every other test of the package (it is the
// only parallel one) and fails listing each path no test drove.

// pathKind is a kind of interactive path.
type pathKind string

const (
	kindAction pathKind = "action" // an action_id clicked anywhere (a menu's choice counts as the action chosen)
	kindHome   pathKind = "home"   // an action_id clicked in the App Home tab
	kindView   pathKind = "view"   // a modal's callback_id submitted
	kindSlash  pathKind = "slash"  // a slash subcommand, "<topic> [verb]"
	kindMCP    pathKind = "mcp"    // an MCP tool called
	kindDM     pathKind = "dm"     // an operation an agent asked in a DM
)

var pathKinds = []pathKind{kindAction, kindHome, kindView, kindSlash, kindMCP, kindDM}

// path is one interactive path.
type path struct {
	kind pathKind
	name string
}

func (p path) String() string { return string(p.kind) + " " + p.name }

// notDrivenYet are the paths no end-to-end test through the running bot can drive yet, each with why. Keep it short
// and honest: an entry that is driven after all, or that is no path any more, fails the inventory test.
var notDrivenYet = map[path]string{}

// driven is what the tests of this package delivered to a running bot and it acknowledged or answered.
var driven = &drivenPaths{seen: map[path]int{}}

type drivenPaths struct {
	mu   sync.Mutex
	seen map[path]int
}

func (d *drivenPaths) add(p path) {
	d.mu.Lock()
	d.seen[p]++
	d.mu.Unlock()
}

func (d *drivenPaths) has(p path) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[p] > 0
}

// productGrammar is the slash grammar of the service's catalog, to name the subcommand a delivered command runs.
var productGrammar = handlers.NewGrammar("/hp", realSpecs.Specs())

// fromSlack records the paths of every envelope the fake Slack delivered and a bot acknowledged.
func (d *drivenPaths) fromSlack(s fakeslack.Snapshot) {
	for _, del := range s.Deliveries {
		if !del.Acked || del.Failed {
			continue
		}
		for _, p := range deliveredPaths(del.Type, del.Payload) {
			d.add(p)
		}
	}
}

// deliveredPaths reads the paths one envelope drives.
func deliveredPaths(typ string, payload json.RawMessage) []path {
	switch typ {
	case "slash_commands":
		var cmd struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(payload, &cmd) != nil {
			return nil
		}
		if c, ok := slashCommandOf(cmd.Text); ok {
			return []path{{kindSlash, c}}
		}
	case "interactive":
		var cb struct {
			Type      string `json:"type"`
			Container struct {
				Type string `json:"type"`
			} `json:"container"`
			Actions []struct {
				ActionID string `json:"action_id"`
				Selected struct {
					Value string `json:"value"`
				} `json:"selected_option"`
			} `json:"actions"`
			View struct {
				CallbackID string `json:"callback_id"`
			} `json:"view"`
		}
		if json.Unmarshal(payload, &cb) != nil {
			return nil
		}
		if cb.Type == "view_submission" {
			return []path{{kindView, cb.View.CallbackID}}
		}
		var out []path
		for _, a := range cb.Actions {
			ids := []string{a.ActionID}
			if a.ActionID == handlers.ActionMore {
				chosen, _, _ := strings.Cut(a.Selected.Value, ":")
				ids = append(ids, chosen)
			}
			for _, id := range ids {
				out = append(out, path{kindAction, id})
				if cb.Container.Type == "view" {
					out = append(out, path{kindHome, id})
				}
			}
		}
		return out
	case "events_api":
		var ev struct {
			Event struct {
				Type        string `json:"type"`
				ChannelType string `json:"channel_type"`
				User        string `json:"user"`
				Text        string `json:"text"`
			} `json:"event"`
		}
		if json.Unmarshal(payload, &ev) != nil || ev.Event.Type != "message" || ev.Event.ChannelType != "im" || ev.Event.User != userAgent {
			return nil
		}
		raw, ok := handlers.ExtractJSON(ev.Event.Text)
		var req struct {
			Operation string `json:"operation"`
		}
		if ok && json.Unmarshal(raw, &req) == nil && req.Operation != "" {
			return []path{{kindDM, req.Operation}}
		}
	}
	return nil
}

// slashCommandOf names the subcommand of the product's grammar a command's text runs: "help", "<topic>" or
// "<topic> <verb>"; false for a topic the product does not have (the tests' own operations).
func slashCommandOf(text string) (string, bool) {
	words, err := ops.SplitWords(strings.TrimSpace(text))
	if err != nil {
		return "", false
	}
	if len(words) == 0 || words[0] == "help" || len(words) > 1 && words[1] == "help" {
		return "help", true
	}
	cmds := productGrammar.Commands(words[0])
	if len(words) > 1 {
		for _, c := range cmds {
			if c.Verb != "" && c.Verb == words[1] {
				return commandName(c), true
			}
		}
	}
	for _, c := range cmds {
		if c.Verb == "" {
			return commandName(c), true
		}
	}
	return "", false
}

func commandName(c handlers.Command) string { return strings.TrimSpace(c.Topic + " " + c.Verb) }

// fromMCP records the tools a replica's MCP server answered, from its per-tool call counter.
func (d *drivenPaths) fromMCP(m *Metrics) {
	out, err := testutil.CollectAndFormat(m.MCPCalls, expfmt.TypeTextPlain, "hyperops_mcp_calls_total")
	if err != nil {
		return
	}
	tool := regexp.MustCompile(`tool="([^"]+)"`)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if m := tool.FindStringSubmatch(line); m != nil && !strings.HasSuffix(line, " 0") {
			d.add(path{kindMCP, m[1]})
		}
	}
}

// TestEveryInteractivePathIsDriven: every interactive path the product offers — each action_id, each Home button,
// each modal's callback_id, each slash subcommand, each MCP tool and each agent DM operation, derived from the code
// (102 when written: 14 action ids, 9 Home buttons, 4 modals, 31 slash subcommands, 24 MCP tools, 20 DM operations;
// the count is logged) — is driven by at least one end-to-end test of this package through the running bot:
// delivered by the fake Slack over the Socket Mode connection and acknowledged, or called over MCP and answered. It
// runs after every other test (it is the only parallel one) and fails listing the paths no test drove;
// notDrivenYet lists, with the reason, what cannot be driven yet (nothing today). A run of only some of the
// package's tests cannot tell, so it derives the inventory, checks it, and skips the judgement.
func TestEveryInteractivePathIsDriven(t *testing.T) {
	inv := interactivePaths(t)
	byKind := map[pathKind]int{}
	for _, p := range inv {
		byKind[p.kind]++
	}
	var counts []string
	for _, k := range pathKinds {
		if byKind[k] == 0 {
			t.Errorf("the inventory found no %s path: its derivation is broken", k)
		}
		counts = append(counts, fmt.Sprintf("%d %s", byKind[k], k))
	}
	t.Logf("%d interactive paths: %s", len(inv), strings.Join(counts, ", "))
	for _, k := range pathKinds {
		var names []string
		for _, p := range inv {
			if p.kind == k {
				names = append(names, p.name)
			}
		}
		t.Logf("%s: %s", k, strings.Join(names, ", "))
	}
	for p := range notDrivenYet {
		if !slices.Contains(inv, p) {
			t.Errorf("notDrivenYet lists %s, which is no interactive path of the product", p)
		}
	}
	tests := packageTests(t)
	if others := parallelTests(t); len(others) > 0 {
		t.Fatalf("%s call t.Parallel: this test must run after every other test to see what they drove", strings.Join(others, ", "))
	}
	if partial := unselected(tests); partial != "" {
		t.Skipf("judged on a run of the whole package only (%s): run go test ./bot", partial)
	}
	t.Parallel() // resumes once every other test of the package, and its cleanups, are done

	var missing, stale []string
	for _, p := range inv {
		why, allowed := notDrivenYet[p]
		switch {
		case driven.has(p) && allowed:
			stale = append(stale, fmt.Sprintf("%s (listed as: %s)", p, why))
		case !driven.has(p) && !allowed:
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d interactive paths are driven by no end-to-end test through the running bot (bot/*_test.go: "+
			"a click, a modal's submit, a slash command, a DM over the fake Slack's socket; a call over MCP):\n\t%s",
			len(missing), len(inv), strings.Join(missing, "\n\t"))
	}
	if len(stale) > 0 {
		t.Errorf("driven now, so remove them from notDrivenYet:\n\t%s", strings.Join(stale, "\n\t"))
	}
	t.Logf("%d of %d paths driven, %d allowed undriven", len(inv)-len(missing)-len(notDrivenYet)+len(stale), len(inv), len(notDrivenYet)-len(stale))
}

// interactivePaths derives the inventory from the code.
func interactivePaths(t *testing.T) []path {
	t.Helper()
	src := parseHandlers(t)
	var out []path
	for _, v := range src.actions {
		out = append(out, path{kindAction, v})
	}
	for _, v := range src.homeButtons(t) {
		out = append(out, path{kindHome, v})
	}
	for _, v := range src.callbacks {
		out = append(out, path{kindView, v})
	}
	for _, topic := range productGrammar.Topics() {
		for _, c := range productGrammar.Commands(topic) {
			out = append(out, path{kindSlash, commandName(c)})
		}
	}
	for _, tool := range mcpTools(t) {
		out = append(out, path{kindMCP, tool})
	}
	for _, op := range append(realSpecs.Names(), agentapi.GetRequest) {
		out = append(out, path{kindDM, op})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return slices.Compact(out)
}

// handlersSource is what the inventory reads from package handlers' source.
type handlersSource struct {
	fset  *token.FileSet
	files map[string]*ast.File
	// actions and callbacks are the values of the exported Action* and *Callback constants, by name.
	actions, callbacks map[string]string
	funcs              map[string]*ast.FuncDecl // package-level functions and methods, by name
}

func parseHandlers(t *testing.T) *handlersSource {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("..", "handlers", "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("read package handlers' source: %v (%d files)", err, len(names))
	}
	src := &handlersSource{fset: token.NewFileSet(), files: map[string]*ast.File{}, actions: map[string]string{},
		callbacks: map[string]string{}, funcs: map[string]*ast.FuncDecl{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(src.fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		src.files[filepath.Base(name)] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				src.funcs[d.Name.Name] = d
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i >= len(vs.Values) || !n.IsExported() {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, _ := strconv.Unquote(lit.Value)
						switch {
						case strings.HasPrefix(n.Name, "Action"):
							src.actions[n.Name] = v
						case strings.HasSuffix(n.Name, "Callback"):
							src.callbacks[n.Name] = v
						}
					}
				}
			}
		}
	}
	// Every button, menu and modal names its id with one of those constants (or a variable holding one): a bare
	// literal would be a path the inventory cannot see.
	for name, f := range src.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if fn := selectorName(n.Fun); (fn == "slack.NewButtonBlockElement" || fn == "slack.NewOverflowBlockElement") && len(n.Args) > 0 {
					if _, lit := n.Args[0].(*ast.BasicLit); lit {
						t.Errorf("%s:%d: %s with a literal action id: name it with an exported Action* constant", name, src.fset.Position(n.Pos()).Line, fn)
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && (k.Name == "CallbackID" || k.Name == "ActionID") {
					if _, lit := n.Value.(*ast.BasicLit); lit {
						t.Errorf("%s:%d: a literal %s: name it with an exported constant", name, src.fset.Position(n.Pos()).Line, k.Name)
					}
				}
			}
			return true
		})
	}
	return src
}

func selectorName(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		if x, ok := s.X.(*ast.Ident); ok {
			return x.Name + "." + s.Sel.Name
		}
	}
	return ""
}

// homeButtons are the action ids the Home puts on a button: in the functions of home*.go and every package
// function they call, the Action* constant a button or menu is made with, and the choices passed to homeActions
// (the request buttons a Home section offers) mapped to their action ids through choiceActions.
func (src *handlersSource) homeButtons(t *testing.T) []string {
	t.Helper()
	choices := src.choiceActions(t)
	var queue []*ast.FuncDecl
	seen := map[*ast.FuncDecl]bool{}
	for name, f := range src.files {
		if !strings.HasPrefix(name, "home") {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				queue = append(queue, fd)
				seen[fd] = true
			}
		}
	}
	found := map[string]bool{}
	for len(queue) > 0 {
		fd := queue[0]
		queue = queue[1:]
		ast.Inspect(fd, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok {
				if callee := src.funcs[id.Name]; callee != nil && callee.Recv == nil && !seen[callee] {
					seen[callee] = true
					queue = append(queue, callee)
				}
				if id.Name == "homeActions" && len(call.Args) == 2 {
					if lit, ok := call.Args[1].(*ast.CompositeLit); ok {
						for _, el := range lit.Elts {
							c := selectorName(el)
							if choices[c] == "" {
								t.Errorf("homeActions offers %s, which choiceActions does not map", c)
							}
							found[choices[c]] = true
						}
					}
				}
			}
			if fn := selectorName(call.Fun); (fn == "slack.NewButtonBlockElement" || fn == "slack.NewOverflowBlockElement") && len(call.Args) > 0 {
				if id, ok := call.Args[0].(*ast.Ident); ok && src.actions[id.Name] != "" {
					found[src.actions[id.Name]] = true
				}
			}
			return true
		})
	}
	out := slices.Sorted(func(yield func(string) bool) {
		for k := range found {
			if k != "" && !yield(k) {
				return
			}
		}
	})
	if len(out) == 0 {
		t.Error("found no button in the Home's rendering")
	}
	return out
}

// choiceActions reads render.go's choiceActions: "ops.ChoiceX" → the action id of its button.
func (src *handlersSource) choiceActions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range src.files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "choiceActions" || len(vs.Values) != 1 {
				return true
			}
			lit, _ := vs.Values[0].(*ast.CompositeLit)
			if lit == nil {
				return false
			}
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if id, ok := kv.Value.(*ast.Ident); ok {
					out[selectorName(kv.Key)] = src.actions[id.Name]
				}
			}
			return false
		})
	}
	if len(out) == 0 {
		t.Fatal("found no choiceActions in package handlers")
	}
	return out
}

// mcpTools are the tools a real MCP server over the service's catalog lists to an agent allowed every operation.
func mcpTools(t *testing.T) []string {
	t.Helper()
	token := "inventory-token-0123456789"
	srv := hmcp.New(hmcp.Options{Catalog: realSpecs,
		Agents: []hmcp.Agent{hmcp.NewAgent(ops.Initiator{Kind: ops.Agent, ID: "inventory", Name: "inventory"}, []string{"*"}, sha256.Sum256([]byte(token)))}})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "inventory", Version: "v0"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL + hmcp.Path, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, hs.Client().Transport}}}, nil) // closed with hs
	if err != nil {
		t.Fatalf("connect to the inventory's MCP server: %v", err)
	}
	defer func() { _ = s.Close() }()
	var out []string
	for tool, err := range s.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("list the MCP tools: %v", err)
		}
		out = append(out, tool.Name)
	}
	return out
}

// packageTests are the Test functions of this package, from its source.
func packageTests(t *testing.T) []string {
	t.Helper()
	var out []string
	eachTestFunc(t, func(fd *ast.FuncDecl) { out = append(out, fd.Name.Name) })
	return out
}

// parallelTests are the tests of this package, other than this one, that call t.Parallel.
func parallelTests(t *testing.T) []string {
	t.Helper()
	var out []string
	eachTestFunc(t, func(fd *ast.FuncDecl) {
		if fd.Name.Name == "TestEveryInteractivePathIsDriven" {
			return
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if s, ok := call.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Parallel" {
					out = append(out, fd.Name.Name)
					return false
				}
			}
			return true
		})
	})
	return slices.Compact(out)
}

func eachTestFunc(t *testing.T, fn func(*ast.FuncDecl)) {
	t.Helper()
	names, err := filepath.Glob("*_test.go")
	if err != nil || len(names) == 0 {
		t.Fatalf("read this package's tests: %v", err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") && fd.Name.Name != "TestMain" {
				fn(fd)
			}
		}
	}
}

// unselected says why this run does not run every test of the package ("" when it does): -run or -skip leaves
// some out.
func unselected(tests []string) string {
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
		return "-skip " + f.Value.String()
	}
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return ""
	}
	run := f.Value.String()
	re, err := regexp.Compile(strings.Split(run, "/")[0])
	if err != nil || strings.Contains(run, "/") {
		return "-run " + run
	}
	left := 0
	for _, name := range tests {
		if !re.MatchString(name) {
			left++
		}
	}
	if left > 0 {
		return fmt.Sprintf("-run %s leaves out %d of %d tests", run, left, len(tests))
	}
	return ""
}
