package ops

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var trainSpecs = []ParamSpec{
	{Name: "name", Kind: KindString, Required: true, Help: "job name"},
	{Name: "replicas", Kind: KindInt, Default: "1", Help: "pods"},
	{Name: "kind", Kind: KindString, Default: "job", Enum: []string{"job", "pytorchjob", "hyperpod"}, Help: "job kind"},
	{Name: "max-hours", Kind: KindDuration, Default: "24h", Help: "deadline"},
	{Name: "size", Kind: KindQuantity, Help: "volume size"},
	{Name: "command", Kind: KindList, Help: "argv"},
	{Name: "spot", Kind: KindBool, Help: "use spot"},
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name    string
		raw     map[string]any
		want    Params
		errCode Code
		errHas  []string
	}{
		{"slash strings with defaults", map[string]any{"name": "a", "replicas": "4", "command": `python train.py --lr "0.1 0.2"`},
			Params{"name": "a", "replicas": int64(4), "kind": "job", "max-hours": "24h0m0s", "command": []string{"python", "train.py", "--lr", "0.1 0.2"}}, "", nil},
		{"agent JSON values", map[string]any{"name": "a", "replicas": float64(2), "max-hours": float64(1.5), "command": []any{"x", "y"}, "size": "100Gi", "spot": true},
			Params{"name": "a", "replicas": int64(2), "kind": "job", "max-hours": "1h30m0s", "command": []string{"x", "y"}, "size": "100Gi", "spot": true}, "", nil},
		{"slash and JSON of one intent normalize alike", map[string]any{"name": "a", "replicas": "2", "max-hours": "90m"},
			Params{"name": "a", "replicas": int64(2), "kind": "job", "max-hours": "1h30m0s"}, "", nil},
		{"unknown argument suggests the closest", map[string]any{"name": "a", "replica": "2"}, nil, CodeInvalidArgument, []string{"replica", "did you mean replicas"}},
		{"missing required", map[string]any{"replicas": "2"}, nil, CodeInvalidArgument, []string{"name is required"}},
		{"not a number", map[string]any{"name": "a", "replicas": "four"}, nil, CodeInvalidArgument, []string{"whole number"}},
		{"fractional replicas", map[string]any{"name": "a", "replicas": float64(1.5)}, nil, CodeInvalidArgument, []string{"whole number"}},
		{"enum with suggestion", map[string]any{"name": "a", "kind": "pytorchjb"}, nil, CodeInvalidArgument, []string{"did you mean pytorchjob"}},
		{"bad quantity", map[string]any{"name": "a", "size": "lots"}, nil, CodeInvalidArgument, []string{"Kubernetes quantity"}},
		{"negative quantity", map[string]any{"name": "a", "size": "-1Gi"}, nil, CodeInvalidArgument, []string{"negative"}},
		{"zero duration", map[string]any{"name": "a", "max-hours": "0"}, nil, CodeInvalidArgument, []string{"positive"}},
		{"unterminated quote", map[string]any{"name": "a", "command": `echo "hi`}, nil, CodeInvalidArgument, []string{"unterminated"}},
		{"list of non-strings", map[string]any{"name": "a", "command": []any{"x", 1.0}}, nil, CodeInvalidArgument, []string{"command[1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(trainSpecs, tt.raw)
			if tt.errCode != "" {
				if err == nil {
					t.Fatalf("want %s, got %v", tt.errCode, got)
				}
				var e *Error
				if !errors.As(err, &e) || e.Code != tt.errCode {
					t.Fatalf("want code %s, got %v", tt.errCode, err)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestNormalizeReportsEveryProblem(t *testing.T) {
	_, err := Normalize(trainSpecs, map[string]any{"replicas": "x", "colour": "red"})
	var es Errors
	if !errors.As(err, &es) || len(es) != 3 {
		t.Fatalf("want 3 problems (colour, replicas, name), got %v", err)
	}
}

func TestSplitWordsNeverInterpretsShell(t *testing.T) {
	got, err := SplitWords(`sh -c 'rm -rf /; echo $HOME' | tee \"x\" > out`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sh", "-c", "rm -rf /; echo $HOME", "|", "tee", `"x"`, ">", "out"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestClosest(t *testing.T) {
	c := []string{"submit-training-job", "scale-inference", "get-capacity"}
	if got := Closest("submit-trainig-job", c); got != "submit-training-job" {
		t.Errorf("typo: got %q", got)
	}
	if got := Closest("completely-different", c); got != "" {
		t.Errorf("far: got %q, want none", got)
	}
}

func TestParamsAccessorsAfterJSONRoundTrip(t *testing.T) {
	rec := &Record{Request: Request{ID: "r", Params: Params{"replicas": int64(3), "command": []string{"a"}}}}
	c := rec.Clone()
	if n, ok := c.Request.Params.Int("replicas"); !ok || n != 3 {
		t.Fatalf("replicas after round trip = %d, %v", n, ok)
	}
	if l := c.Request.Params.List("command"); !reflect.DeepEqual(l, []string{"a"}) {
		t.Fatalf("command after round trip = %q", l)
	}
}
