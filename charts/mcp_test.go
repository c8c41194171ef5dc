package charts

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hyperops/hyperops/config"
)

// TestMCPExposure: with mcp on, the bot listens for MCP on its own container port, a Service (with client affinity)
// and an Ingress with TLS reach it at /mcp, and the NetworkPolicy admits only the listed peers to that port while
// /metrics stays reachable. Off (the default), nothing of it renders and mcp.listen is empty.
func TestMCPExposure(t *testing.T) {
	r := mustRender(t, "all-on.yaml")
	dep := r.one(t, "Deployment", "").Typed.(*appsv1.Deployment)
	c := dep.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "mcp" && p.ContainerPort == 8443 }) {
		t.Errorf("container ports = %+v, want mcp 8443", c.Ports)
	}
	cm := r.one(t, "ConfigMap", "").Typed.(*corev1.ConfigMap)
	t.Setenv("SLACK_APP_TOKEN", "xapp-1")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-1")
	const ciDigest = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
	t.Setenv("CI_AGENT_MCP_TOKEN_SHA256", ciDigest)
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]), "ConfigMap")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCP.Listen != ":8443" || cfg.Agents[0].MCP.TokenSHA256 == "" || cfg.Agents[1].MCP.TokenSHA256 != ciDigest {
		t.Errorf("mcp.listen = %q, token digests %q and %q; want :8443, the literal and the one from the environment",
			cfg.MCP.Listen, cfg.Agents[0].MCP.TokenSHA256, cfg.Agents[1].MCP.TokenSHA256)
	}

	svc := r.one(t, "Service", "-mcp").Typed.(*corev1.Service)
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort != intstr.FromString("mcp") {
		t.Errorf("MCP Service spec = %+v", svc.Spec)
	}
	ing := r.one(t, "Ingress", "-mcp").Typed.(*networkingv1.Ingress)
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "hyperops-mcp-tls" || ing.Spec.TLS[0].Hosts[0] != "hyperops-mcp.example.com" {
		t.Errorf("Ingress TLS = %+v", ing.Spec.TLS)
	}
	path := ing.Spec.Rules[0].HTTP.Paths[0]
	if path.Path != "/mcp" || path.Backend.Service.Name != svc.Name || path.Backend.Service.Port.Name != "mcp" {
		t.Errorf("Ingress path = %+v, want /mcp to Service %s port mcp", path, svc.Name)
	}

	np := r.one(t, "NetworkPolicy", "-mcp").Typed.(*networkingv1.NetworkPolicy)
	var httpOpen, mcpLimited bool
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			switch p.Port.IntValue() {
			case 9090:
				httpOpen = len(rule.From) == 0
			case 8443:
				mcpLimited = len(rule.From) == 1 && rule.From[0].NamespaceSelector != nil
			}
		}
	}
	if !httpOpen || !mcpLimited {
		t.Errorf("NetworkPolicy ingress = %+v, want the HTTP port open and MCP only from the ingress namespace", np.Spec.Ingress)
	}

	off := mustRender(t, "")
	for _, m := range off.Manifests {
		if m.Obj.GetKind() == "Ingress" || m.Obj.GetName() == "hyperops-mcp" {
			t.Errorf("mcp off renders %s", m.ID())
		}
	}
	cm = off.one(t, "ConfigMap", "").Typed.(*corev1.ConfigMap)
	cfg, err = config.Parse([]byte(cm.Data["config.yaml"]), "ConfigMap")
	if err != nil || cfg.MCP.Listen != "" {
		t.Errorf("mcp off: mcp.listen = %q (%v), want empty", cfg.MCP.Listen, err)
	}
}

// The listeners' timeouts, the MCP caps and the execution timeouts set in values reach the config file, and the
// chart's own values are the config's defaults.
func TestTimeoutsAndCapsReachConfig(t *testing.T) {
	t.Setenv("SLACK_APP_TOKEN", "xapp-1")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-1")
	parse := func(t *testing.T, vals map[string]any) *config.Config {
		t.Helper()
		out, err := renderChart(loadChart(t), vals)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRendered(out)
		if err != nil {
			t.Fatal(err)
		}
		cm := r.one(t, "ConfigMap", "").Typed.(*corev1.ConfigMap)
		cfg, err := config.Parse([]byte(cm.Data["config.yaml"]), "ConfigMap")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	def := parse(t, readValues(t, ""))
	if def.Server.ReadTimeout != config.DefaultReadTimeout || def.Server.IdleTimeout != config.DefaultIdleTimeout ||
		def.MCP.SessionIdleTimeout != config.DefaultMCPSessionIdle || def.MCP.MaxSessionsPerAgent != config.DefaultMCPSessions ||
		def.MCP.MaxWaitsPerAgent != config.DefaultMCPWaits || def.Execution.WriteTimeout != config.DefaultWriteTimeout ||
		def.Execution.VerifyWait != config.DefaultVerifyWait || def.Execution.HoldUnknown != config.DefaultHoldUnknown {
		t.Errorf("chart defaults differ from config's: server %+v, mcp %+v, execution %+v", def.Server, def.MCP, def.Execution)
	}
	got := parse(t, map[string]any{
		"server": map[string]any{"readTimeout": "3s", "idleTimeout": "7s"},
		"mcp":    map[string]any{"sessionIdleTimeout": "1m", "maxSessionsPerAgent": 5, "maxWaitsPerAgent": 6},
		"config": map[string]any{"execution": map[string]any{"writeTimeout": "90s", "verifyWait": "20s", "holdUnknown": "2h"}},
	})
	if got.Server.ReadTimeout.Std() != 3*time.Second || got.Server.IdleTimeout.Std() != 7*time.Second ||
		got.MCP.SessionIdleTimeout.Std() != time.Minute || got.MCP.MaxSessionsPerAgent != 5 || got.MCP.MaxWaitsPerAgent != 6 ||
		got.Execution.WriteTimeout.Std() != 90*time.Second || got.Execution.VerifyWait.Std() != 20*time.Second ||
		got.Execution.HoldUnknown.Std() != 2*time.Hour {
		t.Errorf("set values did not reach the config: server %+v, mcp %+v, execution %+v", got.Server, got.MCP, got.Execution)
	}
}
