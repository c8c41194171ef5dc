package approvals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
)

// docStep is one step of docs/scopes.md's worked example: the scope it sets, the scope validate-config shows for it,
// and the requests of its table.
type docStep struct {
	title, scopeLine, summary string
	requests                  []docRequest
}

// docRequest is one row of a step's table: what the agent sends and what the doc says it gets.
type docRequest struct {
	row                  string
	operation, namespace string
	hourly               int
	risk                 string // a level, or "—" when nothing is planned
	answer               string
}

// TestScopesDocWorkedExample runs docs/scopes.md's worked example against config/example.yaml, reading it from the
// doc so the two cannot drift: the environments the doc says ml-prod-eks has, then for each step its scope applied
// to example.yaml (which must validate), the scope validate-config shows, and every request of its table sent as
// ops-agent through the engine with the configured policy, targets and risk rules.
func TestScopesDocWorkedExample(t *testing.T) {
	raw, err := os.ReadFile("../docs/scopes.md")
	if err != nil {
		t.Fatal(err)
	}
	section := docSection(t, string(raw), "## Worked example: the seed's progression")
	checkDocEnvironments(t, section)
	steps := docSteps(t, section)
	if len(steps) != 3 {
		t.Fatalf("docs/scopes.md's worked example has %d steps, want 3", len(steps))
	}
	for i, st := range steps {
		t.Run(st.title, func(t *testing.T) {
			engine, store, cfg := exampleEngine(t, st.scopeLine)
			agent := cfg.Agents[0]
			if got := agent.Scope.String(); !strings.HasSuffix(st.summary, "scope: "+got) {
				t.Errorf("validate-config shows %q for this scope, the doc shows %q", "scope: "+got, st.summary)
			}
			_, afterOps, _ := strings.Cut(st.summary, "): operations ")
			if listed, _, _ := strings.Cut(afterOps, "; scope: "); listed != "…" && listed != strings.Join(agent.Operations, ", ") {
				t.Errorf("the doc shows operations %q, example.yaml's agent has %q", listed, strings.Join(agent.Operations, ", "))
			}
			if len(st.requests) == 0 {
				t.Fatal("the step has no table of requests")
			}
			for j, r := range st.requests {
				id := fmt.Sprintf("step%d-row%d", i+1, j+1)
				rec, err := agentSubmits(engine, id, r.operation, r.namespace, r.hourly)
				checkDocAnswer(t, store, id, r, rec, err)
			}
		})
	}
}

// docSection is the text of the section titled heading, up to the next section of the same level.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/scopes.md has no section %q", heading)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

// fenced returns the contents of the fenced blocks of text in order, each with its info string ("yaml" or "").
func fenced(text string) (infos, blocks []string) {
	parts := strings.Split(text, "```")
	for i := 1; i+1 < len(parts); i += 2 {
		info, body, _ := strings.Cut(parts[i], "\n")
		infos, blocks = append(infos, strings.TrimSpace(info)), append(blocks, body)
	}
	return infos, blocks
}

// checkDocEnvironments checks the cluster snippet before the first step against example.yaml's ml-prod-eks.
func checkDocEnvironments(t *testing.T, section string) {
	t.Helper()
	intro, _, _ := strings.Cut(section, "\n**1.")
	infos, blocks := fenced(intro)
	if len(blocks) != 1 || infos[0] != "yaml" {
		t.Fatalf("the worked example should open with one yaml block of ml-prod-eks's environments, found %d", len(blocks))
	}
	var doc struct {
		Environment           config.Environment            `json:"environment"`
		Namespaces            []string                      `json:"namespaces"`
		NamespaceEnvironments map[string]config.Environment `json:"namespaceEnvironments"`
	}
	if err := yaml.UnmarshalStrict([]byte(blocks[0]), &doc); err != nil {
		t.Fatalf("the worked example's cluster snippet: %v", err)
	}
	cfg, err := config.Parse(config.Example, "example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := cfg.Cluster("ml-prod-eks")
	if cl == nil || cl.Environment != doc.Environment || strings.Join(cl.Namespaces, ",") != strings.Join(doc.Namespaces, ",") ||
		fmt.Sprint(cl.NamespaceEnvironments) != fmt.Sprint(doc.NamespaceEnvironments) {
		t.Fatalf("the doc says ml-prod-eks is %+v; example.yaml has %+v", doc, cl)
	}
}

var stepTitle = regexp.MustCompile(`(?m)^\*\*(\d)\. ([^*]+?)\.\*\*`)

// docSteps reads each step: its yaml block (the scope line), the validate-config block after it and its table.
func docSteps(t *testing.T, section string) []docStep {
	t.Helper()
	marks := stepTitle.FindAllStringSubmatchIndex(section, -1)
	var steps []docStep
	for i, m := range marks {
		end := len(section)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		text := section[m[0]:end]
		st := docStep{title: section[m[4]:m[5]]}
		infos, blocks := fenced(text)
		if len(blocks) != 2 || infos[0] != "yaml" {
			t.Fatalf("step %q: want a yaml block with the scope, then validate-config's output; found %d blocks", st.title, len(blocks))
		}
		st.scopeLine = strings.TrimRight(blocks[0], "\n")
		if strings.Count(st.scopeLine, "\n") != 0 || !strings.HasPrefix(st.scopeLine, "    scope: ") {
			t.Fatalf("step %q: the scope should be one line, indented as in example.yaml: %q", st.title, st.scopeLine)
		}
		for _, l := range strings.Split(blocks[1], "\n") {
			if strings.HasPrefix(l, "  ops-agent (") {
				st.summary = l
			}
		}
		if st.summary == "" {
			t.Fatalf("step %q: validate-config's output has no line for ops-agent", st.title)
		}
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "| `") {
				st.requests = append(st.requests, docRow(t, l))
			}
		}
		steps = append(steps, st)
	}
	return steps
}

// docRow reads "| `operation` | `namespace` | $20/h | medium | answer |".
func docRow(t *testing.T, line string) docRequest {
	t.Helper()
	cells := strings.Split(strings.Trim(line, "| "), "|")
	if len(cells) != 5 {
		t.Fatalf("a request row has %d cells, want 5 (sends, in, adds, risk, answer): %s", len(cells), line)
	}
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	r := docRequest{row: line, operation: strings.Trim(cells[0], "`"), namespace: strings.Trim(cells[1], "`"), risk: cells[3], answer: cells[4]}
	if cells[2] != "—" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(cells[2], "$"), "/h"))
		if err != nil {
			t.Fatalf("adds %q: want $N/h or —: %s", cells[2], line)
		}
		r.hourly = n
	}
	return r
}

var (
	waitsFor = regexp.MustCompile("^waits for (\\d+) of `([^`]+)`$")
	refused  = regexp.MustCompile("^`(E_[A-Z_]+)` (before|after) planning: `([^`]+)`$")
)

// checkDocAnswer holds what the engine answered to r against what the doc says.
func checkDocAnswer(t *testing.T, store *opstest.Store, id string, r docRequest, rec *ops.Record, err error) {
	t.Helper()
	if got := riskOf(rec, err); got != r.risk {
		t.Errorf("%s: risk %s (%v); the doc says %s", r.row, got, err, r.risk)
	}
	switch m, w := refused.FindStringSubmatch(r.answer), waitsFor.FindStringSubmatch(r.answer); {
	case r.answer == "answered":
		if err != nil || rec == nil || rec.Phase != ops.PhaseSucceeded {
			t.Errorf("%s: %s; want an answer", r.row, outcome(rec, err))
		}
	case w != nil:
		if err != nil || rec == nil || rec.Phase != ops.PhaseAwaitingApproval ||
			strconv.Itoa(rec.Approval.Required) != w[1] || rec.Approval.Approvers != w[2] {
			t.Errorf("%s: %s; want it waiting for %s of %s", r.row, outcome(rec, err), w[1], w[2])
		}
	case m != nil:
		var ue *ops.Error
		if !errors.As(err, &ue) || string(ue.Code) != m[1] || !strings.Contains(ue.Message, m[3]) {
			t.Fatalf("%s: got %v; want %s saying %q", r.row, err, m[1], m[3])
		}
		stored, _ := store.Get(context.Background(), id)
		if m[2] == "before" && stored != nil {
			t.Errorf("%s: refused before planning, but stored as %s", r.row, stored.Phase)
		}
		if m[2] == "after" && (stored == nil || stored.Phase != ops.PhaseRejected || stored.Approval.Required != 0) {
			t.Errorf("%s: refused after planning, stored as %s; want rejected, never sent for approval", r.row, outcome(stored, nil))
		}
	default:
		t.Fatalf("%s: the answer %q is none of: answered; waits for N of `group`; `E_CODE` before|after planning: `message`", r.row, r.answer)
	}
}

// outcome says what the engine answered in a line: the error, or the phase and the approval asked for.
func outcome(rec *ops.Record, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case rec == nil:
		return "nothing stored"
	}
	return fmt.Sprintf("%s, %d of %q", rec.Phase, rec.Approval.Required, rec.Approval.Approvers)
}

var refusedAt = regexp.MustCompile(`this plan is (\w+) risk`)

// riskOf is the risk of the request's plan, which a plan refused by the agent's maxRisk gives in its refusal only
// (the rejected record keeps the error, not the plan); "—" when nothing was planned.
func riskOf(rec *ops.Record, err error) string {
	if rec != nil && rec.Plan != nil {
		return rec.Plan.Risk.Level.String()
	}
	var ue *ops.Error
	if errors.As(err, &ue) && ue.Field == "risk" {
		if m := refusedAt.FindStringSubmatch(ue.Message); m != nil {
			return m[1]
		}
	}
	return "—"
}
