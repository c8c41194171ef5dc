package charts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/hyperops/hyperops/config"
)

const schemaFile = "hyperops/values.schema.json"

// chartOwnedKeys are config keys the chart sets itself; values may not set them.
// The chart's redis.url comes from redis.mode (a Sentinel or Cluster goes in the external Secret's URL), so the
// field forms of the Redis topology and their credentials are the chart's too.
var chartOwnedKeys = map[string]bool{
	"slack.appToken": true, "slack.botToken": true, "redis.url": true, "server": true, "mcp": true,
	"redis.sentinel": true, "redis.cluster": true, "redis.username": true, "redis.password": true, "redis.tls": true,
}

// configConstraints add to the shape reflection gives what the schema can check early; config.Parse checks the rest.
var configConstraints = map[string]map[string]any{
	"clusters":                                   {"minItems": 1},
	"slack.channels":                             {"minItems": 1},
	"clusters[].environment":                     {"enum": []any{"production", "staging", "development"}},
	"clusters[].namespaceEnvironments.*":         {"enum": []any{"production", "staging", "development"}},
	"clusters[].namespaces":                      {"minItems": 1},
	"log.level":                                  {"enum": []any{"trace", "debug", "info", "warn", "error", ""}},
	"log.format":                                 {"enum": []any{"json", "console", "auto", ""}},
	"pricing.source":                             {"enum": []any{"builtin", "aws", ""}},
	"risk.reservationOutlived":                   {"enum": []any{"refuse", "critical", ""}},
	"approvals.rules[].initiator":                {"enum": []any{"human", "agent", ""}},
	"approvals.rules[].risk[]":                   {"enum": []any{"low", "medium", "high", "critical"}},
	"agents[].scope.maxRisk":                     {"enum": []any{"low", "medium", "high", "critical", ""}},
	"reports[].sections[]":                       {"enum": toAny(config.ReportSections)},
	"clusters[].gpuNodes.tolerations[].operator": {"enum": []any{"Equal", "Exists", ""}},
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

var durationType = reflect.TypeOf(config.Duration(0))

// configSchema is the JSON schema of config's YAML shape: every struct is an object with exactly its yaml keys.
func configSchema(t reflect.Type, path string) map[string]any {
	s := map[string]any{}
	switch {
	case t.Kind() == reflect.Pointer: // an optional value: absent means its documented default
		return configSchema(t.Elem(), path)
	case t == durationType:
		s["type"] = "string"
		s["pattern"] = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$|^$`
	case t.Kind() == reflect.Struct:
		props := map[string]any{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			key := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if key == "" || key == "-" {
				continue
			}
			sub := joinPath(path, key)
			if chartOwnedKeys[sub] {
				continue
			}
			props[key] = configSchema(f.Type, sub)
		}
		s["type"], s["additionalProperties"], s["properties"] = "object", false, props
	case t.Kind() == reflect.Map:
		s["type"] = "object"
		s["additionalProperties"] = configSchema(t.Elem(), path+".*")
	case t.Kind() == reflect.Slice:
		s["type"] = "array"
		s["items"] = configSchema(t.Elem(), path+"[]")
	case t.Kind() == reflect.String:
		s["type"] = "string"
	case t.Kind() == reflect.Bool:
		s["type"] = "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		s["type"] = "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		s["type"] = "number"
	default:
		panic("configSchema: no JSON schema for " + t.String() + " at " + path)
	}
	for k, v := range configConstraints[path] {
		s[k] = v
	}
	return s
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// TestSchemaFollowsConfig keeps values.schema.json's config section equal to the config package's shape, so a key
// added to config is accepted by the chart and a removed one is refused. HYPEROPS_UPDATE_SCHEMA=1 rewrites it.
func TestSchemaFollowsConfig(t *testing.T) {
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	want := configSchema(reflect.TypeOf(config.Config{}), "")
	want["required"] = []any{"slack", "clusters"}
	want["description"] = "the HyperOps config file (config/example.yaml) without the keys the chart sets"
	props := schema["properties"].(map[string]any)
	if os.Getenv("HYPEROPS_UPDATE_SCHEMA") != "" {
		props["config"] = want
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(schema); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(schemaFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := json.Marshal(props["config"])
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(normalizeJSON(t, got), normalizeJSON(t, wantJSON)) {
		t.Errorf("%s: properties.config differs from config.Config; run HYPEROPS_UPDATE_SCHEMA=1 go test ./charts -run TestSchemaFollowsConfig\ngot:  %s\nwant: %s",
			schemaFile, got, wantJSON)
	}
}

func normalizeJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return out
}

// TestSchemaRejects feeds values that must not install and checks the message names the key and the rule.
func TestSchemaRejects(t *testing.T) {
	cases := []struct {
		name   string
		values string
		want   []string
	}{
		{"unknown top-level key", "replicas: 3", []string{"additional properties 'replicas' not allowed"}},
		{"replica count zero", "replicaCount: 0", []string{"/replicaCount", "minimum"}},
		{"replica count a string", "replicaCount: two", []string{"/replicaCount", "got string, want integer"}},
		{"unknown redis mode", "redis: {mode: sentinel}", []string{"/redis/mode", "'bundled', 'external', 'embedded'"}},
		{"misspelt redis key", "redis: {mode: external, extrenal: {existingSecret: r}}", []string{"/redis", "'extrenal' not allowed"}},
		{"IRSA role not an ARN", "serviceAccount: {roleArn: HyperOpsRole}", []string{"/serviceAccount/roleArn", "does not match pattern"}},
		{"wildcard impersonation", `rbac: {impersonation: {users: ["*"]}}`, []string{"/rbac/impersonation/users/0", "does not match pattern"}},
		{"bad anti-affinity", "podAntiAffinity: always", []string{"/podAntiAffinity", "'soft', 'hard', 'none'"}},
		{"empty Slack secret", "slack: {existingSecret: ''}", []string{"/slack/existingSecret", "minLength"}},
		{"token in values", "config: {slack: {botToken: xoxb-1, channels: [C1]}}", []string{"/config/slack", "'botToken' not allowed"}},
		{"redis url in values", "config: {redis: {url: 'redis://r:6379'}}", []string{"/config/redis", "'url' not allowed"}},
		{"misspelt config key", "config: {clusters: [{name: a, namespaces: [x], limts: {}}]}", []string{"/config/clusters/0", "'limts' not allowed"}},
		{"config limit a string", "config: {clusters: [{name: a, namespaces: [x], limits: {maxGPUsPerJob: many}}]}",
			[]string{"/config/clusters/0/limits/maxGPUsPerJob", "want integer"}},
		{"unknown environment", "config: {clusters: [{name: a, namespaces: [x], environment: prod}]}",
			[]string{"/config/clusters/0/environment", "'production', 'staging', 'development'"}},
		{"unknown namespace environment", "config: {clusters: [{name: a, namespaces: [x, x-dev], namespaceEnvironments: {x-dev: dev}}]}",
			[]string{"/config/clusters/0/namespaceEnvironments/x-dev", "'production', 'staging', 'development'"}},
		{"no channel", "config: {slack: {channels: []}}", []string{"/config/slack/channels", "minItems"}},
	}
	c := loadChart(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(tc.values))
			if err != nil {
				t.Fatalf("values: %v", err)
			}
			_, err = renderChart(c, vals)
			if err == nil {
				t.Fatalf("values %q rendered; want a schema error", tc.values)
			}
			t.Logf("refused with: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestTemplateRejects covers combinations the schema cannot express; the chart fails with a sentence saying why.
func TestTemplateRejects(t *testing.T) {
	cases := []struct {
		name, values, want string
	}{
		{"embedded with two replicas", "redis: {mode: embedded}", "redis.mode embedded keeps state in one process"},
		{"external without a Secret", "redis: {mode: external}", "needs redis.external.existingSecret"},
		{"no namespace for RBAC", "config: {clusters: [{name: a, kubeconfig: /k, namespaces: [x]}]}", "no namespace gets a Role"},
		{"ServiceMonitor without Service", "metrics: {service: {enabled: false}, serviceMonitor: {enabled: true}}",
			"needs metrics.service.enabled"},
		{"MCP on the HTTP port", "mcp: {enabled: true, port: 8080}", "mcp.port must differ from server.port"},
		{"MCP Ingress without MCP", "mcp: {ingress: {enabled: true}}", "mcp.ingress.enabled needs mcp.enabled"},
	}
	c := loadChart(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var vals map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &vals); err != nil {
				t.Fatal(err)
			}
			_, err := renderChart(c, vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestValuesFilesValidate checks the chart's own values.yaml and every testdata file against the schema directly.
func TestValuesFilesValidate(t *testing.T) {
	c := loadChart(t)
	files, _ := filepath.Glob(filepath.Join(testdataValues, "*.yaml"))
	files = append(files, filepath.Join(chartDir, "values.yaml"))
	for _, f := range files {
		vals, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		merged, err := chartutil.CoalesceValues(c, vals)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := chartutil.ValidateAgainstSchema(c, merged); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
