package opstest

import (
	"testing"
	"time"
)

// Eventually polls cond every few milliseconds until it holds, failing the test if it does not within the given
// time: for what another goroutine or process does, where no channel says when it is done.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%s)", what, within)
		}
		<-tick.C
	}
}
