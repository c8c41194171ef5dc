package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/hyperops/hyperops/ops"
)

func TestRegisterSpecs(t *testing.T) {
	e := newEnv(t, nil)
	want := []string{"create-storage", "delete-inference", "delete-storage", "deploy-inference", "get-cluster-status", "get-inference",
		"get-training-job", "list-storage", "list-training-jobs", "rollout-inference", "scale-inference", "stop-training-job",
		"submit-training-job", "verify-cluster"}
	got := e.cat.Names()
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("names = %v", got)
	}
	for _, s := range e.cat.Specs() {
		if s.Topic == "" || strings.ContainsAny(s.Topic+s.Verb, "/ =") || s.Summary == "" || s.Domain == "" {
			t.Errorf("%s: incomplete spec %+v", s.Name, s)
		}
		for _, p := range s.Params {
			if p.Help == "" {
				t.Errorf("%s: param %s has no help", s.Name, p.Name)
			}
		}
		if s.Mutates != (s.Lock != nil) {
			t.Errorf("%s: mutates=%v but lock=%v", s.Name, s.Mutates, s.Lock != nil)
		}
		if _, ok := mustLookup(t, e, s.Name).(ops.Observer); ok != s.Mutates {
			t.Errorf("%s: observer=%v, mutates=%v", s.Name, ok, s.Mutates)
		}
	}
}

func mustLookup(t *testing.T, e *env, name string) ops.Operation {
	op, err := e.cat.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func TestLockScopes(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		op   string
		ns   string
		want ops.LockScope
	}{
		{"submit-training-job", "", ops.LockScope{Cluster: testCluster, Namespace: testNS, Kind: "training", Name: "x"}},
		{"stop-training-job", "ml-research", ops.LockScope{Cluster: testCluster, Namespace: "ml-research", Kind: "training", Name: "x"}},
		{"scale-inference", "", ops.LockScope{Cluster: testCluster, Namespace: testNS, Kind: "inference", Name: "x"}},
		{"delete-storage", "", ops.LockScope{Cluster: testCluster, Namespace: testNS, Kind: "pvc", Name: "x"}},
		{"verify-cluster", "", ops.LockScope{Cluster: testCluster, Kind: "verify"}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			req := ops.Request{Operation: tt.op, Target: ops.Target{Cluster: testCluster, Namespace: tt.ns}, Params: ops.Params{"name": "x"}}
			if got := mustLookup(t, e, tt.op).Spec().Lock(req); got != tt.want {
				t.Fatalf("scope = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestImpersonation sends a plan through real HTTP to a recorder standing in for the API server, to show the
// headers the executor sends when the cluster is configured to impersonate.
func TestImpersonation(t *testing.T) {
	tests := []struct {
		kind  ops.InitiatorKind
		group string
	}{{ops.Human, "hyperops:humans"}, {ops.Agent, "hyperops:agents"}}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			var mu sync.Mutex
			var users, groups []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				users = append(users, r.Header.Get("Impersonate-User"))
				groups = append(groups, r.Header.Get("Impersonate-Group"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"jobs.batch is forbidden"}`))
			}))
			defer srv.Close()
			e := newEnv(t, nil, withConfig(func(c *clusterConfig) { c.Impersonate = true }))
			e.cs.clusters[testCluster].REST = &rest.Config{Host: srv.URL}
			req := request("submit-training-job", trainParams(map[string]any{"gpus": "0"}))
			req.Initiator = ops.Initiator{Kind: tt.kind, ID: "U0BOB"}
			op, err := e.prepare(t, req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = op.Plan(context.Background(), req)
			wantCode(t, err, ops.CodeNotAuthorized, "forbidden")
			mu.Lock()
			defer mu.Unlock()
			if len(users) == 0 || users[0] != "slack:U0BOB" || groups[0] != tt.group {
				t.Fatalf("users %v groups %v", users, groups)
			}
			srv.CloseClientConnections()
		})
	}
	t.Run("without a REST config", func(t *testing.T) {
		e := newEnv(t, nil, withConfig(func(c *clusterConfig) { c.Impersonate = true }))
		req := request("submit-training-job", trainParams(nil))
		op, err := e.prepare(t, req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = op.Plan(context.Background(), req)
		wantCode(t, err, ops.CodeClusterUnavailable, "impersonation")
	})
}
