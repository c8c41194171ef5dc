package controlplane

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"

	"github.com/hyperops/hyperops/internal/leftover"
)

// started records every process group and port this package ever used in this test
// binary, so Leftovers can prove at the end of a run that nothing survived.
var started struct {
	sync.Mutex
	pgids []int
	ports []int
}

func register(pgid int) {
	started.Lock()
	defer started.Unlock()
	started.pgids = append(started.pgids, pgid)
}

func registerPorts(ports ...int) {
	started.Lock()
	defer started.Unlock()
	started.ports = append(started.ports, ports...)
}

// Leftovers returns an error naming every process group started by this package that
// still has a live member, and every port it used that cannot be bound again. Call it
// after Stop (for example at the end of TestMain); nil means nothing was left behind.
func Leftovers() error {
	started.Lock()
	pgids := append([]int(nil), started.pgids...)
	ports := append([]int(nil), started.ports...)
	started.Unlock()
	return leftovers(pgids, ports)
}

func leftovers(pgids, ports []int) error {
	var errs []error
	for _, pgid := range pgids {
		if groupAlive(pgid) {
			errs = append(errs, fmt.Errorf("process group %d is still alive", pgid))
		}
	}
	for _, port := range ports {
		if err := portFree(port, pgids); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// groupAlive reports whether any process in the group exists (signal 0 probes without
// delivering anything).
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func portFree(port int, pgids []int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		// Only a listener is left behind: another package's client may hold the port as its local end.
		// Only a listener of ours is left behind: another package's client may hold the port as its local end, and
		// another package's server may listen on it since we freed it.
		if ours, lerr := leftover.ListenedByGroups(port, pgids); ours || lerr != nil {
			return fmt.Errorf("port %d is still listened on: %w", port, errors.Join(err, lerr))
		}
		return nil
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("release probe of port %d: %w", port, err)
	}
	return nil
}

// freePorts asks the kernel for n distinct unused loopback ports. They are released before
// the components bind them; a component that loses the race fails to start with a clear
// "address already in use" in its log.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
