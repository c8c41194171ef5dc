package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Action is what the Kubernetes proxy does to a request a Rule matches.
type Action int

const (
	// Answer replies with Status (and Retry-After) without forwarding: the write never took effect.
	Answer Action = iota + 1
	// DropAfter forwards the request and then closes the connection instead of relaying the answer: the write
	// took effect, and the client cannot know.
	DropAfter
	// HoldBefore never forwards; it holds the request until the client gives up (or the proxy closes).
	HoldBefore
	// HoldAfter forwards the request, then holds the answer until the client gives up: it took effect.
	HoldAfter
	// CloseWatch forwards a watch and closes it after its first event, or at once when none comes within a second.
	CloseWatch
)

// Rule picks requests and says what to do to them. Empty fields match anything; dry runs are matched only when
// DryRun is set, so a rule about writes does not spoil planning.
type Rule struct {
	Verb, Resource, Subresource, Namespace, Name string
	DryRun                                       bool
	Action                                       Action
	// Status, RetryAfter (seconds) and Reason shape an Answer (a metav1.Status body).
	Status     int
	RetryAfter int
	Reason     string
	// Times is how many requests the rule takes before it is spent; 0 means until ClearRules.
	Times int
}

func (r Rule) matches(c Call) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	return eq(r.Verb, c.Verb) && eq(r.Resource, c.Resource) && eq(r.Subresource, c.Subresource) &&
		eq(r.Namespace, c.Namespace) && eq(r.Name, c.Name) && r.DryRun == c.DryRun
}

// Write is one mutating request the proxy forwarded, with what the server answered.
type Write struct {
	Call
	// Status is the server's HTTP status; 0 when the proxy never forwarded it.
	Status int
	// ResourceVersion and Generation are the object's, as the server answered (empty for a Status answer).
	ResourceVersion string
	Generation      int64
	// Fault is the action of the rule that matched it, if any.
	Fault Action
}

// Accepted says whether the server took the write (and it was no dry run).
func (w Write) Accepted() bool { return !w.DryRun && w.Status >= 200 && w.Status < 300 }

// Kube is an HTTP reverse proxy in front of a Kubernetes API server. Clients talk plain HTTP to URL without
// credentials; the proxy forwards with the upstream's own (its rest.Config).
type Kube struct {
	srv    *http.Server
	ln     net.Listener
	up     *url.URL
	client *http.Client
	ctx    context.Context
	stop   context.CancelFunc

	mu     sync.Mutex
	rules  []*liveRule
	writes []Write
	// watches are the watch streams being relayed, each with what ends it.
	watches map[*openWatch]struct{}
}

// openWatch is a watch stream being relayed.
type openWatch struct {
	resource string
	end      context.CancelFunc
}

type liveRule struct {
	Rule
	hits int
}

// NewKube listens on a free port of 127.0.0.1 and forwards to the API server of upstream.
func NewKube(upstream *rest.Config) (*Kube, error) {
	rt, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: the upstream's transport: %w", err)
	}
	u, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: upstream host %q: %w", upstream.Host, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	k := &Kube{ln: ln, up: u, client: &http.Client{Transport: rt}, watches: map[*openWatch]struct{}{}}
	k.ctx, k.stop = context.WithCancel(context.Background())
	k.srv = &http.Server{Handler: http.HandlerFunc(k.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = k.srv.Serve(ln) }()
	return k, nil
}

// URL is the proxy's base URL, what a kubeconfig's server names instead of the API server.
func (k *Kube) URL() string { return "http://" + k.ln.Addr().String() }

// Inject adds a rule; the first rule that matches a request, in the order added, acts on it. It returns a
// function that says how many requests the rule has acted on.
func (k *Kube) Inject(r Rule) (hits func() int) {
	lr := &liveRule{Rule: r}
	k.mu.Lock()
	k.rules = append(k.rules, lr)
	k.mu.Unlock()
	return func() int {
		k.mu.Lock()
		defer k.mu.Unlock()
		return lr.hits
	}
}

// CloseWatches ends every watch of resource being relayed now, as an API server ends a watch (a timeout, a
// restart): the stream closes cleanly, and the client must watch again. It returns how many it closed. Watches
// opened later are not affected; a CloseWatch rule closes those.
func (k *Kube) CloseWatches(resource string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for ow := range k.watches {
		if ow.resource == resource {
			ow.end()
			n++
		}
	}
	return n
}

// ClearRules removes every rule.
func (k *Kube) ClearRules() {
	k.mu.Lock()
	k.rules = nil
	k.mu.Unlock()
}

// Writes are the mutating requests about the object (resource, namespace, name), in order.
func (k *Kube) Writes(resource, namespace, name string) []Write {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Write
	for _, w := range k.writes {
		if w.Resource == resource && w.Namespace == namespace && w.Name == name {
			out = append(out, w)
		}
	}
	return out
}

// AllWrites are every mutating request the proxy saw, in order.
func (k *Kube) AllWrites() []Write {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Write(nil), k.writes...)
}

// Effective counts the writes of the object that the server accepted and that changed it: distinct
// resourceVersions among accepted writes (an apply that changes nothing keeps the object's resourceVersion).
func Effective(ws []Write) int {
	seen := map[string]bool{}
	for _, w := range ws {
		if w.Accepted() && w.Subresource == "" {
			seen[w.ResourceVersion] = true
		}
	}
	return len(seen)
}

// Close stops the proxy: held requests are let go and every connection is closed.
func (k *Kube) Close() error {
	k.stop()
	err := k.srv.Close()
	k.client.CloseIdleConnections()
	return err
}

// rule takes the first live rule that matches c (Action 0 when none does).
func (k *Kube) rule(c Call) Rule {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range k.rules {
		if (r.Times == 0 || r.hits < r.Times) && r.matches(c) {
			r.hits++
			return r.Rule
		}
	}
	return Rule{}
}

func (k *Kube) serve(w http.ResponseWriter, r *http.Request) {
	c := callOf(r)
	r0 := k.rule(c)
	act := r0.Action
	switch act {
	case Answer:
		k.record(c, act, r0.Status, nil)
		answer(w, r0)
		return
	case HoldBefore:
		k.record(c, act, 0, nil)
		k.hold(r.Context())
		return
	}
	if c.Verb == "watch" {
		ctx, end := context.WithCancel(r.Context())
		defer end()
		ow := &openWatch{resource: c.Resource, end: end}
		k.mu.Lock()
		k.watches[ow] = struct{}{}
		k.mu.Unlock()
		defer func() {
			k.mu.Lock()
			delete(k.watches, ow)
			k.mu.Unlock()
		}()
		r = r.WithContext(ctx)
	}
	resp, body, err := k.forward(r, c.Verb == "watch")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if c.Verb != "watch" {
		k.record(c, act, resp.StatusCode, body)
	}
	switch act {
	case DropAfter:
		hijackClose(w)
		return
	case HoldAfter:
		k.hold(r.Context())
		return
	}
	for key, vs := range resp.Header {
		w.Header()[key] = vs
	}
	w.WriteHeader(resp.StatusCode)
	if c.Verb == "watch" {
		k.relayWatch(w, resp.Body, act == CloseWatch)
		return
	}
	_, _ = w.Write(body)
}

// forward sends r upstream; unless stream is set, it reads the whole answer.
func (k *Kube) forward(r *http.Request, stream bool) (*http.Response, []byte, error) {
	u := *k.up
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	// A held or dropped request must still take effect: its upstream call does not end with the client's.
	ctx := context.WithoutCancel(r.Context())
	if stream {
		ctx = r.Context()
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), r.Body)
	if err != nil {
		return nil, nil, err
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	resp, err := k.client.Do(out)
	if err != nil {
		return nil, nil, err
	}
	if stream {
		return resp, nil, nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		resp.Body.Close()
		return nil, nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(nil))
	return resp, body, nil
}

func (k *Kube) record(c Call, act Action, status int, body []byte) {
	if !c.Mutating() {
		return
	}
	w := Write{Call: c, Status: status, Fault: act}
	w.ResourceVersion, w.Generation = objectMeta(body)
	k.mu.Lock()
	k.writes = append(k.writes, w)
	k.mu.Unlock()
}

// objectMeta reads the resourceVersion and generation of an object as the server sent it: protobuf or JSON for a
// built-in kind, JSON for a custom resource.
func objectMeta(body []byte) (string, int64) {
	if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			return m.GetResourceVersion(), m.GetGeneration()
		}
	}
	var v struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Generation      int64  `json:"generation"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &v) == nil {
		return v.Metadata.ResourceVersion, v.Metadata.Generation
	}
	return "", 0
}

func (k *Kube) hold(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-k.ctx.Done():
	}
}

// relayWatch copies a watch stream, flushing each event; with closeEarly it ends after the first event, or after
// a second without one.
func (k *Kube) relayWatch(w http.ResponseWriter, body io.ReadCloser, closeEarly bool) {
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	// An API server sends a watch's headers at once; a client's Watch returns on them, before any event.
	if fl != nil {
		fl.Flush()
	}
	if closeEarly {
		got := make(chan int, 1)
		go func() {
			n, _ := body.Read(buf)
			got <- n
		}()
		select {
		case n := <-got:
			_, _ = w.Write(buf[:n])
			hijackClose(w)
			return
		case <-time.After(time.Second):
		}
		hijackClose(w)
		_ = body.Close()
		<-got
		return
	}
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// answer writes the metav1.Status a real API server sends with that code.
func answer(w http.ResponseWriter, r Rule) {
	reason := r.Reason
	if reason == "" {
		reason = reasonOf(r.Status)
	}
	if r.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(r.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	body := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": fmt.Sprintf("faultproxy: injected %d %s", r.Status, reason), "reason": reason, "code": r.Status}
	if r.RetryAfter > 0 {
		body["details"] = map[string]any{"retryAfterSeconds": r.RetryAfter}
	}
	_ = json.NewEncoder(w).Encode(body)
}

func reasonOf(code int) string {
	switch code {
	case http.StatusTooManyRequests:
		return "TooManyRequests"
	case http.StatusForbidden:
		return "Forbidden"
	case http.StatusConflict:
		return "Conflict"
	case http.StatusUnprocessableEntity:
		return "Invalid"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	case http.StatusGatewayTimeout:
		return "Timeout"
	}
	return "InternalError"
}

// hijackClose closes the client's connection without an answer.
func hijackClose(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
