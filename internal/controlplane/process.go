package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one running control-plane component. Its own goroutine waits for the
// child, so exit is observed (done closes) without anyone polling.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	pgid    int
	done    chan struct{}
	exitErr error // set before done closes
}

// startProcess runs bin with args, stdout and stderr appended to dir/<name>.log. The child
// leads its own process group, so Stop reaches anything it forks, and is killed by the
// kernel if this test process dies first. (Pdeathsig fires when the forking OS thread
// exits; the Go runtime only retires threads of goroutines that die while locked to one,
// which this package never does.)
func startProcess(name, bin string, args []string, dir string, env []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	register(p.pgid)
	go func() {
		p.exitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.exitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the whole process group, waits up to grace, then SIGKILLs the group
// and waits for the exit to be reaped.
func (p *process) stop(grace time.Duration) error {
	if ok, _ := p.exited(); ok {
		return p.killGroupLeftovers()
	}
	if err := syscall.Kill(-p.pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("terminate %s: %w", p.name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		if err := syscall.Kill(-p.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill %s: %w", p.name, err)
		}
		<-p.done
	}
	return p.killGroupLeftovers()
}

// killGroupLeftovers kills any descendant that outlived the group leader.
func (p *process) killGroupLeftovers() error {
	if err := syscall.Kill(-p.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s group: %w", p.name, err)
	}
	return nil
}

// logTailBytes is how much of a failing component's log a start error carries.
const logTailBytes = 4096

// tail returns the end of the component's log, for error messages.
func (p *process) tail() string {
	return tailFile(p.logPath, logTailBytes)
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
	if off > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	return string(buf)
}
