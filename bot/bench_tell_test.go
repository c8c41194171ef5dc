package bot

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/hyperops/hyperops/internal/fakeslack"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// BenchmarkTellBehindFailingRequests: eight requests whose posts always fail (500) hold eight teller slots' worth
// of work; each iteration asks for a request in another channel and waits until its plan message is posted. The
// time per op is how long a healthy request waits to be told.
func BenchmarkTellBehindFailingRequests(b *testing.B) {
	const slots = 8
	h := startWith(b, harnessOptions{edit: bothChannels, tellers: engine.TellerOptions{Concurrency: slots}})
	h.srv.Inject(fakeslack.Fault{Method: "chat.postMessage", Channel: chOps, Status: http.StatusInternalServerError, Times: -1})
	for i := range slots {
		id := fmt.Sprintf("stuck-%d", i)
		h.slash(userAlice, chOps, "widget scale name="+id+" count=1 request-id="+id)
		h.waitPhase(id, ops.PhaseAwaitingApproval)
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("healthy-%d", i)
		h.slash(userBob, chApprove, "widget scale name="+id+" count=1 request-id="+id)
		h.waitFor("the plan of "+id, func(s fakeslack.Snapshot) bool { return planOf(s, chApprove, id) != nil })
	}
}
