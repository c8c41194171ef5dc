package handlers

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

// fuzzSpecs are the test catalog plus an operation with a parameter of every kind and explicit caps, so the
// fuzzers reach every normalization path.
func fuzzSpecs() []ops.Spec {
	return append(testSpecs(), ops.Spec{Name: "deploy-inference", Topic: "infer", Verb: "deploy", Summary: "deploy", Mutates: true,
		Params: []ops.ParamSpec{
			{Name: "name", Kind: ops.KindString, Required: true, Help: "name"},
			{Name: "kind", Kind: ops.KindString, Default: "job", Enum: []string{"job", "pytorchjob"}, Help: "kind"},
			{Name: "replicas", Kind: ops.KindInt, Default: "1", Help: "replicas"},
			{Name: "port", Kind: ops.KindInt, Default: "8080", Min: 1, Max: 65535, Help: "port"},
			{Name: "memory", Kind: ops.KindQuantity, Help: "memory"},
			{Name: "size", Kind: ops.KindQuantity, MaxQuantity: "16Ti", Help: "size"},
			{Name: "progress-deadline", Kind: ops.KindDuration, Default: "10m", Help: "deadline"},
			{Name: "timeout", Kind: ops.KindDuration, MaxDuration: "30m", Help: "timeout"},
			{Name: "spot", Kind: ops.KindBool, Help: "spot"},
			{Name: "command", Kind: ops.KindList, Help: "argv"},
		}})
}

func fuzzCatalog() *ops.Catalog {
	c := ops.NewCatalog()
	for _, s := range fuzzSpecs() {
		c.Register(fakeOp{s})
	}
	return c
}

// checkNormalized asserts that every normalized value is a declared parameter, of its declared type, in range.
func checkNormalized(t *testing.T, spec ops.Spec, p ops.Params) {
	t.Helper()
	byName := map[string]ops.ParamSpec{}
	for _, ps := range spec.Params {
		byName[ps.Name] = ps
	}
	for name, v := range p {
		ps, ok := byName[name]
		if !ok {
			t.Fatalf("normalized %q is not a parameter of %s", name, spec.Name)
		}
		switch ps.Kind {
		case ops.KindString:
			s, ok := v.(string)
			if !ok || (len(ps.Enum) > 0 && !slices.Contains(ps.Enum, s)) {
				t.Fatalf("%s = %#v: want a string of %v", name, v, ps.Enum)
			}
		case ops.KindInt:
			n, ok := v.(int64)
			max := ps.Max
			if max == 0 {
				max = ops.MaxParamInt
			}
			if !ok || n < ps.Min || n > max {
				t.Fatalf("%s = %#v: want an int64 in [%d, %d]", name, v, ps.Min, max)
			}
		case ops.KindBool:
			if _, ok := v.(bool); !ok {
				t.Fatalf("%s = %#v: want a bool", name, v)
			}
		case ops.KindQuantity:
			s, _ := v.(string)
			q, err := resource.ParseQuantity(s)
			capQ := ps.MaxQuantity
			if capQ == "" {
				capQ = ops.MaxParamQuantity
			}
			if err != nil || q.String() != s || q.Sign() < 0 || q.Cmp(resource.MustParse(capQ)) > 0 {
				t.Fatalf("%s = %#v: want a canonical quantity in [0, %s]", name, v, capQ)
			}
		case ops.KindDuration:
			s, _ := v.(string)
			d, err := time.ParseDuration(s)
			capD := ops.MaxParamDuration
			if ps.MaxDuration != "" {
				capD, _ = time.ParseDuration(ps.MaxDuration)
			}
			if err != nil || d.String() != s || d <= 0 || d > capD {
				t.Fatalf("%s = %#v: want a canonical duration in (0, %s]", name, v, capD)
			}
		case ops.KindList:
			if _, ok := v.([]string); !ok {
				t.Fatalf("%s = %#v: want []string", name, v)
			}
		default:
			t.Fatalf("%s has an unknown kind %q", name, ps.Kind)
		}
	}
}

// checkRefusal asserts what every refusal is: a capped list of coded problems, rendered as a message Slack takes.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	es := ops.Errors{ops.AsError(err)}
	if errors.As(err, &es) && len(es) > ops.MaxErrors+1 {
		t.Fatalf("%d problems reported, want at most %d", len(es), ops.MaxErrors+1)
	}
	for _, e := range es {
		if e.Code == "" || e.Message == "" {
			t.Fatalf("problem without a code or message: %+v", e)
		}
	}
	if err := checkSlack(ErrorMessage(err)); err != nil {
		t.Fatalf("the refusal is not a message Slack takes: %v", err)
	}
}

func FuzzSlashGrammar(f *testing.F) {
	for _, s := range []string{
		"train submit name=a image=b replicas=4 dry-run",
		`train submit name=a image=b command="python train.py --lr 0.1"`,
		"infer deploy name=x memory=64Gi progress-deadline=4294967297s port=65536 spot=yes",
		"requests mine", "request show id=req-1", "help", "train help", "trian submit", "train submit name=a name=b",
		`train submit name=a command="unterminated`,
	} {
		f.Add(s)
	}
	g := NewGrammar("/hp", fuzzSpecs())
	f.Fuzz(func(t *testing.T, text string) {
		inv, err := g.Parse(text)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if inv.Help || inv.Command.Spec == nil {
			return
		}
		valid := g.argNames(inv.Command)
		for k := range inv.Args {
			if !slices.Contains(valid, k) || slices.Contains(commonArgs, k) {
				t.Fatalf("argument %q survived parsing of %s", k, inv.Command.Spec.Name)
			}
		}
		req := inv.Request(ops.Initiator{Kind: ops.Human, ID: "U0ALICE"}, "slash")
		p, err := ops.Normalize(inv.Command.Spec.Params, req.Params)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkNormalized(t, *inv.Command.Spec, p)
	})
}

func FuzzAgentRequest(f *testing.F) {
	for _, s := range []string{
		`{"operation":"submit-training-job","target":{"cluster":"c","namespace":"n"},"workload":{"name":"j","image":"i","replicas":4,"maxHours":2},"controls":{"requestId":"r","dryRun":true}}`,
		`{"operation":"deploy-inference","workload":{"name":"x","progressDeadline":"4294967297s","port":8080.0,"memory":"1Ei","spot":true,"command":["a","b"]}}`,
		`{"operation":"get-request","controls":{"requestId":"r"}}}]]`,
		`{"operation":"get-request","operation":"delete-storage"}`,
		`{"operation":"submit-training-job","workload":{"name":"j","securityContext":{"privileged":true}}}`,
		`{"operation":"submit-training-job","workload":{"name":"j","extra":[{"Service_Account":"x"}]}}`,
		"```json\n{\"operation\":\"stop-training-job\",\"workload\":{\"name\":\"j\"}}\n```",
	} {
		f.Add(s)
	}
	cat := fuzzCatalog()
	f.Fuzz(func(t *testing.T, text string) {
		raw, ok := ExtractJSON(text)
		if !ok {
			return
		}
		ar, err := agentapi.Decode(raw, cat)
		if err != nil {
			checkRefusal(t, err)
			if err := checkSlack(AgentReply(agentapi.NewBody(nil, "", err))); err != nil {
				t.Fatalf("the agent's refusal is not a message Slack takes: %v", err)
			}
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		// What was decoded, sent again, is never refused as picking an identity or privilege.
		again, _ := json.Marshal(map[string]any{"operation": ar.Operation, "workload": ar.Workload})
		if _, err := agentapi.Decode(again, cat); err != nil {
			es := ops.Errors{ops.AsError(err)}
			errors.As(err, &es)
			for _, e := range es {
				if e.Code == ops.CodeForbiddenField {
					t.Fatalf("a forbidden field survived decoding: %v", err)
				}
			}
		}
		if ar.Operation == "get-request" {
			if ar.RequestID == "" || len(ar.Workload) > 0 {
				t.Fatalf("get-request decoded as %+v", ar)
			}
			return
		}
		op, err := cat.Lookup(ar.Operation)
		if err != nil {
			t.Fatalf("decoded an unknown operation %q", ar.Operation)
		}
		p, err := ops.Normalize(op.Spec().Params, ar.Workload)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkNormalized(t, op.Spec(), p)
	})
}

// FuzzRender renders every message kind from records built of arbitrary text: each must be a message Slack takes.
func FuzzRender(f *testing.F) {
	f.Add("submit-training-job", "ml-platform", "req-1", "plan summary", "E_INVALID_ARGUMENT", "replicas", "too many", "apiVersion: v1", "epoch 1", "note", uint8(3))
	f.Add("", "", "", "", "", "", "", "", "", "", uint8(0))
	// Just past each limit: a section (3000), the inline cut (2500) and a message's text (40,000).
	f.Add(strings.Repeat("x", 300), "ns", strings.Repeat("r", 200), strings.Repeat("é", 40001), "E_X", strings.Repeat("f", 3001),
		strings.Repeat("m", 3001), strings.Repeat("y", 2501), strings.Repeat("line\n", 600), "*_`<>&", uint8(255))
	f.Fuzz(func(t *testing.T, op, ns, id, summary, code, field, msg, manifest, output, note string, n uint8) {
		rec := fuzzRecord(op, ns, id, summary, code, field, msg, manifest, output, note, int(n))
		for _, phase := range []ops.Phase{ops.PhaseAwaitingApproval, ops.PhaseSucceeded, ops.PhaseRejected, ops.PhaseInterrupted} {
			rec.Phase = phase
			check := func(kind string, m Msg) {
				if err := checkSlack(m); err != nil {
					t.Fatalf("%s in phase %s is not a message Slack takes: %v", kind, phase, err)
				}
			}
			check("plan message", PlanMessage(opSpecs, rec).Msg)
			check("result message", ResultMessage(opSpecs, rec).Msg)
			check("agent reply", AgentReply(agentapi.NewBody(rec, id, nil)))
			check("progress reply", ProgressReply(rec, note))
			check("info", InfoMessage(summary+note))
			check("requests", RequestsMessage(opSpecs, summary, []*ops.Record{rec, rec}))
			tr := ops.Transition{From: ops.PhaseExecuting, To: phase, By: rec.Request.Initiator, Note: note}
			check("audit line", AuditLine(rec, tr))
			if m, ok := TransitionReply(rec, tr); ok {
				check("transition reply", m)
			}
			if len(rec.Errors) > 0 {
				check("error message", ErrorMessage(ops.Errors(rec.Errors)))
			}
			wc := ops.WatchChange{Object: ops.ObjectRef{Kind: "Job", Name: id, Namespace: ns}, From: "running", To: "failed", Reason: msg,
				Events: []string{note, msg}, LogTail: output}
			if m, ok := WatchReply(wc); ok {
				check("watch reply", m)
			}
			check("reservation warning", ReservationWarningReply(ops.ReservationWarning{Object: wc.Object,
				Reservation: ops.CapacityReservation{Group: note, Plan: msg, EndTime: time.Unix(int64(n), 0), Left: time.Duration(n) * time.Minute},
				Nodes:       []string{note, output, msg}}))
		}
	})
}

func fuzzRecord(op, ns, id, summary, code, field, msg, manifest, output, note string, n int) *ops.Record {
	who := ops.Initiator{Kind: ops.Agent, ID: "U0AGENT", Name: note}
	rec := &ops.Record{Request: ops.Request{ID: id, Operation: op, Target: ops.Target{Cluster: "ml-prod-eks", Namespace: ns}, Initiator: who},
		Owner: who, Version: int64(n)}
	changes := make([]ops.Change, n%60)
	for i := range changes {
		changes[i] = ops.Change{Action: ops.ActionUpdate, Kind: "Deployment", Name: id, Fields: []ops.FieldChange{{Path: field, From: msg, To: note}}}
	}
	rec.Plan = &ops.Plan{Summary: summary, Changes: changes, Manifest: manifest, Warnings: []string{note, msg}, Hash: id,
		Risk: ops.Risk{Level: ops.RiskHigh, Reasons: []ops.Reason{{Level: ops.RiskHigh, Text: msg}}}}
	rec.Approval = ops.Approval{Required: n % 3, Approvers: field, Rule: note}
	details := make([]ops.Detail, n%25)
	for i := range details {
		details[i] = ops.Detail{Label: field, Value: msg}
	}
	rec.Result = &ops.Result{Summary: summary, Details: details, Output: output}
	for range n % 30 {
		rec.Errors = append(rec.Errors, &ops.Error{Code: ops.Code(code), Field: field, Message: msg, Next: note})
	}
	return rec
}
