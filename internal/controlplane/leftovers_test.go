package controlplane

import (
	"net"
	"strings"
	"syscall"
	"testing"
)

// A port the plane used and another process group listens on now (go test runs packages side by side, and the
// kernel hands a freed port to the next server that asks) is not the plane's leftover; a listener in one of the
// plane's process groups is.
func TestAPortTakenByAnotherProcessGroupIsNotALeftover(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if err := leftovers(nil, []int{port}); err != nil {
		t.Errorf("a listener of this test's own process group was reported as the plane's: %v", err)
	}
	own, err := syscall.Getpgid(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := leftovers([]int{own}, []int{port}); err == nil || !strings.Contains(err.Error(), "still listened on") {
		t.Errorf("a listener in one of the plane's process groups was not reported: %v", err)
	}
}
