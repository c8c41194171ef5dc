package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/slack-go/slack"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
)

// matrixConfig has two command channels: the people of the matrix work in C0OPS; request R is asked in C0ML.
const matrixConfig = `
slack:
  channels: [C0OPS, C0ML]
  approvalsChannel: C0APPROVE
clusters:
  - name: c
    namespaces: [n]
agents:
  - {name: agent-a, slackUser: U0AGENTA, operations: ["get-*", "submit-training-job", "scale-inference"]}
  - {name: agent-b, slackUser: U0AGENTB, operations: ["list-*"]}
access:
  readers: {userGroups: [S0AUDIT]}
approvals:
  groups:
    leads: {users: [U0LEAD], userGroups: [S0LEADS]}
  rules:
    - {risk: [high, critical, medium], approvers: leads, required: 1}
    - {risk: [low], initiator: human, required: 0}
    - {risk: [low], initiator: agent, approvers: leads, required: 1}
`

// matrixDirectory is the workspace: who is in which channel and user group.
type matrixDirectory struct{}

func (matrixDirectory) ChannelMembers(_ context.Context, id string) ([]string, error) {
	return map[string][]string{"C0OPS": {"U0ENG", "U0LEAD"}, "C0ML": {"U0MLENG"}, "C0APPROVE": {"U0LEAD"}}[id], nil
}

func (matrixDirectory) UserGroupMembers(_ context.Context, id string) ([]string, error) {
	return map[string][]string{"S0LEADS": {"U0LEADX"}, "S0AUDIT": {"U0AUDIT"}}[id], nil
}

type matrixWatches struct{}

func (matrixWatches) Resolve(t ops.WatchTarget) (ops.ObjectRef, error) {
	return ops.ObjectRef{Cluster: "c", Namespace: "n", Kind: "Job", Name: t.Name}, nil
}
func (matrixWatches) Watch(context.Context, ops.ObjectRef, ops.WatchSubscription) error { return nil }
func (matrixWatches) Unwatch(context.Context, ops.ObjectRef, string) (bool, error) {
	return false, nil
}

type matrixReporter struct{ poster Poster }

func (r matrixReporter) CapacityReport(ctx context.Context, channel string, _ []string) error {
	_, err := r.poster.Post(ctx, channel, InfoMessage("capacity report"))
	return err
}

// matrixFixture is the real handlers, engine and approvals policy over the in-memory store, with request R
// ("req-r", a high-risk scale asked in C0ML by U0MLENG) awaiting approval.
type matrixFixture struct {
	h      *Handler
	store  *opstest.Store
	poster *recordPoster
}

func newMatrixFixture(t *testing.T) *matrixFixture {
	t.Helper()
	cfg, err := config.Parse([]byte(matrixConfig), "matrix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 8, 9, 0, 0, 0, time.UTC))
	policy := approvals.New(cfg, matrixDirectory{}, clock)
	cat := ops.NewCatalog()
	for _, s := range append(testSpecs(),
		ops.Spec{Name: "get-training-job", Topic: "train", Verb: "status", Summary: "a job's status and log",
			Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "job"}}},
		ops.Spec{Name: "scale-inference", Topic: "inference", Verb: "scale", Summary: "scale", Mutates: true, Baseline: ops.RiskHigh,
			Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "name"}, {Name: "replicas", Kind: ops.KindInt, Required: true, Help: "replicas"}}},
	) {
		cat.Register(fakeOp{s})
	}
	store := opstest.NewStore()
	eng := engine.New(cat, store, opstest.NewLocker(clock), policy, engine.Options{Replica: "r1", Clock: clock})
	agents := map[string]AgentInfo{}
	for _, a := range cfg.Agents {
		agents[a.SlackUser] = AgentInfo{Name: a.Name, Operations: a.Operations}
	}
	p := &recordPoster{}
	h := New(Config{Channels: cfg.Slack.Channels, ApprovalsChannel: cfg.Slack.ApprovalsChannel, Agents: agents, Watches: matrixWatches{}},
		eng, policy, cat, p, &memRefs{}, matrixReporter{p})
	f := &matrixFixture{h: h, store: store, poster: p}
	if err := h.Slash(context.Background(), slack.SlashCommand{Text: "inference scale name=web replicas=3 request-id=req-r cluster=c namespace=n",
		ChannelID: "C0ML", UserID: "U0MLENG", TriggerID: "t0"}); err != nil {
		t.Fatal(err)
	}
	if r := f.r(t); r.Phase != ops.PhaseAwaitingApproval {
		t.Fatalf("request R is %s (%s), want awaiting approval", r.Phase, p.last(t))
	}
	p.sent, p.views = nil, nil
	return f
}

func (f *matrixFixture) r(t *testing.T) *ops.Record {
	t.Helper()
	r, err := f.store.Get(context.Background(), "req-r")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// matrixPerson is a row of the matrix.
type matrixPerson struct {
	name, id string
	agent    bool
}

var matrixPeople = []matrixPerson{
	{"engineer in channel", "U0ENG", false},
	{"lead", "U0LEAD", false},
	{"lead not in channel", "U0LEADX", false},
	{"workspace stranger", "U0STRANGER", false},
	{"auditor reader", "U0AUDIT", false},
	{"agent A", "U0AGENTA", true},
	{"agent B", "U0AGENTB", true},
}

// matrixAction is a column: a slash command in C0OPS ("ch"), a DM ("dm": the text a person types, the JSON an agent
// sends), or a click on R's message in C0ML.
type matrixAction struct {
	name  string
	slash string // text in channel and in a person's DM
	json  string // an agent's DM; empty: the agent sends the slash text
	click string // a button on R's message
	dm    bool   // the column is the DM form
}

func matrixActions() []matrixAction {
	both := func(name, slash, json string) []matrixAction {
		return []matrixAction{{name: name + " ch", slash: slash}, {name: name + " dm", slash: slash, json: json, dm: true}}
	}
	var out []matrixAction
	out = append(out, both("help", "help", "")...)
	out = append(out, both("status", "status cluster=c", `{"operation":"get-cluster-status","target":{"cluster":"c","namespace":"n"}}`)...)
	out = append(out, both("train status", "train status name=j cluster=c namespace=n", `{"operation":"get-training-job","target":{"cluster":"c","namespace":"n"},"workload":{"name":"j"}}`)...)
	out = append(out, both("show R", "request show id=req-r", `{"operation":"get-request","controls":{"requestId":"req-r"}}`)...)
	out = append(out, both("requests", "requests", "")...)
	out = append(out, both("watch", "watch job=j", "")...)
	out = append(out, both("report", "report capacity", "")...)
	out = append(out, both("train submit", "train submit name=j image=i cluster=c namespace=n", `{"operation":"submit-training-job","target":{"cluster":"c","namespace":"n"},"workload":{"name":"j","image":"i"}}`)...)
	out = append(out, both("scale", "inference scale name=api replicas=2 cluster=c namespace=n", `{"operation":"scale-inference","target":{"cluster":"c","namespace":"n"},"workload":{"name":"api","replicas":2}}`)...)
	out = append(out, matrixAction{name: "approve R", click: ActionApprove}, matrixAction{name: "deny R", click: ActionDeny})
	out = append(out, both("stop R", "request stop id=req-r", "")...)
	out = append(out, matrixAction{name: "take over R", click: ActionTakeOver})
	return out
}

// matrixExpected is the documented outcome of every cell (docs/architecture.md, "Who may do what"): ok; ok+R / ok-R
// for a list that shows / hides R; NA = E_NOT_AUTHORIZED; INV = E_INVALID_ARGUMENT (an agent's DM holds no JSON).
var matrixExpected = map[string]string{
	//                       help   status  train-st show-R  requests    watch  report submit  scale  appr deny stop   take
	"engineer in channel": "ok ok  ok ok   ok ok    NA NA   ok-R ok-R   ok ok  ok ok  ok NA   ok NA  NA   NA   NA NA  NA",
	"lead":                "ok ok  ok ok   ok ok    ok ok   ok+R ok+R   ok ok  ok ok  ok NA   ok NA  ok   ok   ok NA  ok",
	"lead not in channel": "ok ok  ok ok   ok ok    ok ok   ok+R ok+R   ok ok  ok ok  ok NA   ok NA  ok   ok   ok NA  ok",
	"workspace stranger":  "NA NA  NA NA   NA NA    NA NA   NA NA       NA NA  NA NA  NA NA   NA NA  NA   NA   NA NA  NA",
	"auditor reader":      "ok ok  ok ok   ok ok    ok ok   ok+R ok+R   ok ok  ok ok  NA NA   NA NA  NA   NA   NA NA  NA",
	"agent A":             "NA INV NA ok   NA ok    NA NA   NA INV      NA INV NA INV NA ok   NA ok  NA   NA   NA INV NA",
	"agent B":             "NA INV NA NA   NA NA    NA NA   NA INV      NA INV NA INV NA NA   NA NA  NA   NA   NA INV NA",
}

var errorCode = regexp.MustCompile(`E_[A-Z_]+`)

// TestAccessMatrix drives every action of every person through the real handlers, engine and policy, checks each
// cell against the documented outcome and logs the whole matrix.
func TestAccessMatrix(t *testing.T) {
	actions := matrixActions()
	got := map[string][]string{}
	for _, who := range matrixPeople {
		want := strings.Fields(matrixExpected[who.name])
		if len(want) != len(actions) {
			t.Fatalf("%s: %d expected outcomes for %d actions", who.name, len(want), len(actions))
		}
		for i, a := range actions {
			out := runMatrixCell(t, who, a)
			got[who.name] = append(got[who.name], out)
			if out != want[i] {
				t.Errorf("%s, %s: got %s, want %s", who.name, a.name, out, want[i])
			}
		}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	head := []string{"who \\ action"}
	for _, a := range actions {
		head = append(head, a.name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t|"))
	for _, who := range matrixPeople {
		fmt.Fprintln(tw, who.name+"\t|"+strings.Join(got[who.name], "\t|"))
	}
	_ = tw.Flush()
	t.Log("access matrix (R is a request asked in another channel; NA = E_NOT_AUTHORIZED, INV = E_INVALID_ARGUMENT):\n" + b.String())
}

func runMatrixCell(t *testing.T, who matrixPerson, a matrixAction) string {
	t.Helper()
	ctx := context.Background()
	f := newMatrixFixture(t)
	before := f.r(t)
	var err error
	switch {
	case a.click != "":
		err = f.click(ctx, who.id, a.click)
	case !a.dm:
		err = f.h.Slash(ctx, slack.SlashCommand{Text: a.slash, ChannelID: "C0OPS", UserID: who.id, TriggerID: "t-" + who.id})
	case who.agent && a.json != "":
		err = f.h.DirectMessage(ctx, DM{Channel: "D0" + who.id, User: who.id, TS: "1.1", Text: a.json})
	default:
		err = f.h.DirectMessage(ctx, DM{Channel: "D0" + who.id, User: who.id, TS: "1.1", Text: a.slash})
	}
	if err != nil {
		t.Fatalf("%s, %s: %v", who.name, a.name, err)
	}
	raw, _ := json.Marshal(f.poster.sent)
	if code := errorCode.FindString(string(raw)); code != "" {
		return map[string]string{string(ops.CodeNotAuthorized): "NA", string(ops.CodeInvalidArgument): "INV"}[code] + orCode(code)
	}
	after := f.r(t)
	switch {
	case strings.HasPrefix(a.name, "requests"):
		if strings.Contains(string(raw), "req-r") {
			return "ok+R"
		}
		return "ok-R"
	case a.click != "" || strings.HasPrefix(a.name, "stop"):
		if after.Version == before.Version {
			return "unchanged" // an action on R that neither refused nor changed it
		}
	case len(f.poster.sent) == 0 && len(f.poster.views) == 0 && !a.dm && !strings.Contains(a.name, "submit") && !strings.Contains(a.name, "scale"):
		return "silent"
	}
	return "ok"
}

// orCode keeps codes the matrix has no short name for visible.
func orCode(code string) string {
	if code == string(ops.CodeNotAuthorized) || code == string(ops.CodeInvalidArgument) {
		return ""
	}
	return code
}

// click presses a button of R's message in C0ML as it is drawn now (an Approve button carries R's plan hash); a
// Deny opens its modal, which is then submitted.
func (f *matrixFixture) click(ctx context.Context, user, action string) error {
	value := "req-r"
	if action == ActionApprove {
		rec, err := f.store.Get(ctx, "req-r")
		if err != nil {
			return err
		}
		value = ApproveValue(rec)
	}
	return f.clickValue(ctx, user, action, value)
}

// clickValue presses a button whose value is value.
func (f *matrixFixture) clickValue(ctx context.Context, user, action, value string) error {
	var cb slack.InteractionCallback
	cb.Type, cb.TriggerID, cb.User.ID, cb.Channel.ID, cb.Container.MessageTs = slack.InteractionTypeBlockActions, "trig", user, "C0ML", "1.1"
	cb.ActionCallback.BlockActions = []*slack.BlockAction{{ActionID: action, Value: value}}
	if err := f.h.Interaction(ctx, cb); err != nil {
		return err
	}
	if len(f.poster.views) == 0 || f.poster.views[0].CallbackID != DenyCallback {
		return nil
	}
	var sub slack.InteractionCallback
	sub.Type, sub.User.ID = slack.InteractionTypeViewSubmission, user
	sub.View.CallbackID, sub.View.PrivateMetadata = DenyCallback, f.poster.views[0].PrivateMetadata
	return f.h.Interaction(ctx, sub)
}
