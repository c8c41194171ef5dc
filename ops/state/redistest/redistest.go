package redistest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MissingServer is the failure message when redis-server is not installed.
const MissingServer = "redis-server not found: run `make test` (installs it) or `apt-get install redis-server`"

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 15 * time.Second

// Server is a redis-server process owned by one test.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	// argv is the command line after bin for a port.
	argv func(port int) []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error // receives the process's exit once
	logs *bytes.Buffer
}

// Start runs a fresh redis-server on a free port of 127.0.0.1 (no RDB, no AOF, its files in a temporary
// directory), waits until it answers PING, and stops it when the test ends. It never uses the machine's 6379.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartWith(tb)
}

// StartWith is Start with more redis-server options after the defaults (e.g. "--replicaof", "127.0.0.1", "7001").
func StartWith(tb testing.TB, options ...string) *Server {
	tb.Helper()
	return startProcess(tb, "redis-server", MissingServer, func(s *Server, port int) []string {
		return append(serverArgs(s.dir, port), options...)
	})
}

// serverArgs are the options every redis-server of a test runs with.
func serverArgs(dir string, port int) []string {
	// A replica's full sync starts at once, not after the default 5 s wait for more replicas to share it.
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "no", "--repl-diskless-sync-delay", "0"}
}

// startProcess runs the program name (redis-server or redis-sentinel) with argv's command line on a free port,
// waits for PING, and stops it when the test ends.
func startProcess(tb testing.TB, name, missing string, argv func(s *Server, port int) []string) *Server {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		tb.Fatal(missing)
		return nil
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	s.argv = func(port int) []string { return argv(s, port) }
	tb.Cleanup(s.Stop)
	// A free port can be taken between choosing it and binding it; try a few.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: choose a port: %v", err)
		}
		s.port = port
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	tb.Fatalf("redistest: start %s: %v", name, lastErr)
	return nil
}

// Shared returns a Redis URL and a key prefix unique to this test. With REDIS_URL set it is that server (tests
// share it, so the prefix keeps them apart); otherwise it starts a server for the test. Tests that stop Redis must
// use Start instead.
func Shared(tb testing.TB) (url, prefix string) {
	tb.Helper()
	prefix = "test-" + sanitize(tb.Name()) + "-" + randomHex(4)
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u, prefix
	}
	return Start(tb).URL(), prefix
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop kills the server and waits for it to exit, as a crash would. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// Restart starts the server again on the same port, empty (nothing is persisted), and waits for PING.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	var err error
	// The old socket may linger briefly; retry within the start deadline.
	deadline := time.Now().Add(startTimeout)
	for {
		if err = s.start(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		s.tb.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
	}
}

// start runs the process and waits for PING; on failure the process is gone.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logs := &bytes.Buffer{}
	cmd := exec.Command(s.bin, s.argv(s.port)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := waitPing(s.Addr(), done); err != nil {
		// A server that exited (its port taken meanwhile, say) was already waited for: its exit was read from done.
		if !errors.As(err, new(exitedError)) {
			_ = cmd.Process.Kill()
			<-done
		}
		return fmt.Errorf("%w; server output:\n%s", err, tail(logs.String(), 2000))
	}
	s.cmd, s.done, s.logs = cmd, done, logs
	return nil
}

// exitedError is waitPing's answer when the server exited before answering: what exited said is consumed.
type exitedError struct{ err error }

func (e exitedError) Error() string {
	return fmt.Sprintf("the server exited before answering PING: %v", e.err)
}

// waitPing polls the server with PING until it answers, it exits (exitedError), or the deadline passes.
func waitPing(addr string, exited <-chan error) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return exitedError{err}
		default:
		}
		if last = ping(addr); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no PONG from %s within %s: %w", addr, startTimeout, last)
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return errors.New("unexpected reply to PING: " + strings.TrimSpace(line))
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func sanitize(name string) string { return unsafeChars.ReplaceAllString(name, "_") }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
