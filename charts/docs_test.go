package charts

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hyperops/hyperops/config"
)

// TestDeployDocValues renders the minimal values file shown in docs/deploy.md, so the guide cannot drift from the
// chart: it must pass the schema, and its config must pass config.Parse.
func TestDeployDocValues(t *testing.T) {
	raw, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```yaml\n# values-prod.yaml\n")
	if !ok {
		t.Fatal("docs/deploy.md has no ```yaml block starting with # values-prod.yaml")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("unterminated yaml block in docs/deploy.md")
	}
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(block), &vals); err != nil {
		t.Fatalf("values in docs/deploy.md: %v", err)
	}
	out, err := renderChart(loadChart(t), vals)
	if err != nil {
		t.Fatalf("render the documented values: %v", err)
	}
	r, err := decodeRendered(out)
	if err != nil {
		t.Fatal(err)
	}
	cm := r.one(t, "ConfigMap", "").Typed.(*corev1.ConfigMap)
	t.Setenv("SLACK_APP_TOKEN", "xapp-1-A0123-456-abcdef")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-123-456-abcdef")
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]), "docs/deploy.md values")
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	if cl := cfg.DefaultCluster(); cl == nil || !cl.AllowsNamespace("ml-platform") {
		t.Errorf("documented config lost its cluster: %+v", cfg.Clusters)
	}
	if !strings.Contains(r.Notes, "hyperops-slack") || strings.Contains(r.Notes, "placeholder") {
		t.Errorf("NOTES.txt for the documented values:\n%s", r.Notes)
	}
}
