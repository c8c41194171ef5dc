package charts

import (
	"slices"
	"testing"

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
