package leftover

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// tests stands in for *testing.M: it records that the tests ran and ends with code.
type tests struct {
	code int
	ran  *bool
}

func (t tests) Run() int { *t.ran = true; return t.code }

// TestAround: the tests run between setup and its stop; a failed setup fails the run without running them, a
// failed stop fails a passing run, and the checks come after the stop.
func TestAround(t *testing.T) {
	var order []string
	up := func(stopErr error) Setup {
		return func() (func() error, error) {
			order = append(order, "setup")
			return func() error { order = append(order, "stop"); return stopErr }, nil
		}
	}
	failing := func() (func() error, error) { return nil, errors.New("no kube-apiserver in .cache/bin") }
	check := Check{What: "leftovers", Find: func() error { order = append(order, "check"); return nil }}
	cases := []struct {
		name  string
		setup Setup
		code  int
		want  int
		ran   bool
		order string
	}{
		{"pass", up(nil), 0, 0, true, "setup stop check"},
		{"failed tests keep their code", up(nil), 2, 2, true, "setup stop check"},
		{"a failed stop fails a pass", up(errors.New("etcd would not stop")), 0, 1, true, "setup stop check"},
		{"a failed setup runs no test", failing, 0, 1, false, "check"},
		{"no setup", nil, 0, 0, true, "check"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			order = nil
			ran := false
			r := run{m: tests{tc.code, &ran}, setup: tc.setup, checks: []Check{check}}
			if got := r.Run(); got != tc.want || ran != tc.ran || strings.Join(order, " ") != tc.order {
				t.Fatalf("Run = %d, tests ran %t, order %q; want %d, %t, %q", got, ran, strings.Join(order, " "), tc.want, tc.ran, tc.order)
			}
		})
	}
}

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

// TestListening: a port a server listens on is listened on; the local end of a client's connection, which the
// kernel draws from the same ephemeral range as a test server's port, is not, nor is a port nobody holds. A bot's
// port taken by another package's client after the bot exited was reported as a leftover and failed a whole run.
func TestListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	server := l.Addr().(*net.TCPAddr).Port
	if got, err := Listening(server); err != nil || !got {
		t.Fatalf("Listening(%d) of a listener = %v, %v; want true", server, got, err)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := c.LocalAddr().(*net.TCPAddr).Port
	if _, err := net.Listen("tcp", c.LocalAddr().String()); err == nil {
		t.Fatalf("the client's local port %d could be bound: the test's premise is wrong", client)
	}
	if got, err := Listening(client); err != nil || got {
		t.Fatalf("Listening(%d) of a client's local port = %v, %v; want false", client, got, err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	if got, err := Listening(port); err != nil || got {
		t.Fatalf("Listening(%d) of a closed port = %v, %v; want false", port, got, err)
	}
}
