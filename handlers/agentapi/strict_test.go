package agentapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/ops"
)

// An agent's JSON is one object, each key once: anything else is refused naming the key, never guessed at.
func TestDecodeRefusesAmbiguousJSON(t *testing.T) {
	cat := testCatalog()
	tests := []struct {
		name, raw string
		field     string
		has       string
	}{
		{"trailing brackets", `{"operation":"get-request","controls":{"requestId":"r"}}}]]`, "", `text after the JSON object at byte 56: "}]]"`},
		{"trailing object", `{"operation":"get-request","controls":{"requestId":"r"}} {"operation":"delete-storage"}`, "", "text after the JSON object"},
		{"trailing text", "{\"operation\":\"get-request\",\"controls\":{\"requestId\":\"r\"}}\nthanks!", "", `"thanks!"`},
		{"duplicate top-level key", `{"operation":"get-request","operation":"delete-storage","controls":{"requestId":"r"}}`, "operation", "key operation is given twice"},
		{"duplicate nested key", `{"operation":"submit-training-job","target":{"cluster":"dev","cluster":"prod"}}`, "target.cluster", "given twice"},
		{"duplicate control", `{"operation":"submit-training-job","controls":{"dryRun":true,"dryRun":false}}`, "controls.dryRun", "given twice"},
		{"duplicate in an array element", `{"operation":"submit-training-job","workload":{"name":"j","command":[{"a":1,"a":2}]}}`, "workload.command[0].a", "given twice"},
		{"one parameter in two spellings", `{"operation":"submit-training-job","workload":{"name":"j","image":"i","maxHours":2,"max-hours":72}}`, "workload.maxHours", "name the same parameter max-hours"},
		{"too deep", `{"operation":"submit-training-job","workload":{"name":"j","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`, "workload.x" + strings.Repeat("[0]", 14), "nests deeper than 16 levels"},
		{"unclosed", `{"operation":"get-request"`, "", "ends before the object is closed"},
		{"an array", `[{"operation":"get-request"}]`, "", "not a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.raw), cat)
			var e *ops.Error
			if !errors.As(err, &e) || e.Code != ops.CodeInvalidArgument || e.Field != tc.field || e.Next == "" {
				t.Fatalf("err = %v, want E_INVALID_ARGUMENT on %q with a next step", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("err %q lacks %q", err, tc.has)
			}
		})
	}
}

// 10,000 unknown workload fields come back as the first 20 problems and a count of the rest.
func TestDecodeCapsProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"operation":"submit-training-job","workload":{"name":"j"`)
	for i := range 10000 {
		fmt.Fprintf(&b, `,"field%05d%s":1`, i, strings.Repeat("x", 200))
	}
	b.WriteString(`}}`)
	_, err := Decode([]byte(b.String()), testCatalog())
	var es ops.Errors
	if !errors.As(err, &es) || len(es) != ops.MaxErrors+1 {
		t.Fatalf("want %d entries, got %d: %.300v", ops.MaxErrors+1, len(es), err)
	}
	if got := es[ops.MaxErrors].Message; got != "…and 9980 more problems" {
		t.Fatalf("last entry = %q", got)
	}
	for _, e := range es {
		if len([]rune(e.Field)) > 80 {
			t.Fatalf("field %q repeats the whole key", e.Field)
		}
	}
}
