package fakeaws

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// FaultWhen says whether an injected fault strikes before the call takes effect or after.
type FaultWhen int

const (
	// FaultBefore refuses the call: nothing is applied.
	FaultBefore FaultWhen = iota
	// FaultAfter serves the call (applying it unless the fake refuses it), then answers with the fault instead of
	// the real answer, whatever it was: the answer is lost.
	FaultAfter
)

// Fault is a failure injected into one operation, the way a throttling AWS, a failing proxy or a lossy network
// shows it to a client.
type Fault struct {
	// Op is an Op constant (OpSageMakerUpdateCluster, ...).
	Op   string
	When FaultWhen
	// Status is the HTTP status of the error answer (e.g. 500, 400). Zero with Reset false answers normally:
	// the fault is only its Delay.
	Status int
	// Code is the AWS error code (e.g. "InternalFailure", "ThrottlingException", "ValidationException").
	Code    string
	Message string
	// Reset drops the connection instead of answering (no HTTP response at all).
	Reset bool
	// Delay holds the call this long before applying (FaultBefore) or before answering (FaultAfter). A client
	// that gives up during a FaultBefore delay leaves nothing applied; the apply of FaultAfter happened already.
	Delay time.Duration
	// Times is how many calls it applies to (0 means once); negative: every call until ClearFaults.
	Times int
}

// faults holds injected faults and per-operation call and apply counts.
type faults struct {
	mu      sync.Mutex
	pending map[string][]*armed
	calls   map[string]int
	applied map[string]int
}

type armed struct {
	remaining int // negative: until ClearFaults
	fault     Fault
}

func newFaults() *faults {
	return &faults{pending: map[string][]*armed{}, calls: map[string]int{}, applied: map[string]int{}}
}

// take counts a call to op and returns the fault it must suffer, if any. Faults queue per operation in the
// order they were injected.
func (f *faults) take(op string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	queue := f.pending[op]
	if len(queue) == 0 {
		return nil
	}
	head := queue[0]
	if head.remaining > 0 {
		head.remaining--
		if head.remaining == 0 {
			f.pending[op] = queue[1:]
		}
	}
	fault := head.fault
	return &fault
}

// apply counts a call of op that changed the fake's state; the handlers call it where they make the change.
func (f *faults) apply(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[op]++
}

// Inject arms a fault for the next f.Times calls of f.Op (once when Times is 0; every call until ClearFaults
// when negative). Faults of one operation fire in the order they were injected.
func (s *Server) Inject(f Fault) {
	times := f.Times
	if times == 0 {
		times = 1
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.pending[f.Op] = append(s.faults.pending[f.Op], &armed{remaining: times, fault: f})
}

// Fail makes the next `times` calls of op (one of the Op constants) answer with the given AWS error code,
// HTTP status and message instead of being served (a FaultBefore); a negative times fails every call until
// ClearFaults, zero does nothing. Examples: ("ThrottlingException", 400), which the SDK retries;
// ("AccessDeniedException", 403), which it does not.
func (s *Server) Fail(op string, times int, code string, status int, message string) {
	if times == 0 {
		return
	}
	s.Inject(Fault{Op: op, When: FaultBefore, Status: status, Code: code, Message: message, Times: times})
}

// ClearFaults drops every injected fault that has not fired yet.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.pending = map[string][]*armed{}
}

// Calls is how many authenticated requests for op (one of the Op constants) reached the server, including ones
// answered with an injected fault; each SDK retry counts as a call.
func (s *Server) Calls(op string) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.calls[op]
}

// Applied is how many calls of op took effect (changed the fake's state); only the writes count
// (UpdateCluster, CreateCluster, DeleteCluster, UpdateNodegroupConfig). A refused call, a call a FaultBefore
// struck and an EKS update repeated with a clientRequestToken already seen do not count; a call whose answer a
// FaultAfter replaced does.
func (s *Server) Applied(op string) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.applied[op]
}

// answer is how a served operation writes its outcome in its protocol.
type answer struct {
	ok  func(w http.ResponseWriter, out any)
	err func(w http.ResponseWriter, e *apiError)
}

// serveOp runs one authenticated call of op through its injected fault, if any: serve applies the call and
// returns its answer.
func (s *Server) serveOp(w http.ResponseWriter, r *http.Request, op string, serve func() (any, *apiError), a answer) {
	f := s.faults.take(op)
	if f == nil {
		out, aerr := serve()
		respond(w, a, out, aerr)
		return
	}
	if f.When == FaultBefore {
		if !s.hold(r, f.Delay) {
			return // the client gave up: like AWS, nothing is applied for a request that never got through
		}
		if f.Reset || f.Status != 0 {
			s.strike(w, f, a)
			return
		}
		out, aerr := serve()
		respond(w, a, out, aerr)
		return
	}
	out, aerr := serve()
	if !s.hold(r, f.Delay) {
		return // applied; the answer has nobody to go to
	}
	if f.Reset || f.Status != 0 {
		s.strike(w, f, a)
		return
	}
	respond(w, a, out, aerr)
}

func respond(w http.ResponseWriter, a answer, out any, aerr *apiError) {
	if aerr != nil {
		a.err(w, aerr)
		return
	}
	a.ok(w, out)
}

// hold waits d, or until the client goes away or the server closes; it reports whether the client is still there.
func (s *Server) hold(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	select {
	case <-s.clock.After(d):
		return r.Context().Err() == nil
	case <-r.Context().Done():
		return false
	case <-s.ctx.Done():
		return false
	}
}

// strike answers with the fault: the error it names, or a dropped connection.
func (s *Server) strike(w http.ResponseWriter, f *Fault, a answer) {
	if f.Reset {
		reset(w)
		return
	}
	a.err(w, &apiError{status: f.Status, code: f.Code, message: f.Message})
}

// reset closes the connection with a TCP RST, so the client reads no response at all.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fakeaws: the response writer cannot drop its connection")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}
