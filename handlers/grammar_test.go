package handlers

import (
	"errors"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/aws"
)

func testSpecs() []ops.Spec {
	return sayAsReal([]ops.Spec{
		{Name: "get-cluster-status", Topic: "status", Summary: "cluster status"},
		{Name: "submit-training-job", Topic: "train", Verb: "submit", Summary: "submit a training job", Mutates: true,
			Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "job name"}, {Name: "image", Kind: ops.KindString, Required: true, Help: "image"},
				{Name: "replicas", Kind: ops.KindInt, Default: "1", Help: "replicas"}, {Name: "command", Kind: ops.KindList, Help: "argv"},
				{Name: "max-hours", Kind: ops.KindDuration, Help: "hours"}}},
		{Name: "stop-training-job", Topic: "train", Verb: "stop", Summary: "stop a job", Mutates: true, Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "job"}}},
		{Name: "delete-storage", Topic: "storage", Verb: "delete", Summary: "delete a claim", Mutates: true, Baseline: ops.RiskCritical,
			Params: []ops.ParamSpec{{Name: "name", Kind: ops.KindString, Required: true, Help: "claim"}}},
	})
}

func TestParse(t *testing.T) {
	g := NewGrammar("/hp", testSpecs())
	tests := []struct {
		name, text string
		op         string
		args       map[string]string
		dryRun     bool
		cluster    string
		requestID  string
		help       bool
		helpTopic  string
	}{
		{name: "empty is help", text: "", help: true},
		{name: "help topic", text: "help train", help: true, helpTopic: "train"},
		{name: "topic help", text: "train help", help: true, helpTopic: "train"},
		{name: "verbless", text: "status cluster=a", op: "get-cluster-status", cluster: "a", args: map[string]string{}},
		{name: "quoted command", text: `train submit name=j image=i command="python train.py --lr 0.1" dry-run request-id=r1`,
			op: "submit-training-job", args: map[string]string{"name": "j", "image": "i", "command": "python train.py --lr 0.1"}, dryRun: true, requestID: "r1"},
		{name: "dry-run=false", text: "train stop name=j dry-run=false", op: "stop-training-job", args: map[string]string{"name": "j"}},
		{name: "requests pending", text: "requests pending", args: map[string]string{}},
		{name: "watch keeps target args", text: "watch job=train-a kind=pytorchjob cluster=c namespace=ml",
			args: map[string]string{"job": "train-a", "kind": "pytorchjob", "cluster": "c", "namespace": "ml"}},
		{name: "unwatch", text: "unwatch job=train-a", args: map[string]string{"job": "train-a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := g.Parse(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Help != tc.help || inv.HelpTopic != tc.helpTopic {
				t.Fatalf("help = %v %q", inv.Help, inv.HelpTopic)
			}
			if tc.help {
				return
			}
			if tc.op != "" && (inv.Command.Spec == nil || inv.Command.Spec.Name != tc.op) {
				t.Fatalf("command = %+v, want %s", inv.Command, tc.op)
			}
			if inv.DryRun != tc.dryRun || inv.Cluster != tc.cluster || inv.RequestID != tc.requestID {
				t.Errorf("common = %v %q %q", inv.DryRun, inv.Cluster, inv.RequestID)
			}
			if len(inv.Args) != len(tc.args) {
				t.Errorf("args = %v, want %v", inv.Args, tc.args)
			}
			for k, v := range tc.args {
				if inv.Args[k] != v {
					t.Errorf("%s = %q, want %q", k, inv.Args[k], v)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	g := NewGrammar("/hp", testSpecs())
	tests := []struct {
		text, field, suggest string
		code                 ops.Code
	}{
		{"trian submit", "topic", "did you mean train?", ops.CodeUnknownOperation},
		{"train sumbit name=x", "verb", "did you mean submit?", ops.CodeInvalidArgument},
		{"train", "verb", "takes one of: stop, submit", ops.CodeInvalidArgument},
		{"train submit name=j image=i replcas=2", "replcas", "did you mean replicas=?", ops.CodeInvalidArgument},
		{"train submit name=j image=i namespce=x", "namespce", "did you mean namespace=?", ops.CodeInvalidArgument},
		{"train submit name=j image=i dryrun", "dryrun", "did you mean dry-run", ops.CodeInvalidArgument},
		{`train submit name=j command="python`, "", "close the quote", ops.CodeInvalidArgument},
		{"train stop name=a name=b", "name", "once", ops.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			_, err := g.Parse(tc.text)
			var e *ops.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *ops.Error", err)
			}
			if e.Code != tc.code || e.Field != tc.field || !strings.Contains(e.Next, tc.suggest) {
				t.Errorf("err = %+v, want %s on %q suggesting %q", e, tc.code, tc.field, tc.suggest)
			}
		})
	}
}

func TestUsageGenerated(t *testing.T) {
	g := NewGrammar("/hp", testSpecs())
	c := g.find("train", "submit")
	if c == nil || c.Usage != "/hp train submit name= image= [replicas=] [command=] [max-hours=]" {
		t.Fatalf("usage = %+v", c)
	}
}

// The node recovery commands come from the real specs' Topic and Verb: "/hp nodes reboot|replace group= …".
func TestParseNodeRecovery(t *testing.T) {
	g := NewGrammar("/hp", opSpecs.Specs())
	for text, op := range map[string]string{
		"nodes reboot group=gpu nodes=i-0a1,i-0b2 cluster=ml-prod": aws.OpRebootNodes,
		"nodes replace group=gpu faulty=true cluster=ml-prod":      aws.OpReplaceNodes,
	} {
		inv, err := g.Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if inv.Command == nil || inv.Command.Spec == nil || inv.Command.Spec.Name != op || inv.Cluster != "ml-prod" || inv.Args["group"] != "gpu" {
			t.Errorf("%s: %+v args %v, want %s on ml-prod", text, inv.Command, inv.Args, op)
		}
	}
}
