package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads the configuration file at path; see Parse.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path)
}

// Parse builds a Config from YAML. It replaces ${NAME} with the environment variable NAME (unset means ""), decodes
// strictly (unknown keys are errors), applies defaults and validates. Every problem found is returned at once as
// Problems, each with its path and, when known, its line; source names the origin in those messages.
func Parse(data []byte, source string) (*Config, error) {
	expanded, problems := expandEnv(data)
	idx, fatal := indexYAML(expanded)
	if fatal != nil {
		return nil, withSource(append(problems, *fatal), source)
	}
	var cfg Config
	decodeProblems := decodeStrict(expanded, &cfg, idx)
	problems = append(problems, decodeProblems...)

	cfg.ApplyDefaults()
	var invalid Problems
	if err := cfg.Validate(); err != nil && !errors.As(err, &invalid) {
		return nil, fmt.Errorf("validate config: %w", err)
	}
	for _, p := range invalid {
		if coveredBy(p.Path, decodeProblems) {
			continue // the value did not decode; saying it is also invalid would only repeat that
		}
		p.Line = idx.lineFor(p.Path)
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return nil, withSource(problems, source)
	}
	return &cfg, nil
}

func withSource(ps Problems, source string) Problems {
	for i := range ps {
		ps[i].Source = source
	}
	ps.sortByLine()
	return ps
}

// coveredBy reports whether path is at or under the path of one of ps.
func coveredBy(path string, ps Problems) bool {
	for _, p := range ps {
		if p.Path == "" {
			continue
		}
		if path == p.Path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}

// decodeStrict decodes data into cfg with unknown keys refused. yaml.v3 keeps going after an unknown key or a value of
// the wrong type and returns them all in one *yaml.TypeError; each becomes a Problem with its path.
func decodeStrict(data []byte, cfg *Config, idx *yamlIndex) Problems {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return Problems{syntaxProblem(err)}
	}
	problems := make(Problems, 0, len(te.Errors))
	for _, msg := range te.Errors {
		problems = append(problems, idx.explain(msg))
	}
	return problems
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// parserErrors are the messages of libyaml's parser (as opposed to its scanner). For these yaml.v3 reports a 0-based
// line: the line before the structure that is unfinished. Adding one names the line where that structure starts.
var parserErrors = []string{
	"did not find expected <document start>", "did not find expected key", "did not find expected node content",
	"did not find expected '-' indicator", "did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"found duplicate %TAG directive", "found duplicate %YAML directive", "found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxProblem turns a YAML syntax error into a Problem with the line the parser named.
func syntaxProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		line := 0
		if slices.Contains(parserErrors, msg) {
			line = 1 // yaml.v3 leaves out line 0, the first line
		}
		return Problem{Line: line, Message: "invalid YAML: " + msg}
	}
	line, _ := strconv.Atoi(m[1])
	if slices.Contains(parserErrors, m[2]) {
		line++
	}
	return Problem{Line: line, Message: "invalid YAML: " + m[2]}
}
