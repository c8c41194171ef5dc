package kube

import (
	"context"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// boundCalls gives every request of rc's clients a deadline of d, watches excepted: a hung API server then answers
// the caller with a timeout instead of holding it forever. rest.Config.Timeout would do it for plain calls too, but
// it also cuts every watch at d (it is the http.Client's timeout), which informers would see as a broken stream.
func boundCalls(rc *rest.Config, d time.Duration) {
	if d <= 0 {
		return
	}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &callDeadline{next: rt, d: d} })
}

// callDeadline is a RoundTripper that bounds each request, from sending it to reading the last byte of its answer.
type callDeadline struct {
	next http.RoundTripper
	d    time.Duration
}

func (c *callDeadline) RoundTrip(r *http.Request) (*http.Response, error) {
	if isWatch(r) {
		return c.next.RoundTrip(r)
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.d)
	resp, err := c.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// isWatch says whether r is a watch (?watch=true), which streams for as long as the watcher wants.
func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// cancelOnClose releases the request's deadline once its answer has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
