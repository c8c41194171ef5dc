// Package leftover is the TestMain of packages whose tests start goroutines, processes or listeners: it fails the
// run when a goroutine leaks (goleak) or when a check finds something the tests left behind.
package leftover

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Check looks, once every test is done, for something the tests must not leave behind.
type Check struct {
	// What names what is looked for, in the failure ("control-plane leftovers after the run").
	What string
	// Find returns what it found as an error, or nil when nothing is left.
	Find func() error
}

// ControlPlane is the check of internal/controlplane's processes and ports; the caller passes its Leftovers (this
// package cannot import controlplane, whose own tests use it).
func ControlPlane(leftovers func() error) Check {
	return Check{What: "control-plane leftovers after the run", Find: leftovers}
}

// Main runs the tests, then every check, and exits: non-zero when a test failed, a check found something or a
// goroutine leaked.
func Main(m *testing.M, checks ...Check) {
	MainAround(m, nil, checks...)
}

// Setup starts what every test of a package shares (a control plane, a built binary) and returns how to stop it.
// A Setup that fails fails the run before any test: a tier that needs its world never skips.
type Setup func() (stop func() error, err error)

// MainAround is Main for a package whose tests share what setup starts: it runs the tests between setup and its
// stop, then every check (after the stop, so a check sees what stopping left behind), and verifies that no
// goroutine leaked.
func MainAround(m *testing.M, setup Setup, checks ...Check) {
	goleak.VerifyTestMain(run{m, setup, checks, true})
}

// Around runs the tests between setup and its stop, then every check, and returns the exit code without looking
// for goroutines: for a package whose tests drive processes (bot replicas) and whose own goroutines are the fakes'.
func Around(m *testing.M, setup Setup, checks ...Check) int {
	return run{m, setup, checks, false}.Run()
}

type run struct {
	m      interface{ Run() int } // *testing.M
	setup  Setup
	checks []Check
	settle bool
}

func (r run) Run() int {
	code := r.between()
	if r.settle {
		settle(settleWithin)
	}
	return After(os.Stderr, code, r.checks...)
}

// between runs the tests between the setup and its stop. A failed setup runs no test and fails the run; the checks
// still look for what it may have left half-started.
func (r run) between() int {
	stop := func() error { return nil }
	if r.setup != nil {
		s, err := r.setup()
		if err != nil {
			fmt.Fprintln(os.Stderr, "set up the tests:", err)
			return 1
		}
		stop = s
	}
	code := r.m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop what the tests shared:", err)
		code = 1
	}
	return code
}

// settleWithin is how long Main lets goroutines that are on their way out finish before goleak looks. goleak
// itself waits about half a second; go-redis's background re-dial after a failed dial sleeps a second between
// tries and sees that its client was closed only when it wakes, so tests that stop Redis under a client leave one
// behind for up to a second after closing it. A goroutine still there after settleWithin is a leak.
const settleWithin = 10 * time.Second

// settle waits until goleak finds nothing, for at most within.
func settle(within time.Duration) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline) && goleak.Find() != nil; {
		time.Sleep(100 * time.Millisecond)
	}
}

// After runs every check after tests that ended with code, printing what each finds to w; it returns code, or 1
// when a check found something. For a TestMain that must stop what it started before checking.
func After(w io.Writer, code int, checks ...Check) int {
	for _, c := range checks {
		if err := c.Find(); err != nil {
			fmt.Fprintf(w, "%s:\n%v\n", c.What, err)
			code = 1
		}
	}
	return code
}

// Listening reports whether a socket listens on port on the loopback address or on every address, as the kernel
// lists them in /proc/net/tcp and /proc/net/tcp6. A port a leftover server would hold is listened on; a port that
// is only the local end of some connection (the kernel hands the same ephemeral range to clients, so another
// package's client may hold a port a finished test's server used) is not a leftover.
func Listening(port int) (bool, error) {
	inodes, err := listeners(port)
	return len(inodes) > 0, err
}

// ListenedByGroups reports whether port is listened on (loopback or every address) by a process in one of pgids, or
// by a process that cannot be told: go test runs packages side by side, and once a test freed a port the kernel may
// hand it to another package's server, whose listener, in a process group of its own, is not that test's leftover.
// The listener's process is found by the socket's inode among the open files of /proc/<pid>/fd.
func ListenedByGroups(port int, pgids []int) (bool, error) {
	inodes, err := listeners(port)
	if err != nil || len(inodes) == 0 {
		return false, err
	}
	want := map[string]bool{}
	for _, ino := range inodes {
		want["socket:["+ino+"]"] = true
	}
	fds, err := filepath.Glob("/proc/[0-9]*/fd/*")
	if err != nil {
		return true, nil
	}
	found := false
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err != nil || !want[link] {
			continue
		}
		found = true
		pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
		pgid, err := syscall.Getpgid(pid)
		if errors.Is(err, syscall.ESRCH) {
			continue // gone since: it holds nothing
		}
		if err != nil || slices.Contains(pgids, pgid) {
			return true, nil
		}
	}
	return !found, nil // nobody found: the owner cannot be told
}

// listeners returns the inodes of the sockets listening on port.
func listeners(port int) ([]string, error) {
	var inodes []string
	want := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" || !strings.HasSuffix(f[1], want) { // 0A: TCP_LISTEN
				continue
			}
			switch addr := strings.TrimSuffix(f[1], want); addr {
			case "0100007F", "00000000", // 127.0.0.1, 0.0.0.0
				"00000000000000000000000001000000", "00000000000000000000000000000000", // ::1, ::
				"0000000000000000FFFF00000100007F": // ::ffff:127.0.0.1
				ino := "?" // a line without its inode still says the port is listened on
				if len(f) > 9 {
					ino = f[9]
				}
				inodes = append(inodes, ino)
			}
		}
	}
	return inodes, nil
}
