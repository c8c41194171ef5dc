package kube

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The bound is for calls, not streams: a watch that sends nothing for longer than requestTimeout stays open, while
// a plain call that the server holds ends at the bound.
func TestWatchesAreNotBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
			_, _ = io.WriteString(w, "done")
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	const bound = 200 * time.Millisecond
	rc := &rest.Config{Host: srv.URL}
	boundCalls(rc, bound)
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if _, err := read("/api/v1/namespaces/ns/configmaps/held"); err == nil {
		t.Fatal("a held call answered; want it cut at the bound")
	}
	go func() { time.Sleep(5 * bound); close(release) }()
	if body, err := read("/api/v1/namespaces/ns/configmaps?watch=true"); err != nil || body != "done" {
		t.Fatalf("watch read %q, %v; want it open past the bound until the server ends it", body, err)
	}
}
