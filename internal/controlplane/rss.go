package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS returns the summed resident set size, in bytes, of the plane's running components,
// read from /proc/<pid>/status (VmRSS).
func (cp *ControlPlane) RSS() (int64, error) {
	var total int64
	for _, p := range cp.procs {
		if ok, _ := p.exited(); ok {
			continue
		}
		kb, err := vmRSS(p.pgid)
		if err != nil {
			return 0, fmt.Errorf("RSS of %s: %w", p.name, err)
		}
		total += kb * 1024
	}
	return total, nil
}

func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("open status: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", rest, err)
			}
			return kb, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read status: %w", err)
	}
	return 0, fmt.Errorf("no VmRSS line for pid %d", pid)
}
