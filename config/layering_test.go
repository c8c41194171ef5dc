package config_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hyperops/hyperops/"

// The imports that must not exist, tests included: the configuration is read by every package, so it imports
// none of them (config/... only); bot/schedule posts reports for the bot, and the handlers reach it through an
// interface of their own, so it does not import them.
func TestImportsRunDownward(t *testing.T) {
	rules := []struct {
		pkgs string
		// allowed reports whether a package of this module may be among pkgs' dependencies.
		allowed func(pkg string) bool
		rule    string
	}{
		{"./config/...", func(p string) bool { return p == "config" || strings.HasPrefix(p, "config/") },
			"config imports only config/…: parsing what configuration names (config/endpoint) lives under it"},
		{"./bot/schedule/...", func(p string) bool { return p != "handlers" && !strings.HasPrefix(p, "handlers/") },
			"bot/schedule does not import handlers: the handlers' Reporter is an interface defined where it is used"},
	}
	for _, r := range rules {
		for _, dep := range moduleDeps(t, r.pkgs) {
			if !r.allowed(dep) {
				t.Errorf("%s depends on %s: %s", r.pkgs, dep, r.rule)
			}
		}
	}
}

// The clients of other modules that must not be pulled in, tests included: every package imports config, the
// handlers among them, so a client config pulled in would be in all of them.
func TestConfigPullsInNoClient(t *testing.T) {
	rules := []struct {
		pkgs      string
		forbidden []string // import path prefixes
		rule      string
	}{
		{"./config/...", []string{"github.com/redis/go-redis", "k8s.io/client-go"},
			"config pulls in no Redis or Kubernetes client: config/endpoint reads a Redis URL into data, and ops/state " +
				"builds go-redis's options from it and checks the client options (state.CheckEndpoint)"},
	}
	for _, r := range rules {
		deps := goList(t, r.pkgs, "{{.ImportPath}}")
		for _, prefix := range r.forbidden {
			var found []string
			for _, dep := range deps {
				if (dep == prefix || strings.HasPrefix(dep, prefix+"/")) && !slices.Contains(found, dep) {
					found = append(found, dep)
				}
			}
			if len(found) > 0 {
				t.Errorf("%s depends on %s: %s", r.pkgs, strings.Join(found, ", "), r.rule)
			}
		}
	}
}

// moduleDeps lists the packages of this module (relative to it) that pkgs and their tests are built from.
func moduleDeps(t *testing.T, pkgs string) []string {
	t.Helper()
	var deps []string
	for _, p := range goList(t, pkgs, "{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}") {
		p = strings.TrimPrefix(p, module)
		if !slices.Contains(deps, p) {
			deps = append(deps, p)
		}
	}
	if len(deps) == 0 {
		t.Fatalf("go list %s listed no package of this module", pkgs)
	}
	return deps
}

// goList lists, with format, the packages pkgs and their tests are built from; a package built for a test is named
// as the package itself.
func goList(t *testing.T, pkgs, format string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", format, pkgs)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkgs, err, out)
	}
	var deps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		p, _, _ := strings.Cut(line, " ") // "pkg [pkg.test]": the package as built for a test
		deps = append(deps, strings.TrimSuffix(strings.TrimSuffix(p, ".test"), "_test"))
	}
	if len(deps) == 0 {
		t.Fatalf("go list %s listed no package", pkgs)
	}
	return deps
}
