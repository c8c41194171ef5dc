package config

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestExpandEnvKeepsValues checks that a value with YAML syntax in it reads back exactly, wherever the reference is.
func TestExpandEnvKeepsValues(t *testing.T) {
	values := []string{
		"xoxb-123-abc", "p@ss#word", "*star", "&anchor", "!tag", "a: b", "trailing:", `quo"te`, `back\slash`,
		"it's", "[x]", "{y}", "50%", " padded ", "a,b", "-dash", "#hash", "`tick`", "null", "~", "",
	}
	layouts := []struct {
		name, yaml string
		get        func(map[string]any) any
	}{
		{"block value", "v: ${HP_VALUE}\n", func(m map[string]any) any { return m["v"] }},
		{"block value with comment", "v: ${HP_VALUE}   # the value\n", func(m map[string]any) any { return m["v"] }},
		{"double quoted", "v: \"${HP_VALUE}\"\n", func(m map[string]any) any { return m["v"] }},
		{"single quoted", "v: '${HP_VALUE}'\n", func(m map[string]any) any { return m["v"] }},
		{"flow mapping", "v: {w: ${HP_VALUE}}\n", func(m map[string]any) any { return m["v"].(map[string]any)["w"] }},
		{"flow list", "v: [${HP_VALUE}, other]\n", func(m map[string]any) any { return m["v"].([]any)[0] }},
		{"block list", "v:\n  - ${HP_VALUE}\n", func(m map[string]any) any { return m["v"].([]any)[0] }},
		{"inside quoted text", "v: \"pre-${HP_VALUE}-post\"\n", func(m map[string]any) any {
			return strings.TrimSuffix(strings.TrimPrefix(m["v"].(string), "pre-"), "-post")
		}},
	}
	for _, l := range layouts {
		for _, v := range values {
			t.Run(l.name+"/"+v, func(t *testing.T) {
				t.Setenv("HP_VALUE", v)
				out, problems := expandEnv([]byte(l.yaml))
				if len(problems) > 0 {
					t.Fatal(problems)
				}
				var m map[string]any
				if err := yaml.Unmarshal(out, &m); err != nil {
					t.Fatalf("expanded YAML does not parse: %v\n%s", err, out)
				}
				got := l.get(m)
				if v == "" && got == nil {
					return // an empty plain value is null, which decodes to "" in a string field
				}
				if got != v {
					t.Errorf("read back %#v, want %q (expanded: %s)", got, v, out)
				}
			})
		}
	}
}

func TestExpandEnvLeavesTypesAndText(t *testing.T) {
	t.Setenv("HP_N", "12")
	t.Setenv("HP_PW", "s3cret")
	tests := []struct{ in, want string }{
		{"workers: ${HP_N}\n", "workers: 12\n"}, // a number stays a number
		{"url: redis://:${HP_PW}@redis:6379\n", "url: redis://:s3cret@redis:6379\n"},
		{"# set ${HP_PW} in the environment\n", "# set s3cret in the environment\n"},
		{"a: $HP_PW ${HP_UNSET_FOR_TEST}\n", "a: $HP_PW \n"}, // only ${NAME} is a reference
	}
	for _, tt := range tests {
		out, problems := expandEnv([]byte(tt.in))
		if len(problems) > 0 || string(out) != tt.want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tt.in, out, problems, tt.want)
		}
	}
}
