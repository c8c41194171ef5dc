package config

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
)

// FuzzParse loads arbitrary YAML: a configuration that loads is valid by every rule (validating it again finds
// nothing), and one that does not is refused with located problems, never a panic.
func FuzzParse(f *testing.F) {
	f.Add(Example)
	f.Add([]byte("slack: {channels: [C0OPS]}\nclusters: [{name: a, region: us-west-2, namespaces: [ml]}]\n"))
	f.Add([]byte("agents: [{name: bot, slackUser: B0BOTID, operations: ['get-*']}]\n"))
	f.Add([]byte("redact: {patterns: ['a*', '(?<=x)'], maxChars: 5}\n"))
	f.Add([]byte("clusters: [{name: a, limits: {maxGPUsPerJob: 9223372036854775807}}]\n"))
	f.Add([]byte("slack: {channels: [C0OPS]\n  - :\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("refused without problems: %v", err)
			}
			for _, p := range ps {
				if p.Message == "" {
					t.Fatalf("a problem without a message: %+v", p)
				}
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("a loaded configuration fails validation: %v", err)
		}
		for _, a := range cfg.Agents {
			if !slackUserID.MatchString(a.SlackUser) || strings.HasPrefix(a.SlackUser, "B") {
				t.Fatalf("agent %q loaded with Slack id %q", a.Name, a.SlackUser)
			}
		}
		for _, cl := range cfg.Clusters {
			l := cl.Limits
			for _, v := range []int{l.MaxNodesPerGroup, l.MaxTrainingReplicas, l.MaxGPUsPerJob, l.MaxTrainingHours, l.MaxInferenceReplicas} {
				if v < 0 || v > math.MaxInt32 {
					t.Fatalf("cluster %s loaded with limit %d", cl.Name, v)
				}
			}
		}
		for _, p := range cfg.Redact.Patterns {
			re, err := regexp.Compile(p)
			if err != nil || re.MatchString("") {
				t.Fatalf("redact pattern %q loaded", p)
			}
		}
		if cfg.Redact.MaxChars < minRedactChars || cfg.Redact.MaxChars > maxRedactChars {
			t.Fatalf("redact.maxChars %d loaded", cfg.Redact.MaxChars)
		}
	})
}
