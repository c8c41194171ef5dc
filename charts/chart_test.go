package charts

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hyperops/hyperops/config"
)

// renderCase is one values file and what the chart must render for it.
type renderCase struct {
	values    string
	kinds     map[string]int
	replicas  int32
	port      int32
	secret    string
	redisURL  string // the redis.url the config must carry once the environment is expanded
	roleNS    []string
	sa        string
	roleARN   string
	affinity  string // soft, hard or none
	noteLines []string
}

var renderCases = []renderCase{
	{
		values: "",
		kinds: map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 1, "RoleBinding": 1, "ClusterRole": 1,
			"ClusterRoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 2, "StatefulSet": 1,
			"NetworkPolicy": 1},
		replicas: 2, port: 8080, secret: "hyperops-slack",
		redisURL: "redis://hyperops-redis.hyperops-system.svc:6379/0",
		roleNS:   []string{"ml-platform"}, sa: "hyperops", affinity: "soft",
		noteLines: []string{"kubectl -n hyperops-system create secret generic hyperops-slack", "still holds the placeholder C0123OPS",
			"not highly available", "serviceAccount.roleArn is empty"},
	},
	{
		values: "all-on.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 2, "RoleBinding": 2, "ClusterRole": 2,
			"ClusterRoleBinding": 2, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 3, "StatefulSet": 1,
			"NetworkPolicy": 2, "ServiceMonitor": 1, "Ingress": 1},
		replicas: 3, port: 9090, secret: "slack-tokens",
		redisURL: "redis://hyperops-bot-redis.hyperops-system.svc:6379/0",
		roleNS:   []string{"ml-platform", "ml-research"}, sa: "hyperops-executor",
		roleARN: "arn:aws:iam::123456789012:role/HyperOps", affinity: "hard",
		noteLines: []string{"Impersonation is on", "ml-platform, ml-research"},
	},
	{
		values: "external-redis.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 1, "RoleBinding": 1, "ClusterRole": 1,
			"ClusterRoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1},
		replicas: 2, port: 8080, secret: "hyperops-slack",
		redisURL: "rediss://hyperops:s3cr%23t@redis.example.internal:6380/2",
		roleNS:   []string{"ml-platform"}, sa: "hyperops", affinity: "soft",
	},
	{
		values: "embedded.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 1, "RoleBinding": 1, "ClusterRole": 1,
			"ClusterRoleBinding": 1, "Deployment": 1},
		replicas: 1, port: 8080, secret: "hyperops-slack", redisURL: "",
		roleNS: []string{"ml-platform"}, sa: "hyperops", affinity: "none",
		noteLines: []string{"State is lost on every restart"},
	},
}

// TestRender renders the chart for each values file and checks what an operator relies on: the objects, the pod's
// security, the probes, where the tokens come from, and that the config passes config.Parse with the chart's
// environment.
func TestRender(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(strings.TrimSuffix(orDefault(tc.values), ".yaml"), func(t *testing.T) {
			r := mustRender(t, tc.values)
			if got := r.kinds(); !maps.Equal(got, tc.kinds) {
				t.Errorf("kinds = %v, want %v", got, tc.kinds)
			}
			for _, m := range r.Manifests {
				if m.Typed == nil && m.Obj.GetKind() != "ServiceMonitor" {
					t.Errorf("%s: kind unknown to client-go's scheme", m.ID())
				}
				if ns := m.Obj.GetNamespace(); ns == "" && !clusterScoped[m.Obj.GetKind()] {
					t.Errorf("%s: namespaced object without a namespace", m.ID())
				}
			}
			dep := r.one(t, "Deployment", "").Typed.(*appsv1.Deployment)
			checkDeployment(t, tc, dep)
			checkSelectors(t, r, dep)
			checkServiceAccount(t, tc, r)
			checkConfig(t, tc, r, dep)
			for _, line := range tc.noteLines {
				if !strings.Contains(r.Notes, line) {
					t.Errorf("NOTES.txt lacks %q:\n%s", line, r.Notes)
				}
			}
		})
	}
}

var clusterScoped = map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true}

func orDefault(values string) string {
	if values == "" {
		return "default"
	}
	return values
}

func checkDeployment(t *testing.T, tc renderCase, dep *appsv1.Deployment) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != tc.replicas {
		t.Errorf("replicas = %v, want %d", dep.Spec.Replicas, tc.replicas)
	}
	pod := dep.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context = %+v, want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers = %d, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context = %+v, want read-only root, no privilege escalation, drop ALL", sc)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want memory requests and limits", c.Resources)
	}
	if len(c.Ports) == 0 || c.Ports[0].ContainerPort != tc.port || len(c.Ports) > 2 || len(c.Ports) == 2 && c.Ports[1].Name != "mcp" {
		t.Errorf("ports = %+v, want %d", c.Ports, tc.port)
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "http" {
			t.Errorf("probe %+v, want GET %s on port http", probe, want)
		}
	}
	if !slices.Equal(c.Args, []string{"-config", "/etc/hyperops/config.yaml"}) {
		t.Errorf("args = %q", c.Args)
	}
	for _, name := range []string{"SLACK_APP_TOKEN", "SLACK_BOT_TOKEN"} {
		ev := envVar(c.Env, name)
		if ev == nil || ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil || ev.ValueFrom.SecretKeyRef.Name != tc.secret {
			t.Errorf("env %s = %+v, want from Secret %s", name, ev, tc.secret)
		}
	}
	checkAffinity(t, tc.affinity, pod.Affinity)
}

func checkAffinity(t *testing.T, want string, a *corev1.Affinity) {
	t.Helper()
	got := "none"
	if a != nil && a.PodAntiAffinity != nil {
		switch {
		case len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0:
			got = "hard"
		case len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0:
			got = "soft"
		}
	}
	if got != want {
		t.Errorf("pod anti-affinity = %s, want %s", got, want)
	}
}

func envVar(env []corev1.EnvVar, name string) *corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			return &env[i]
		}
	}
	return nil
}

// checkSelectors makes sure the PDB, the metrics Service and the anti-affinity select the bot's pods and nothing else.
func checkSelectors(t *testing.T, r rendered, dep *appsv1.Deployment) {
	t.Helper()
	podLabels := labels.Set(dep.Spec.Template.Labels)
	for _, m := range r.find("PodDisruptionBudget") {
		pdb := m.Typed.(*policyv1.PodDisruptionBudget)
		if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
			t.Errorf("PDB selector %v does not match the pods %v", pdb.Spec.Selector.MatchLabels, podLabels)
		}
	}
	for _, m := range r.find("Service") {
		svc := m.Typed.(*corev1.Service)
		matches := labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels)
		if (strings.HasSuffix(svc.Name, "-metrics") || strings.HasSuffix(svc.Name, "-mcp")) != matches {
			t.Errorf("Service %s selector %v matches the bot's pods: %v", svc.Name, svc.Spec.Selector, matches)
		}
	}
	if a := dep.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if !labels.SelectorFromSet(term.PodAffinityTerm.LabelSelector.MatchLabels).Matches(podLabels) {
				t.Errorf("anti-affinity selector %v does not match the pods", term.PodAffinityTerm.LabelSelector.MatchLabels)
			}
		}
	}
}

func checkServiceAccount(t *testing.T, tc renderCase, r rendered) {
	t.Helper()
	sa := r.one(t, "ServiceAccount", "").Typed.(*corev1.ServiceAccount)
	if sa.Name != tc.sa {
		t.Errorf("service account = %s, want %s", sa.Name, tc.sa)
	}
	if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != tc.roleARN {
		t.Errorf("IRSA annotation = %q, want %q", got, tc.roleARN)
	}
}

// checkConfig parses the ConfigMap's config with config.Parse in the environment the Deployment gives the bot.
func checkConfig(t *testing.T, tc renderCase, r rendered, dep *appsv1.Deployment) {
	t.Helper()
	cm := r.one(t, "ConfigMap", "").Typed.(*corev1.ConfigMap)
	data, ok := cm.Data["config.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no config.yaml", cm.Name)
	}
	env := map[string]string{
		"SLACK_APP_TOKEN": "xapp-1-A0123-456-abcdef",
		"SLACK_BOT_TOKEN": "xoxb-123-456-abcdef",
		"REDIS_URL":       "rediss://hyperops:s3cr%23t@redis.example.internal:6380/2",
	}
	c := dep.Spec.Template.Spec.Containers[0]
	for name, value := range env {
		if envVar(c.Env, name) != nil {
			t.Setenv(name, value)
		} else {
			t.Setenv(name, "")
		}
	}
	cfg, err := config.Parse([]byte(data), "ConfigMap "+cm.Name)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, data)
	}
	if err := cfg.CheckSlackTokens(); err != nil {
		t.Errorf("Slack tokens from the Secret: %v", err)
	}
	if cfg.Redis.URL != tc.redisURL {
		t.Errorf("redis.url = %q, want %q", cfg.Redis.URL, tc.redisURL)
	}
	if want := fmt.Sprintf(":%d", tc.port); cfg.Server.Listen != want {
		t.Errorf("server.listen = %q, want %q (the container port)", cfg.Server.Listen, want)
	}
	for _, key := range []string{"appToken: ${SLACK_APP_TOKEN}", "botToken: ${SLACK_BOT_TOKEN}"} {
		if !strings.Contains(data, key) {
			t.Errorf("config lacks %q: secrets must stay environment references", key)
		}
	}
	if os.Getenv("SLACK_BOT_TOKEN") != "" && strings.Contains(data, os.Getenv("SLACK_BOT_TOKEN")) {
		t.Errorf("config holds a token value")
	}
}
