package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hyperops/hyperops/internal/leftover"
)

// Replica is one bot process: `hyperops run -config FILE` with its own /readyz port and log file.
type Replica struct {
	// Name is the harness's name for it ("replica-0"); the bot picks its own engine replica name.
	Name string
	// Listen is the host:port of its /healthz, /readyz and /metrics.
	Listen string
	// MCP is the host:port of its MCP endpoint (path /mcp).
	MCP string
	// LogPath is where its stdout and stderr go.
	LogPath string

	cmd     *exec.Cmd
	pgid    int
	port    int
	done    chan struct{}
	exitErr error // set before done closes

	mu      sync.Mutex
	connIDs []string
}

// registry remembers every process group and port any replica used in this test binary, so Leftovers can prove
// at the end of the run that nothing survived.
var registry struct {
	sync.Mutex
	pgids []int
	ports []int
}

// startReplica runs bin as a replica. The child leads its own process group and is killed by the kernel if the
// test process dies first (Pdeathsig); env is its whole environment.
func startReplica(bin, configPath, name, dir string, env []string) (*Replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	mcpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Replica{Name: name, Listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port,
		MCP:     net.JoinHostPort("127.0.0.1", strconv.Itoa(mcpPort)),
		LogPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.OpenFile(r.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(bin, "run", "-config", configPath)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(env, "HYPEROPS_LISTEN="+r.Listen, "HYPEROPS_MCP_LISTEN="+r.MCP)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	r.cmd, r.pgid = cmd, cmd.Process.Pid
	registry.Lock()
	registry.pgids = append(registry.pgids, r.pgid)
	registry.ports = append(registry.ports, port, mcpPort)
	registry.Unlock()
	go func() {
		r.exitErr = cmd.Wait()
		_ = logFile.Close()
		close(r.done)
	}()
	return r, nil
}

// Exited reports whether the process has ended, and how.
func (r *Replica) Exited() (bool, error) {
	select {
	case <-r.done:
		return true, r.exitErr
	default:
		return false, nil
	}
}

// PID is the process id (and process group id) of the replica.
func (r *Replica) PID() int { return r.pgid }

// WaitReady polls /readyz until it answers 200 (Slack connected, Redis reachable), the process exits, or ctx ends;
// the error carries the last answer and the tail of the replica's log.
func (r *Replica) WaitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var last string
	for {
		if exited, err := r.Exited(); exited {
			return fmt.Errorf("%s exited before it was ready (%v); log tail:\n%s", r.Name, err, r.LogTail())
		}
		if last = r.probe(ctx, client); last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last /readyz: %s); log tail:\n%s", r.Name, ctx.Err(), last, r.LogTail())
		case <-ticker.C:
		}
	}
}

// probe returns "" when /readyz answers 200, else what went wrong.
func (r *Replica) probe(ctx context.Context, client *http.Client) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Listen+"/readyz", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return resp.Status + ": " + strings.TrimSpace(string(body))
	}
	return ""
}

// Kill ends the replica at once with SIGKILL, as a crash or an OOM kill would, and waits until it is gone.
func (r *Replica) Kill() error {
	if err := syscall.Kill(-r.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", r.Name, err)
	}
	<-r.done
	return nil
}

// Stop asks the replica to shut down (SIGTERM), waits up to grace, then kills it.
func (r *Replica) Stop(grace time.Duration) error {
	if exited, _ := r.Exited(); exited {
		return r.killGroup()
	}
	if err := syscall.Kill(-r.pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("terminate %s: %w", r.Name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
		if err := r.Kill(); err != nil {
			return err
		}
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", r.Name, grace)
	}
	return r.killGroup()
}

// killGroup kills anything the replica forked that outlived it.
func (r *Replica) killGroup() error {
	if err := syscall.Kill(-r.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s group: %w", r.Name, err)
	}
	return nil
}

// ConnIDs are the fake Slack Socket Mode connections this replica opened, as the harness saw them appear.
func (r *Replica) ConnIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.connIDs...)
}

func (r *Replica) addConn(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connIDs = append(r.connIDs, id)
}

// LogTail returns the last 8 KiB of the replica's log, for failure messages.
func (r *Replica) LogTail() string { return tailFile(r.LogPath, 8192) }

// Log returns the replica's whole log.
func (r *Replica) Log() string {
	b, err := os.ReadFile(r.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(info.Size()-n, 0)
	buf := make([]byte, info.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(read log: %v)", err)
	}
	return string(buf)
}

// Leftovers returns an error naming every replica process group that still has a live member and every replica
// port that cannot be bound again. Call it at the end of the run (TestMain); nil means nothing was left behind.
func Leftovers() error {
	registry.Lock()
	pgids := append([]int(nil), registry.pgids...)
	ports := append([]int(nil), registry.ports...)
	registry.Unlock()
	var errs []error
	for _, pgid := range pgids {
		if err := syscall.Kill(-pgid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			errs = append(errs, fmt.Errorf("bot process group %d is still alive", pgid))
		}
	}
	for _, port := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			// Only a listener of ours is left behind: another package's client may hold the port as its local end,
			// and another package's server may listen on it since we freed it.
			if ours, lerr := leftover.ListenedByGroups(port, pgids); ours || lerr != nil {
				errs = append(errs, fmt.Errorf("bot port %d is still listened on: %w", port, errors.Join(err, lerr)))
			}
			continue
		}
		_ = l.Close()
	}
	return errors.Join(errs...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("reserve a loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
