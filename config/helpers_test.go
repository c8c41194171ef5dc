package config

import (
	"errors"
	"strings"
	"testing"
)

// parseExample parses example.yaml with no Slack secrets in the environment.
func parseExample(t *testing.T) *Config {
	t.Helper()
	t.Setenv("SLACK_APP_TOKEN", "")
	t.Setenv("SLACK_BOT_TOKEN", "")
	cfg, err := Parse(Example, "example.yaml")
	if err != nil {
		t.Fatalf("example.yaml does not parse:\n%v", err)
	}
	return cfg
}

// problemsOf returns the Problems inside err, failing the test if err holds none.
func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v (%T) is not Problems", err, err)
	}
	return ps
}

// findProblem returns the problem at path, if any.
func findProblem(ps Problems, path string) (Problem, bool) {
	for _, p := range ps {
		if p.Path == path {
			return p, true
		}
	}
	return Problem{}, false
}

// parseProblem parses yaml as the file x.yaml and fails the test unless it is refused with a problem at path, on
// line, whose message contains msg; it returns every problem, and that one.
func parseProblem(t *testing.T, yaml, path string, line int, msg string) (Problems, Problem) {
	t.Helper()
	_, err := Parse([]byte(yaml), "x.yaml")
	ps := problemsOf(t, err)
	p, ok := findProblem(ps, path)
	if !ok {
		t.Fatalf("no problem at %s:\n%v", path, err)
	}
	if p.Line != line || !strings.Contains(p.Message, msg) {
		t.Errorf("problem = %+v, want line %d containing %q", p, line, msg)
	}
	return ps, p
}

// minimal is the smallest configuration that validates.
const minimal = `
slack:
  channels: [C0123OPS]
clusters:
  - name: dev
    namespaces: [ml]
`
