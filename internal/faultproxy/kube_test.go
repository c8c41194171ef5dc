package faultproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServer is a minimal upstream: ConfigMaps in memory, each write a new resourceVersion.
type apiServer struct {
	mu   sync.Mutex
	rv   int
	objs map[string]corev1.ConfigMap
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := callOf(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch c.Verb {
	case "create":
		var cm corev1.ConfigMap
		_ = json.NewDecoder(r.Body).Decode(&cm)
		if c.DryRun {
			_ = json.NewEncoder(w).Encode(cm)
			return
		}
		a.rv++
		cm.ResourceVersion, cm.Namespace = fmt.Sprint(a.rv), c.Namespace
		a.objs[cm.Name] = cm
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(cm)
	case "get":
		cm, ok := a.objs[c.Name]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
			return
		}
		_ = json.NewEncoder(w).Encode(cm)
	case "watch":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		a.mu.Unlock()
		<-r.Context().Done()
		a.mu.Lock()
	case "delete":
		if !c.DryRun {
			delete(a.objs, c.Name)
		}
		_ = json.NewEncoder(w).Encode(metav1.Status{Status: "Success"})
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func kubeProxy(t *testing.T) (*Kube, kubernetes.Interface, *apiServer) {
	t.Helper()
	api := &apiServer{objs: map[string]corev1.ConfigMap{}}
	up := httptest.NewServer(api)
	t.Cleanup(up.Close)
	k, err := NewKube(&rest.Config{Host: up.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: k.URL(), Timeout: 2 * time.Second, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return k, cs, api
}

// watchClient talks to the proxy without a client timeout: an http.Client's Timeout also ends a watch stream, and
// a test of how a watch ends must see it end only by the fault under test.
func watchClient(t *testing.T, k *Kube) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: k.URL(), ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// ended waits for a watch's result channel to close, failing on an event or after a deadline generous on a
// loaded machine.
func ended(t *testing.T, wi interface{ ResultChan() <-chan watch.Event }, what string) {
	t.Helper()
	select {
	case _, open := <-wi.ResultChan():
		if open {
			t.Fatalf("an event on a watch that %s", what)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the watch is still open 30 s after it %s", what)
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// Each answer reaches client-go as the API error it stands for, and none of those writes took effect.
func TestKubeAnswers(t *testing.T) {
	k, cs, api := kubeProxy(t)
	ctx := context.Background()
	cases := []struct {
		status int
		is     func(error) bool
	}{
		{http.StatusForbidden, apierrors.IsForbidden},
		{http.StatusConflict, apierrors.IsConflict},
		{http.StatusUnprocessableEntity, apierrors.IsInvalid},
		{http.StatusInternalServerError, apierrors.IsInternalError},
		{http.StatusServiceUnavailable, apierrors.IsServiceUnavailable},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("cm-%d", tc.status)
		k.Inject(Rule{Verb: "create", Resource: "configmaps", Name: "", Action: Answer, Status: tc.status, Times: 1})
		_, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap(name), metav1.CreateOptions{})
		if !tc.is(err) {
			t.Errorf("%d: client-go heard %v", tc.status, err)
		}
		if _, ok := api.objs[name]; ok {
			t.Errorf("%d: the refused create reached the server", tc.status)
		}
	}
}

// A 429 carries Retry-After, which client-go honours by retrying: the second try goes through once.
func TestKubeTooManyRequestsIsRetried(t *testing.T) {
	k, cs, _ := kubeProxy(t)
	hits := k.Inject(Rule{Verb: "create", Resource: "configmaps", Action: Answer, Status: http.StatusTooManyRequests, RetryAfter: 1, Times: 1})
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(context.Background(), configMap("busy"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after one 429: %v", err)
	}
	ws := k.Writes("configmaps", "ns", "")
	if hits() != 1 || len(ws) != 2 || ws[0].Status != 429 || !ws[1].Accepted() {
		t.Fatalf("hits %d, writes %+v: want one 429 then one accepted create", hits(), ws)
	}
}

// A write dropped after forwarding took effect; the client heard an error; the audit counts one effective write.
func TestKubeDropAfterTookEffect(t *testing.T) {
	k, cs, api := kubeProxy(t)
	k.Inject(Rule{Verb: "create", Resource: "configmaps", Action: DropAfter, Times: 1})
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(context.Background(), configMap("lost"), metav1.CreateOptions{}); err == nil {
		t.Fatal("a dropped create answered")
	}
	if _, ok := api.objs["lost"]; !ok {
		t.Fatalf("the dropped create never reached the server: %+v", k.Writes("configmaps", "ns", ""))
	}
	if n := Effective(k.Writes("configmaps", "ns", "")); n != 1 {
		t.Fatalf("%d effective writes, want 1", n)
	}
}

// Held requests end with the client's timeout; one held after forwarding took effect, one held before did not.
func TestKubeHoldBeforeAndAfter(t *testing.T) {
	k, cs, api := kubeProxy(t)
	ctx := context.Background()
	k.Inject(Rule{Verb: "create", Resource: "configmaps", Name: "", Action: HoldBefore, Times: 1})
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("before"), metav1.CreateOptions{}); err == nil {
		t.Fatal("a held create answered")
	}
	k.Inject(Rule{Verb: "create", Resource: "configmaps", Action: HoldAfter, Times: 1})
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("after"), metav1.CreateOptions{}); err == nil {
		t.Fatal("a held create answered")
	}
	if _, ok := api.objs["before"]; ok {
		t.Error("held before forwarding, yet it reached the server")
	}
	if _, ok := api.objs["after"]; !ok {
		t.Error("held after forwarding, yet it never reached the server")
	}
}

// Effective counts distinct resourceVersions: a write the server accepted without changing the object is not
// another effective one.
func TestEffective(t *testing.T) {
	ws := []Write{
		{Call: Call{Verb: "patch", DryRun: true}, Status: 200, ResourceVersion: "5"},
		{Call: Call{Verb: "patch"}, Status: 200, ResourceVersion: "6"},
		{Call: Call{Verb: "patch"}, Status: 200, ResourceVersion: "6"},
		{Call: Call{Verb: "patch"}, Status: 409},
		{Call: Call{Verb: "patch", Subresource: "status"}, Status: 200, ResourceVersion: "7"},
	}
	if n := Effective(ws); n != 1 {
		t.Fatalf("Effective = %d, want 1", n)
	}
}

// Dry runs pass a write rule untouched and never count as effective.
func TestKubeDryRunsPass(t *testing.T) {
	k, cs, _ := kubeProxy(t)
	k.Inject(Rule{Verb: "create", Resource: "configmaps", Action: Answer, Status: http.StatusForbidden})
	_, err := cs.CoreV1().ConfigMaps("ns").Create(context.Background(), configMap("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := Effective(k.Writes("configmaps", "ns", "")); n != 0 {
		t.Fatalf("a dry run counted as %d effective writes", n)
	}
}

// A dry-run delete carries dryRun in its body (DeleteOptions); the proxy sees it there.
func TestKubeDeleteDryRunPasses(t *testing.T) {
	k, cs, api := kubeProxy(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, configMap("keep"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.Inject(Rule{Verb: "delete", Resource: "configmaps", Action: Answer, Status: http.StatusForbidden})
	proto, err := kubernetes.NewForConfig(&rest.Config{Host: k.URL(), ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []kubernetes.Interface{cs, proto} {
		if err := c.CoreV1().ConfigMaps("ns").Delete(ctx, "keep", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("dry-run delete: %v", err)
		}
	}
	if err := cs.CoreV1().ConfigMaps("ns").Delete(ctx, "keep", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("delete: %v, want the injected 403", err)
	}
	if _, ok := api.objs["keep"]; !ok {
		t.Fatal("the object is gone")
	}
}

// A closed watch ends the client's result channel.
func TestKubeCloseWatch(t *testing.T) {
	k, _, _ := kubeProxy(t)
	hits := k.Inject(Rule{Verb: "watch", Resource: "configmaps", Action: CloseWatch, Times: 1})
	wi, err := watchClient(t, k).CoreV1().ConfigMaps("ns").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	ended(t, wi, "the rule closed")
	if n := hits(); n != 1 {
		t.Fatalf("the CloseWatch rule acted on %d watches, want 1", n)
	}
}

// CloseWatches ends the watches already being relayed, which a CloseWatch rule, acting on new ones, cannot.
func TestKubeCloseWatches(t *testing.T) {
	k, _, _ := kubeProxy(t)
	wi, err := watchClient(t, k).CoreV1().ConfigMaps("ns").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wi.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for k.CloseWatches("configmaps") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watch was never relayed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ended(t, wi, "CloseWatches closed")
}

func TestCallOf(t *testing.T) {
	cases := map[string]Call{
		"GET /api/v1/namespaces/ns/pods/p/log":                       {Verb: "get", Resource: "pods", Subresource: "log", Namespace: "ns", Name: "p"},
		"PATCH /apis/apps/v1/namespaces/ns/deployments/d?dryRun=All": {Verb: "patch", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d", DryRun: true},
		"GET /apis/batch/v1/namespaces/ns/jobs?watch=true":           {Verb: "watch", Group: "batch", Resource: "jobs", Namespace: "ns"},
		"DELETE /api/v1/namespaces/ns/persistentvolumeclaims/c":      {Verb: "delete", Resource: "persistentvolumeclaims", Namespace: "ns", Name: "c"},
		"GET /api/v1/nodes":       {Verb: "list", Resource: "nodes"},
		"POST /api/v1/namespaces": {Verb: "create", Resource: "namespaces"},
	}
	for line, want := range cases {
		var method, target string
		fmt.Sscan(line, &method, &target)
		r := httptest.NewRequest(method, target, nil)
		if got := callOf(r); got != want {
			t.Errorf("%s: %+v, want %+v", line, got, want)
		}
	}
}
