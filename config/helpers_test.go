package config

import (
	"errors"
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

// minimal is the smallest configuration that validates.
const minimal = `
slack:
  channels: [C0123OPS]
clusters:
  - name: dev
    namespaces: [ml]
`
