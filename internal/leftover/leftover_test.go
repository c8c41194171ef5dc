package leftover

import (
	"errors"
	"strings"
	"testing"
)

// TestAfter: a failed check turns a passing run into a failing one and says what it found; a clean one keeps the
// code of the tests.
func TestAfter(t *testing.T) {
	clean := Check{What: "nothing", Find: func() error { return nil }}
	dirty := Check{What: "control-plane leftovers after the run", Find: func() error { return errors.New("kwok pid 42") }}
	cases := []struct {
		name   string
		code   int
		checks []Check
		want   int
		out    string
	}{
		{"clean pass", 0, []Check{clean}, 0, ""},
		{"clean failure keeps its code", 2, []Check{clean}, 2, ""},
		{"a leftover fails a pass", 0, []Check{clean, dirty}, 1, "control-plane leftovers after the run:\nkwok pid 42\n"},
		{"no checks", 0, nil, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if got := After(&b, tc.code, tc.checks...); got != tc.want || b.String() != tc.out {
				t.Fatalf("After = %d, printed %q; want %d, %q", got, b.String(), tc.want, tc.out)
			}
		})
	}
}
