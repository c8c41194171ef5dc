package ops

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// plainWords says values in brackets, so a test sees what went through Words.
type plainWords struct{}

func (plainWords) Value(s string) string  { return "[" + s + "]" }
func (plainWords) Text(s string) string   { return "'" + s + "'" }
func (plainWords) Target(t Target) string { return "[" + t.Cluster + "/" + t.Namespace + "]" }
func (plainWords) Strong(s string) string { return strings.ToUpper(s) }
func (plainWords) Count(n int64) string   { return fmt.Sprint(n) }
func (plainWords) Plural(n int64, one, many string) string {
	return fmt.Sprintf("%d %s", n, map[bool]string{true: one, false: many}[n == 1])
}
func (plainWords) Duration(d time.Duration) string { return d.String() }

func TestTemplateRender(t *testing.T) {
	rec := func(params Params, plan *Plan) *Record {
		return &Record{Request: Request{Operation: "scale-widget", Target: Target{Cluster: "c", Namespace: "n"}, Params: params}, Plan: plan}
	}
	tmpl := MustTemplate(`Scale {{.Name}} on {{.Target}}{{with .Change}} from {{.From}} to {{.To}}{{else}} to {{.Plural (.Int "count" 0) "pod" "pods"}}{{end}}` +
		`{{with .RunTime}}, up to {{.}}{{else}}{{with $.Duration "deadline"}}, until {{.}}{{end}}{{end}}`)
	oneField := &Plan{Changes: []Change{{Fields: []FieldChange{{Path: "spec.replicas", From: "2", To: "4"}}}}}
	bounded := &Plan{Cost: Cost{HourlyDelta: 2, Total: 3}}
	tests := []struct {
		name string
		rec  *Record
		want string
	}{
		{"asked", rec(Params{"name": "w", "count": int64(1)}, nil), "Scale [w] on [c/n] to 1 pod"},
		{"one field change", rec(Params{"name": "w", "count": int64(4)}, oneField), "Scale [w] on [c/n] from '2' to '4'"},
		{"bounded run", rec(Params{"name": "w"}, bounded), "Scale [w] on [c/n] to 0 pods, up to 1h30m0s"},
		{"deadline", rec(Params{"name": "w", "deadline": "90m"}, nil), "Scale [w] on [c/n] to 0 pods, until 1h30m0s"},
	}
	for _, tc := range tests {
		if got := tmpl.Render(tc.rec, plainWords{}); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSayHeadlineDefaultAndFailure(t *testing.T) {
	rec := &Record{Request: Request{Operation: "get-widget", Target: Target{Cluster: "c", Namespace: "n"}, Params: Params{"name": "w"}}}
	if got, want := (Spec{}).SayHeadline(rec, plainWords{}), "Get widget [w] on [c/n]"; got != want {
		t.Errorf("default = %q, want %q", got, want)
	}
	// A template that fails while executing (Facts has no Nope) says the default line, never half of one.
	broken := Spec{Headline: MustTemplate(`Widget {{.Name}} and {{.Nope}}`)}
	if got, want := broken.SayHeadline(rec, plainWords{}), "Get widget [w] on [c/n]"; got != want {
		t.Errorf("failing template = %q, want the default %q", got, want)
	}
}

func TestRecordChoices(t *testing.T) {
	human, agent := Initiator{Kind: Human, ID: "U1"}, Initiator{Kind: Agent, ID: "A1"}
	tests := []struct {
		phase Phase
		owner Initiator
		want  []Choice
	}{
		{PhaseAwaitingApproval, human, []Choice{ChoiceApprove, ChoiceDeny, ChoiceCancel}},
		{PhaseAwaitingApproval, agent, []Choice{ChoiceApprove, ChoiceDeny, ChoiceCancel, ChoiceStop, ChoiceTakeOver}},
		{PhaseReceived, human, []Choice{ChoiceCancel}},
		{PhasePlanned, human, []Choice{ChoiceCancel}},
		{PhaseApproved, agent, []Choice{ChoiceCancel}},
		{PhaseInterrupted, human, []Choice{ChoiceTakeOver, ChoiceResume, ChoiceStop}},
		{PhaseExecuting, human, nil},
		{PhaseSucceeded, agent, nil},
		{PhaseDenied, human, nil},
	}
	for _, tc := range tests {
		r := &Record{Phase: tc.phase, Owner: tc.owner}
		if got := r.Choices(); !slices.Equal(got, tc.want) {
			t.Errorf("%s owned by %s: %v, want %v", tc.phase, tc.owner.Kind, got, tc.want)
		}
	}
	// One approval to give, not critical, not over budget: a lead may approve it and allow similar ones.
	r := &Record{Phase: PhaseAwaitingApproval, Owner: human, Approval: Approval{Required: 1}}
	if got, want := r.Choices(), []Choice{ChoiceApprove, ChoiceDeny, ChoiceGrant, ChoiceCancel}; !slices.Equal(got, want) {
		t.Errorf("awaiting one approval: %v, want %v", got, want)
	}
	r.Approval.NoGrants = true
	if slices.Contains(r.Choices(), ChoiceGrant) {
		t.Error("a rule with grants: false offers a grant")
	}
}
