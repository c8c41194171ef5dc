package redistest

import (
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if s.port == 6379 {
		t.Fatalf("started on the machine's default port 6379")
	}
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL() = %q, want a loopback redis:// URL", s.URL())
	}
	steps := []struct {
		name  string
		do    func()
		alive bool
	}{
		{"started", func() {}, true},
		{"stopped", s.Stop, false},
		{"stopped twice", s.Stop, false},
		{"restarted", s.Restart, true},
		{"restarted again", s.Restart, true},
	}
	for _, st := range steps {
		st.do()
		err := ping(s.Addr())
		if (err == nil) != st.alive {
			t.Fatalf("%s: PING error = %v, want alive=%v", st.name, err, st.alive)
		}
	}
}

func TestTwoServersGetDifferentPorts(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("both servers on %s", a.Addr())
	}
	a.Stop()
	if err := ping(b.Addr()); err != nil {
		t.Fatalf("stopping one server stopped the other: %v", err)
	}
}

// fatalRecorder stands in for *testing.T to observe a Fatal without failing the real test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingProgramFailsTheTest(t *testing.T) {
	cases := []struct {
		name  string
		start func(testing.TB) any
		want  string
	}{
		{"redis-server", func(tb testing.TB) any { return Start(tb) }, MissingServer},
		{"redis-sentinel", func(tb testing.TB) any { return StartSentinel(tb) }, MissingSentinel},
		{"redis-cli", func(tb testing.TB) any { return StartCluster(tb, 3, 1) }, MissingCli},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir())
			rec := &fatalRecorder{TB: t}
			done := make(chan bool)
			go func() {
				returned := false
				defer func() { done <- returned }()
				c.start(rec)
				returned = true
			}()
			if <-done {
				t.Fatalf("started without %s on PATH", c.name)
			}
			if rec.msg != c.want {
				t.Fatalf("fatal message = %q, want %q", rec.msg, c.want)
			}
		})
	}
}

func TestShared(t *testing.T) {
	cases := []struct {
		name     string
		redisURL string
		wantURL  func(string) bool
	}{
		{"own server without REDIS_URL", "", func(u string) bool {
			return strings.HasPrefix(u, "redis://127.0.0.1:") && ping(strings.TrimSuffix(strings.TrimPrefix(u, "redis://"), "/0")) == nil
		}},
		{"REDIS_URL when set", "redis://example.invalid:6390/2", func(u string) bool { return u == "redis://example.invalid:6390/2" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("REDIS_URL", c.redisURL)
			u1, p1 := Shared(t)
			_, p2 := Shared(t)
			if !c.wantURL(u1) {
				t.Fatalf("Shared URL = %q", u1)
			}
			if p1 == p2 || !strings.HasPrefix(p1, "test-TestShared") {
				t.Fatalf("prefixes %q and %q: want unique, named after the test", p1, p2)
			}
		})
	}
}

// A server that exits before answering (its port was taken between choosing and binding it, as happens when many
// tests start servers at once) is reported at once, so the next port is tried; waiting for its exit a second time
// hung the test until the package's timeout.
func TestStartOnATakenPortReportsTheExit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(MissingServer)
	}
	s := &Server{tb: t, bin: bin, dir: t.TempDir(), port: ln.Addr().(*net.TCPAddr).Port}
	s.argv = func(port int) []string { return serverArgs(s.dir, port) }
	started := make(chan error, 1)
	go func() { started <- s.start() }()
	select {
	case err := <-started:
		if err == nil || !strings.Contains(err.Error(), "exited before answering PING") {
			t.Fatalf("start on a taken port: %v, want the server's exit", err)
		}
	case <-time.After(2 * startTimeout):
		t.Fatalf("start on a taken port did not return within %s", 2*startTimeout)
	}
}
