package faultproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// Call is what the Kubernetes proxy makes of one request: the API verb and the object it is about.
type Call struct {
	// Verb is the API verb: get, list, watch, create, update, patch, delete or deletecollection.
	Verb string
	// Group is the API group ("" for the core group).
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// DryRun is set for a server-side dry run (dryRun=All): it never takes effect.
	DryRun bool
}

// Mutating says whether the call asks the server to change something.
func (c Call) Mutating() bool {
	switch c.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// callOf reads the verb and object of a request to a Kubernetes API server from its method, path and query:
// /api/v1/namespaces/ns/pods/name/status or /apis/apps/v1/deployments.
func callOf(r *http.Request) Call {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var c Call
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		c.Group, parts = parts[1], parts[3:]
	default:
		return Call{Verb: strings.ToLower(r.Method)}
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		c.Namespace, parts = parts[1], parts[2:]
		if len(parts) == 0 {
			c.Resource, c.Name = "namespaces", c.Namespace
		}
	}
	if len(parts) > 0 {
		c.Resource = parts[0]
	}
	if len(parts) > 1 {
		c.Name = parts[1]
	}
	if len(parts) > 2 {
		c.Subresource = parts[2]
	}
	c.Verb = verbOf(r.Method, c.Name != "", r.URL.Query())
	c.DryRun = r.URL.Query().Get("dryRun") != "" || deleteDryRun(r)
	return c
}

// deleteDryRun reads a DELETE's body (its DeleteOptions, where client-go puts dryRun) and puts it back.
func deleteDryRun(r *http.Request) bool {
	if r.Method != http.MethodDelete || r.Body == nil {
		return false
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var opts metav1.DeleteOptions
	if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, &opts); err == nil {
		if o, ok := obj.(*metav1.DeleteOptions); ok {
			return len(o.DryRun) > 0
		}
	}
	return json.Unmarshal(body, &opts) == nil && len(opts.DryRun) > 0
}

func verbOf(method string, named bool, q url.Values) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(method)
}
