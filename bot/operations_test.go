package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
)

// specOp is an operation with the spec of one of the service's real operations (its name, slash form, parameters
// and bounds) and nothing behind it: it plans one change and answers at once, naming the request, so a test drives
// how each operation is asked, not what it does to a cluster (ops/kube, ops/aws and e2e/ test that).
type specOp struct{ spec ops.Spec }

func (o specOp) Spec() ops.Spec                               { return o.spec }
func (o specOp) Validate(context.Context, *ops.Request) error { return nil }

func (o specOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	return &ops.Plan{Summary: o.spec.Name + " " + req.ID, Observed: "v1", ServerValidated: true,
		Changes: []ops.Change{{Action: ops.ActionUpdate, Kind: "Widget", Name: req.ID}}}, nil
}

func (o specOp) Execute(_ context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	return &ops.Result{Summary: o.spec.Name + " answered " + req.ID}, nil
}

// sampleArgs are values of an operation's required parameters that its grammar, its agent contract and its tool
// schema accept.
func sampleArgs(spec ops.Spec) map[string]any {
	out := map[string]any{}
	for _, p := range spec.Params {
		if !p.Required {
			continue
		}
		switch {
		case len(p.Enum) > 0:
			out[p.Name] = p.Enum[0]
		case p.Kind == ops.KindInt:
			out[p.Name] = max(p.Min, 1)
		case p.Kind == ops.KindBool:
			out[p.Name] = true
		case p.Kind == ops.KindDuration:
			out[p.Name] = "10m"
		case p.Kind == ops.KindQuantity:
			out[p.Name] = "1Gi"
		case p.Kind == ops.KindList:
			out[p.Name] = []string{"x"}
		case p.Name == "image":
			out[p.Name] = "registry.example.com/app:v1"
		default:
			out[p.Name] = "w1"
		}
	}
	return out
}

// slashArgs writes args as the slash grammar takes them.
func slashArgs(args map[string]any) string {
	var parts []string
	for k, v := range args {
		if l, ok := v.([]string); ok {
			v = strings.Join(l, ",")
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, " ")
}

// TestEveryOperationBySlashDMAndMCP: each operation of the service's catalog, by its real spec, is asked through the
// running bot in all three ways a request arrives, as a dry run where it changes something: a person's slash
// command (its subcommand and sample arguments parse, and the plan or the answer is posted in the channel), an
// agent's JSON DM (the agent contract takes it; the machine-readable reply in the DM's thread names the request,
// done, without errors) and an MCP tool call (the tool is listed to the agent and its reply names the request, done).
// Nothing is executed for a dry run; a read answers with what the operation read.
func TestEveryOperationBySlashDMAndMCP(t *testing.T) {
	specs := realSpecs.Specs()
	h := startMCPWith(t, harnessOptions{
		prepare: func(h *harness) {
			for _, s := range specs {
				delete(h.ops, s.Name) // the widgets named as real operations give way to the real specs
				if s.Lock != nil {    // the real lock reads the cluster clients, which this test has none of
					s.Lock = func(r ops.Request) ops.LockScope {
						return ops.LockScope{Cluster: r.Target.Cluster, Namespace: r.Target.Namespace, Kind: r.Operation, Name: r.ID}
					}
				}
				h.extra = append(h.extra, specOp{s})
			}
		},
		edit: func(c *config.Config) { c.Agents[0].Operations = []string{"*"} },
	})
	s := h.session(tokenOps, nil)
	target := map[string]any{"cluster": clusterTst, "namespace": "ml"}
	for _, spec := range specs {
		args := sampleArgs(spec)
		dry := ""
		if spec.Mutates {
			dry = " dry-run"
		}
		// A person's slash command: its plan (a dry run: nothing changed) or its answer in the channel.
		id := "slash-" + spec.Name
		told := len(h.srv.Snapshot().Ephemerals)
		h.slash(userAlice, chOps, strings.TrimSpace(spec.Topic+" "+spec.Verb+" "+slashArgs(args))+" request-id="+id+dry)
		want := []string{spec.Name + " answered " + id}
		if spec.Mutates {
			want = []string{"(request " + id + ")", "dry run done: nothing was changed"}
		}
		snap := h.waitFor("the answer to /hp "+spec.Topic+" "+spec.Verb, func(s fakeslack.Snapshot) bool {
			return len(mentioningAll(topLevel(s, chOps), want...)) > 0 || len(s.Ephemerals) > told
		})
		if len(mentioningAll(topLevel(snap, chOps), want...)) != 1 {
			t.Errorf("/hp %s %s was answered %v, want one message in the channel saying %q", spec.Topic, spec.Verb, snap.Ephemerals[told:], want)
		}

		// An agent's DM.
		id = "dm-" + spec.Name
		dm, _ := json.Marshal(map[string]any{"operation": spec.Name, "target": target, "workload": args,
			"controls": map[string]any{"requestId": id, "dryRun": spec.Mutates}})
		asked := h.agentSays(string(dm))
		snap = h.waitFor("the agent's reply about "+spec.Name, func(s fakeslack.Snapshot) bool { return len(agentReplies(s, asked.TS)) > 0 })
		b := replyBody(t, agentReplies(snap, asked.TS)[0])
		if len(b.Errors) > 0 || b.Phase != ops.PhaseDone && b.Phase != ops.PhaseSucceeded {
			t.Errorf("the DM asking %s was answered %s with %+v", spec.Name, b.Phase, b.Errors)
		}

		// An MCP tool call.
		id = "mcp-" + spec.Name
		margs := map[string]any{"target": target}
		for k, v := range args {
			margs[k] = v
		}
		if spec.Mutates {
			margs["requestId"], margs["dryRun"] = id, true
		}
		r, res := call(t, s, spec.Name, margs)
		if res.IsError || len(r.Errors) > 0 || r.Phase != ops.PhaseDone && r.Phase != ops.PhaseSucceeded {
			t.Errorf("the MCP call of %s was answered %s with %+v: %s", spec.Name, r.Phase, r.Errors, text(res))
		}
	}
	for _, spec := range specs {
		if !spec.Mutates {
			continue
		}
		for _, id := range []string{"slash-", "dm-", "mcp-"} {
			if rec := h.recordOrNil(id + spec.Name); rec == nil || rec.Phase != ops.PhaseDone {
				t.Errorf("the dry run %s%s is %+v", id, spec.Name, rec)
			}
		}
	}
}

// mentioningAll are the messages that mention every one of subs.
func mentioningAll(ms []fakeslack.Message, subs ...string) []fakeslack.Message {
	for _, s := range subs {
		ms = mentioning(ms, s)
	}
	return ms
}
