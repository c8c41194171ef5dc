package charts

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// grant is one permission: verb on group/resource (with subresource, "pods/log"), in the allowed namespaces or
// cluster-wide.
type grant struct {
	Group, Resource, Verb string
	ClusterWide           bool
}

func (g grant) String() string {
	scope := "namespaced"
	if g.ClusterWide {
		scope = "cluster-wide"
	}
	group := g.Group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s/%s (%s)", g.Verb, group, g.Resource, scope)
}

// rbacOf collects the rules the chart grants its service account.
type rbacOf struct {
	roles        map[string][]rbacv1.PolicyRule // by namespace
	clusterRoles map[string][]rbacv1.PolicyRule // by name
}

func collectRBAC(t *testing.T, r rendered) rbacOf {
	t.Helper()
	out := rbacOf{roles: map[string][]rbacv1.PolicyRule{}, clusterRoles: map[string][]rbacv1.PolicyRule{}}
	for _, m := range r.find("Role") {
		role := m.Typed.(*rbacv1.Role)
		out.roles[role.Namespace] = append(out.roles[role.Namespace], role.Rules...)
	}
	for _, m := range r.find("ClusterRole") {
		cr := m.Typed.(*rbacv1.ClusterRole)
		out.clusterRoles[cr.Name] = cr.Rules
	}
	return out
}

func allows(rules []rbacv1.PolicyRule, g grant) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, g.Group) && slices.Contains(r.Resources, g.Resource) &&
			slices.Contains(r.Verbs, g.Verb) && len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}

// TestRBACIsLeastPrivilege checks the rules themselves: no wildcard, no Secrets, no RBAC objects or escalation verbs,
// cluster-wide access read-only, impersonation only when a cluster asks for it, Roles exactly in the right namespaces.
func TestRBACIsLeastPrivilege(t *testing.T) {
	cases := []struct {
		values      string
		namespaces  []string
		impersonate bool
	}{
		{"", []string{"ml-platform"}, false},
		{"all-on.yaml", []string{"ml-platform", "ml-research"}, true},
	}
	for _, tc := range cases {
		t.Run(orDefault(tc.values), func(t *testing.T) {
			r := mustRender(t, tc.values)
			rb := collectRBAC(t, r)
			var got []string
			for ns := range rb.roles {
				got = append(got, ns)
			}
			sort.Strings(got)
			if !slices.Equal(got, tc.namespaces) {
				t.Errorf("Roles in %v, want %v", got, tc.namespaces)
			}
			impersonating := false
			check := func(where string, rules []rbacv1.PolicyRule, clusterWide bool) {
				for _, rule := range rules {
					for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames} {
						if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
							t.Errorf("%s: wildcard in %+v", where, rule)
						}
					}
					if len(rule.NonResourceURLs) > 0 {
						t.Errorf("%s: non-resource URLs %v", where, rule.NonResourceURLs)
					}
					if slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "configmaps") {
						t.Errorf("%s: grants %v: HyperOps reads no Secrets or ConfigMaps through the API", where, rule.Resources)
					}
					if slices.Contains(rule.APIGroups, rbacv1.GroupName) {
						t.Errorf("%s: grants RBAC objects %v", where, rule.Resources)
					}
					for _, v := range rule.Verbs {
						switch v {
						case "bind", "escalate", "deletecollection", "update":
							t.Errorf("%s: verb %s is not used by any operation", where, v)
						case "impersonate":
							impersonating = true
							if !strings.HasSuffix(where, "-impersonate") {
								t.Errorf("%s: impersonate outside the impersonation ClusterRole", where)
							}
						case "get", "list", "watch":
						default:
							if clusterWide {
								t.Errorf("%s: cluster-wide verb %s; cluster-wide access is read-only", where, v)
							}
						}
					}
				}
			}
			for ns, rules := range rb.roles {
				check("Role in "+ns, rules, false)
			}
			for name, rules := range rb.clusterRoles {
				check("ClusterRole "+name, rules, true)
			}
			if impersonating != tc.impersonate {
				t.Errorf("impersonate granted = %v, want %v", impersonating, tc.impersonate)
			}
			for _, m := range r.find("ClusterRoleBinding") {
				crb := m.Typed.(*rbacv1.ClusterRoleBinding)
				if crb.RoleRef.Kind != "ClusterRole" || !strings.HasPrefix(crb.RoleRef.Name, m.Obj.GetName()) ||
					len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "ServiceAccount" {
					t.Errorf("ClusterRoleBinding %s binds %+v to %+v", crb.Name, crb.RoleRef, crb.Subjects)
				}
			}
		})
	}
}

// TestRBACMatchesCode scans the Kubernetes calls in the Go source (ops/..., bot/...) and checks both ways: every
// call is allowed by the chart's rules, and every resource the chart grants is used by some call.
func TestRBACMatchesCode(t *testing.T) {
	used, err := scanKubeCalls(repoPaths("ops", "bot"))
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatal("found no Kubernetes calls in ops/ and bot/: the scanner is broken")
	}
	rb := collectRBAC(t, mustRender(t, ""))
	var cluster []rbacv1.PolicyRule
	for _, rules := range rb.clusterRoles {
		cluster = append(cluster, rules...)
	}
	usedResources := map[string]bool{}
	for _, g := range used {
		usedResources[g.Group+"/"+g.Resource] = true
		ok := allows(cluster, g)
		if !g.ClusterWide && !ok {
			ok = true
			for _, rules := range rb.roles {
				ok = ok && allows(rules, g)
			}
		}
		if !ok {
			t.Errorf("the code needs %s; the chart does not grant it", g)
		}
	}
	all := slices.Concat(cluster)
	for _, rules := range rb.roles {
		all = append(all, rules...)
	}
	for _, rule := range all {
		for _, grp := range rule.APIGroups {
			for _, res := range rule.Resources {
				if !usedResources[grp+"/"+res] {
					t.Errorf("the chart grants %v on %s/%s, which no code uses", rule.Verbs, grp, res)
				}
			}
		}
	}
	t.Logf("%d distinct calls: %v", len(used), used)
}

func repoPaths(dirs ...string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = filepath.Join("..", d)
	}
	return out
}

// typedGroups maps a clientset accessor to its API group.
var typedGroups = map[string]string{"CoreV1": "", "AppsV1": "apps", "BatchV1": "batch", "PolicyV1": "policy"}

// methodVerbs maps client methods to RBAC verbs. Apply is a patch (and a create when the object is new).
var methodVerbs = map[string][]string{
	"Get": {"get"}, "List": {"list"}, "Watch": {"watch"}, "Create": {"create"}, "Update": {"update"},
	"UpdateStatus": {"update"}, "Patch": {"patch"}, "Apply": {"patch", "create"}, "Delete": {"delete"},
	"DeleteCollection": {"deletecollection"},
}

// genericVerbs are the wrappers in ops/kube that act on any of its Resource kinds.
var genericVerbs = map[string][]string{
	"getObject": {"get"}, "applyObject": {"patch", "create"}, "deleteObject": {"delete"}, "listObjects": {"list"},
}

var clusterScopedResources = map[string]bool{"nodes": true, "namespaces": false}

// scanKubeCalls parses the non-test Go files under roots and returns the permissions their Kubernetes calls need.
func scanKubeCalls(roots []string) ([]grant, error) {
	set := map[grant]bool{}
	var resources []grant // the Resource{GroupVersionResource{…}} kinds the generic wrappers act on
	var genericCalls []string
	files, consts, err := parseTree(roots)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		dynamicLits := map[*ast.CompositeLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				for _, g := range typedCall(x) {
					set[g] = true
				}
				for _, g := range dynamicCall(x, consts, dynamicLits) {
					set[g] = true
				}
				if id, ok := calleeName(x); ok && genericVerbs[id] != nil {
					genericCalls = append(genericCalls, id)
				}
			case *ast.CompositeLit:
				if dynamicLits[x] {
					return true // a dynamic call's own resource, not one of the generic wrappers' kinds
				}
				if g, ok := gvrLiteral(x, consts); ok {
					resources = append(resources, g)
				}
			}
			return true
		})
	}
	for _, call := range genericCalls {
		for _, r := range resources {
			for _, v := range genericVerbs[call] {
				set[grant{Group: r.Group, Resource: r.Resource, Verb: v}] = true
			}
		}
	}
	out := make([]grant, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// typedCall recognises x.CoreV1().Pods(ns).List(…) and x.CoreV1().Pods(ns).GetLogs(…).
func typedCall(call *ast.CallExpr) []grant {
	method, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	resCall, ok := method.X.(*ast.CallExpr)
	if !ok {
		return nil
	}
	resSel, ok := resCall.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	gvCall, ok := resSel.X.(*ast.CallExpr)
	if !ok {
		return nil
	}
	gvSel, ok := gvCall.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	group, ok := typedGroups[gvSel.Sel.Name]
	if !ok {
		return nil
	}
	resource := strings.ToLower(resSel.Sel.Name)
	clusterWide := clusterScopedResources[resource]
	if len(resCall.Args) == 1 {
		if lit, ok := resCall.Args[0].(*ast.BasicLit); ok && lit.Value == `""` {
			clusterWide = true
		}
	}
	if method.Sel.Name == "GetLogs" {
		return []grant{{Group: group, Resource: resource + "/log", Verb: "get", ClusterWide: clusterWide}}
	}
	var out []grant
	for _, v := range methodVerbs[method.Sel.Name] {
		out = append(out, grant{Group: group, Resource: resource, Verb: v, ClusterWide: clusterWide})
	}
	return out
}

// parseTree parses the non-test Go files under roots and collects their string constants by name (unqualified: the
// scanned packages do not reuse a constant's name for another value).
func parseTree(roots []string) ([]*ast.File, map[string]string, error) {
	var files []*ast.File
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return fmt.Errorf("parse %s: %w", path, err)
			}
			files = append(files, f)
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if v, ok := stringValue(vs.Values[i], nil); ok {
								consts[name.Name] = v
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return files, consts, nil
}

// stringValue is the value of a string literal, or of a constant of the scanned packages named by e.
func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[x.Name]
		return s, ok
	}
	return "", false
}

// dynamicCall recognises dc.Resource(schema.GroupVersionResource{…})[.Namespace(ns)].List(…): cluster-wide when the
// resource is cluster-scoped (no Namespace) or the namespace is metav1.NamespaceAll. It marks the literal it read.
func dynamicCall(call *ast.CallExpr, consts map[string]string, lits map[*ast.CompositeLit]bool) []grant {
	method, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || methodVerbs[method.Sel.Name] == nil {
		return nil
	}
	recv, ok := method.X.(*ast.CallExpr)
	if !ok {
		return nil
	}
	clusterWide := true
	if sel, ok := recv.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Namespace" && len(recv.Args) == 1 {
		ns, isSel := recv.Args[0].(*ast.SelectorExpr)
		clusterWide = isSel && ns.Sel.Name == "NamespaceAll"
		if recv, ok = sel.X.(*ast.CallExpr); !ok {
			return nil
		}
	}
	sel, ok := recv.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Resource" || len(recv.Args) != 1 {
		return nil
	}
	lit, ok := recv.Args[0].(*ast.CompositeLit)
	if !ok {
		return nil
	}
	g, ok := gvrLiteral(lit, consts)
	if !ok {
		return nil
	}
	lits[lit] = true
	var out []grant
	for _, v := range methodVerbs[method.Sel.Name] {
		out = append(out, grant{Group: g.Group, Resource: g.Resource, Verb: v, ClusterWide: clusterWide})
	}
	return out
}

func calleeName(call *ast.CallExpr) (string, bool) {
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name, true
	case *ast.Ident:
		return f.Name, true
	}
	return "", false
}

// gvrLiteral reads schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, where a value may
// also be a constant of the scanned packages.
func gvrLiteral(lit *ast.CompositeLit, consts map[string]string) (grant, bool) {
	sel, ok := lit.Type.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "GroupVersionResource" {
		return grant{}, false
	}
	var g grant
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, _ := kv.Key.(*ast.Ident)
		if key == nil {
			continue
		}
		s, ok := stringValue(kv.Value, consts)
		if !ok {
			continue
		}
		switch key.Name {
		case "Group":
			g.Group = s
		case "Resource":
			g.Resource = s
		}
	}
	return g, g.Resource != ""
}
