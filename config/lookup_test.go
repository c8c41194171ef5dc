package config

import "testing"

func TestAgentAllows(t *testing.T) {
	cfg := parseExample(t)
	agent, ok := cfg.Agent("U0AGENT")
	if !ok || agent.Name != "ops-agent" {
		t.Fatalf("Agent(U0AGENT) = %+v, %v", agent, ok)
	}
	if _, ok := cfg.Agent("U0NOBODY"); ok {
		t.Error("an unregistered Slack user was found as an agent")
	}
	tests := []struct {
		operation string
		want      bool
	}{
		{"get-cluster-status", true},
		{"get-request", true},
		{"list-training-jobs", true},
		{"submit-training-job", true},
		{"scale-inference", true},
		{"scale-capacity", false},
		{"delete-storage", false},
		{"bootstrap-cluster", false},
		{"forget-everything", false},
		{"", false},
		{"submit-training-job-2", false},
	}
	for _, tt := range tests {
		if got := agent.Allows(tt.operation); got != tt.want {
			t.Errorf("Allows(%q) = %v, want %v", tt.operation, got, tt.want)
		}
	}
}

func TestAgentAllowsBadPatternMatchesNothing(t *testing.T) {
	a := Agent{Operations: []string{"[get"}}
	if a.Allows("[get") || a.Allows("get") {
		t.Error("a malformed glob matched")
	}
}

func TestClusterGuardrails(t *testing.T) {
	cfg := parseExample(t)
	cl, ok := cfg.Cluster("ml-prod-eks")
	if !ok {
		t.Fatal("Cluster(ml-prod-eks) not found")
	}
	if _, ok := cfg.Cluster("ml-dev"); ok {
		t.Error("an unregistered cluster was found")
	}
	tests := []struct {
		name  string
		check func(string) bool
		value string
		want  bool
	}{
		{"namespace listed", cl.AllowsNamespace, "ml-research", true},
		{"namespace not listed", cl.AllowsNamespace, "kube-system", false},
		{"namespace empty", cl.AllowsNamespace, "", false},
		{"image in ECR repo", cl.AllowsImage, "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v17", true},
		{"image by digest", cl.AllowsImage, "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:abc", true},
		{"image in a nested repo ('*' stops at '/')", cl.AllowsImage, "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/trainer:v1", false},
		{"image of another account", cl.AllowsImage, "999999999999.dkr.ecr.us-west-2.amazonaws.com/trainer:v17", false},
		{"image from library", cl.AllowsImage, "public.ecr.aws/docker/library/python:3.12", true},
		{"image from Docker Hub", cl.AllowsImage, "python:3.12", false},
		{"image empty", cl.AllowsImage, "", false},
		{"instance type listed", cl.AllowsInstanceType, "ml.p5.48xlarge", true},
		{"instance type not listed", cl.AllowsInstanceType, "ml.p4d.24xlarge", false},
		{"instance type is exact", cl.AllowsInstanceType, "ml.p5.48xlarg", false},
		{"storage class listed", cl.AllowsStorageClass, "gp3", true},
		{"storage class not listed", cl.AllowsStorageClass, "io2", false},
	}
	for _, tt := range tests {
		if got := tt.check(tt.value); got != tt.want {
			t.Errorf("%s: %q = %v, want %v", tt.name, tt.value, got, tt.want)
		}
	}
}

func TestClusterFailsClosedWhenListsAreEmpty(t *testing.T) {
	var cl Cluster
	if cl.AllowsImage("anything:latest") || cl.AllowsInstanceType("ml.p5.48xlarge") || cl.AllowsNamespace("default") {
		t.Error("an empty allow-list allowed something")
	}
	if !cl.AllowsStorageClass("io2") {
		t.Error("empty storageClasses must mean any")
	}
}

func TestClusterLookups(t *testing.T) {
	cfg := parseExample(t)
	cl := cfg.DefaultCluster()
	if p, ok := cl.Profile("default"); !ok || p.ServiceAccount != "default" {
		t.Errorf("Profile(default) = %+v, %v", p, ok)
	}
	if _, ok := cl.Profile("admin"); ok {
		t.Error("an unregistered profile was found")
	}
	tpl, ok := cl.Template("gpu-small")
	if !ok || len(tpl.InstanceGroups) != 2 || tpl.OnCreate != "on_create.sh" {
		t.Errorf("Template(gpu-small) = %+v, %v", tpl, ok)
	}
	if !cl.IsProduction() {
		t.Error("ml-prod-eks is production")
	}
	for ns, want := range map[string]Environment{"ml-platform": EnvProduction, "ml-dev": EnvDevelopment, "": EnvProduction} {
		if got := cl.EnvironmentOf(ns); got != want {
			t.Errorf("EnvironmentOf(%q) = %s, want %s", ns, got, want)
		}
	}
	if _, ok := cfg.RoleARN(""); ok {
		t.Error("an empty role name resolved")
	}
	if (&Config{}).DefaultCluster() != nil {
		t.Error("DefaultCluster of no clusters is not nil")
	}
}

func TestVerifyImage(t *testing.T) {
	tests := []struct {
		name, configured, want string
	}{
		{"unset takes the default", "", DefaultVerifyImage},
		{"configured wins", "123456789012.dkr.ecr.us-west-2.amazonaws.com/busybox:1.36", "123456789012.dkr.ecr.us-west-2.amazonaws.com/busybox:1.36"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := Cluster{Verify: Verify{Image: tt.configured}}
			if got := cl.VerifyImage(); got != tt.want {
				t.Errorf("VerifyImage() = %q, want %q", got, tt.want)
			}
		})
	}
	// The example's globs must allow the default, so /hp bootstrap verify works there with no arguments.
	if cl := parseExample(t).DefaultCluster(); !cl.AllowsImage(DefaultVerifyImage) {
		t.Errorf("example.yaml's images %v do not allow the default verify image %s", cl.Images, DefaultVerifyImage)
	}
}

func TestApprovalRuleMatches(t *testing.T) {
	cfg := parseExample(t)
	firstMatch := func(risk, op, cluster, ns, initiator, profile string) int {
		for i := range cfg.Approvals.Rules {
			if cfg.Approvals.Rules[i].Matches(risk, op, cluster, ns, initiator, profile) {
				return i
			}
		}
		return -1
	}
	tests := []struct {
		name                                      string
		risk, op, cluster, ns, initiator, profile string
		want                                      int
	}{
		{"critical delete in ml-platform", "critical", "delete-storage", "ml-prod-eks", "ml-platform", "human", "default", 0},
		{"critical delete elsewhere", "critical", "delete-storage", "ml-prod-eks", "ml-research", "human", "default", 1},
		{"critical other operation", "critical", "scale-capacity", "ml-prod-eks", "ml-platform", "human", "default", 1},
		{"high", "high", "scale-capacity", "ml-prod-eks", "ml-platform", "agent", "default", 2},
		{"low by a human", "low", "get-capacity", "ml-prod-eks", "ml-platform", "human", "default", 3},
		{"low by a human with another profile", "low", "submit-training-job", "ml-prod-eks", "ml-platform", "human", "trainer", 4},
		{"low by an agent", "low", "submit-training-job", "ml-prod-eks", "ml-platform", "agent", "default", 5},
		{"unknown risk", "extreme", "get-capacity", "ml-prod-eks", "ml-platform", "human", "default", -1},
	}
	for _, tt := range tests {
		if got := firstMatch(tt.risk, tt.op, tt.cluster, tt.ns, tt.initiator, tt.profile); got != tt.want {
			t.Errorf("%s: first matching rule = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestReportHelpers(t *testing.T) {
	cfg := parseExample(t)
	r := &cfg.Reports[0]
	if r.Location().String() != "America/Los_Angeles" {
		t.Errorf("Location = %v", r.Location())
	}
	if !r.ShowsSection("chart") {
		t.Error("empty sections must show every section")
	}
	r.Sections = []string{"spend"}
	if r.ShowsSection("chart") || !r.ShowsSection("spend") {
		t.Error("ShowsSection ignores Sections")
	}
}

// An agent that only speaks MCP is found by the identity its requests carry, agent:<name>; one with a Slack ID only
// by that ID, so a DM and an MCP call of the same agent are one initiator.
func TestAgentByInitiatorID(t *testing.T) {
	cfg := parseExample(t)
	cfg.Agents = append(cfg.Agents, Agent{Name: "ci-agent", MCP: AgentMCP{TokenSHA256: "ab"}})
	for _, tc := range []struct {
		id, want string
	}{{"U0AGENT", "ops-agent"}, {"agent:ci-agent", "ci-agent"}, {"agent:ops-agent", ""}, {"ci-agent", ""}, {"", ""}} {
		got := ""
		if a, ok := cfg.Agent(tc.id); ok {
			got = a.Name
		}
		if got != tc.want {
			t.Errorf("Agent(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}
