package handlers

import (
	"context"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// fakeOp is a catalog entry with a spec only: decoding and parsing never plan or execute.
type fakeOp struct{ spec ops.Spec }

func (o fakeOp) Spec() ops.Spec                                      { return o.spec }
func (fakeOp) Validate(context.Context, *ops.Request) error          { return nil }
func (fakeOp) Plan(context.Context, *ops.Request) (*ops.Plan, error) { return &ops.Plan{}, nil }
func (fakeOp) Execute(context.Context, *ops.Request, *ops.Plan, ops.Execution) (*ops.Result, error) {
	return &ops.Result{}, nil
}

func testCatalog() *ops.Catalog {
	c := ops.NewCatalog()
	for _, s := range testSpecs() {
		c.Register(fakeOp{s})
	}
	return c
}

func TestExtractJSON(t *testing.T) {
	tests := []struct {
		text string
		want string
		ok   bool
	}{
		{`{"operation":"x"}`, `{"operation":"x"}`, true},
		{"please run:\n```json\n{\"operation\":\"x\"}\n```\nthanks", `{"operation":"x"}`, true},
		{"status", "", false},
		{`{"a":"&lt;b&gt;"}`, `{"a":"<b>"}`, true},
	}
	for _, tc := range tests {
		got, ok := ExtractJSON(tc.text)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("ExtractJSON(%q) = %q %v, want %q %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}
