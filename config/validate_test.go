package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/config/endpoint"
)

// TestValidationRules gives each rule one good and one bad value, starting from example.yaml. The bad value must be
// reported at its path, with a message that names the rule and the value.
func TestValidationRules(t *testing.T) {
	cluster := func(c *Config) *Cluster { return &c.Clusters[0] }
	template := func(c *Config) *Template {
		tpl := cluster(c).HyperPod.Templates["gpu-small"]
		return &tpl
	}
	setTemplate := func(c *Config, edit func(*Template)) {
		tpl := template(c)
		edit(tpl)
		cluster(c).HyperPod.Templates["gpu-small"] = *tpl
	}
	secondCluster := func(name string) func(*Config) {
		return func(c *Config) {
			cl := c.Clusters[0]
			cl.Name = name
			c.Clusters = append(c.Clusters, cl)
		}
	}
	rule := func(c *Config) *ApprovalRule { return &c.Approvals.Rules[1] }
	dur := func(s string) Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return Duration(d)
	}
	report := func(c *Config) *Report { return &c.Reports[0] }

	tests := []struct {
		name      string
		good, bad func(*Config)
		path      string
		msg       string
	}{
		{"cluster name is DNS-1123", secondCluster("ml-dev-eks"), secondCluster("ML_Dev"),
			"clusters[1].name", `a cluster name must be a DNS-1123 label (lower-case letters, digits and '-', at most 63), got "ML_Dev"`},
		{"cluster names are unique", secondCluster("ml-dev-eks"), secondCluster("ml-prod-eks"),
			"clusters[1]", `duplicate cluster name "ml-prod-eks" (also at clusters[0])`},
		{"at least one cluster", func(c *Config) {}, func(c *Config) { c.Clusters = nil; c.Approvals.Rules[0].Cluster = nil; c.Reports = nil },
			"clusters", "must register at least one cluster"},
		{"namespaces are DNS-1123",
			func(c *Config) { cluster(c).Namespaces = append(cluster(c).Namespaces, "team-b") },
			func(c *Config) { cluster(c).Namespaces = append(cluster(c).Namespaces, "Team_B") },
			"clusters[0].namespaces[3]", `a namespace must be a DNS-1123 label`},
		{"at least one namespace", func(c *Config) {}, func(c *Config) { cluster(c).Namespaces = nil },
			"clusters[0].namespaces", "must list at least one namespace"},
		{"defaultNamespace is a listed namespace",
			func(c *Config) { cluster(c).DefaultNamespace = "ml-research" },
			func(c *Config) { cluster(c).DefaultNamespace = "kube-system" },
			"clusters[0].defaultNamespace", `must be one of the cluster's namespaces ("ml-platform", "ml-research", "ml-dev"), got "kube-system"`},
		{"environment", func(c *Config) { cluster(c).Environment = EnvStaging }, func(c *Config) { cluster(c).Environment = "prod" },
			"clusters[0].environment", `must be production, staging or development, got "prod"`},
		{"namespace environments name the cluster's namespaces",
			func(c *Config) { cluster(c).NamespaceEnvironments["ml-research"] = EnvStaging },
			func(c *Config) { cluster(c).NamespaceEnvironments["ml-test"] = EnvDevelopment },
			"clusters[0].namespaceEnvironments.ml-test", `must name one of the cluster's namespaces ("ml-platform", "ml-research", "ml-dev"), got "ml-test": add it to clusters[0].namespaces, or remove it here`},
		{"namespace environments exist",
			func(c *Config) { cluster(c).NamespaceEnvironments["ml-dev"] = EnvProduction },
			func(c *Config) { cluster(c).NamespaceEnvironments["ml-dev"] = "dev" },
			"clusters[0].namespaceEnvironments.ml-dev", `must be production, staging or development, got "dev"; leave ml-dev out to give it the cluster's environment (production)`},
		{"region", func(c *Config) { cluster(c).Region = "" }, func(c *Config) { cluster(c).Region = "uswest2" },
			"clusters[0].region", `must be an AWS region such as us-west-2`},
		{"limits are not negative", func(c *Config) { cluster(c).Limits.MaxGPUsPerJob = 0 }, func(c *Config) { cluster(c).Limits.MaxGPUsPerJob = -2 },
			"clusters[0].limits.maxGPUsPerJob", "a limit must be ≥ 0 (0 forbids what it caps), got -2"},
		{"images are globs",
			func(c *Config) { cluster(c).Images = append(cluster(c).Images, "ghcr.io/org/*") },
			func(c *Config) { cluster(c).Images = append(cluster(c).Images, "ghcr.io/[org") },
			"clusters[0].images[2]", `must be a valid glob pattern (path.Match: *, ?, [a-z]), got "ghcr.io/[org"`},
		{"instance types are not empty",
			func(c *Config) { cluster(c).InstanceTypes = append(cluster(c).InstanceTypes, "ml.g6.xlarge") },
			func(c *Config) { cluster(c).InstanceTypes = append(cluster(c).InstanceTypes, "") },
			"clusters[0].instanceTypes[3]", "instance type must not be empty"},
		{"instance types look like instance types",
			func(c *Config) { cluster(c).InstanceTypes = append(cluster(c).InstanceTypes, "p4d.24xlarge") },
			func(c *Config) { cluster(c).InstanceTypes = append(cluster(c).InstanceTypes, "big gpu") },
			"clusters[0].instanceTypes[3]", `must be an instance type such as ml.p5.48xlarge or g5.12xlarge, got "big gpu"`},
		{"tolerations operator",
			func(c *Config) {
				cluster(c).GPUNodes.Tolerations[0] = Toleration{Key: "gpu", Operator: "Equal", Value: "true"}
			},
			func(c *Config) { cluster(c).GPUNodes.Tolerations[0].Operator = "In" },
			"clusters[0].gpuNodes.tolerations[0].operator", `must be Equal or Exists, got "In"`},
		{"tolerations Exists has no value",
			func(c *Config) { cluster(c).GPUNodes.Tolerations[0].Value = "" },
			func(c *Config) { cluster(c).GPUNodes.Tolerations[0].Value = "yes" },
			"clusters[0].gpuNodes.tolerations[0].value", `must be empty with operator Exists, got "yes"`},
		{"tolerations effect",
			func(c *Config) { cluster(c).GPUNodes.Tolerations[0].Effect = "NoExecute" },
			func(c *Config) { cluster(c).GPUNodes.Tolerations[0].Effect = "Never" },
			"clusters[0].gpuNodes.tolerations[0].effect", `got "Never"`},
		{"node selector labels",
			func(c *Config) {
				cluster(c).GPUNodes.NodeSelector = map[string]string{"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}
			},
			func(c *Config) { cluster(c).GPUNodes.NodeSelector = map[string]string{"gpu node": "yes"} },
			`clusters[0].gpuNodes.nodeSelector["gpu node"]`, `must be a valid label key, got "gpu node"`},
		{"gpusPerNode", func(c *Config) { cluster(c).GPUNodes.GPUsPerNode = 8 }, func(c *Config) { cluster(c).GPUNodes.GPUsPerNode = -8 },
			"clusters[0].gpuNodes.gpusPerNode", "got -8"},
		{"required labels",
			func(c *Config) { cluster(c).RequiredLabels["cost-center"] = "1234" },
			func(c *Config) { cluster(c).RequiredLabels["team"] = "ml platform" },
			"clusters[0].requiredLabels.team", `must have a valid label value, got "ml platform"`},
		{"storage classes", func(c *Config) { cluster(c).StorageClasses = []string{"fsx-lustre"} },
			func(c *Config) { cluster(c).StorageClasses = []string{"GP3"} },
			"clusters[0].storageClasses[0]", `a storage class name must be a DNS-1123 subdomain`},
		{"profile service account",
			func(c *Config) { cluster(c).Profiles["trainer"] = Profile{ServiceAccount: "trainer-sa"} },
			func(c *Config) { cluster(c).Profiles["trainer"] = Profile{ServiceAccount: "Trainer_SA"} },
			"clusters[0].profiles.trainer.serviceAccount", `a service account name must be a DNS-1123 subdomain`},
		{"verify image matches the images globs",
			func(c *Config) {
				cluster(c).Verify.Image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/busybox:1.36"
			},
			func(c *Config) { cluster(c).Verify.Image = "docker.io/library/busybox:1.36" },
			"clusters[0].verify.image", `must match one of the cluster's images globs ("123456789012.dkr.ecr.us-west-2.amazonaws.com/*", "public.ecr.aws/docker/library/*"), got "docker.io/library/busybox:1.36"`},
		{"verify image needs some images glob",
			func(c *Config) { cluster(c).Images = nil; cluster(c).Verify.Image = "" },
			func(c *Config) { cluster(c).Images = nil },
			"clusters[0].verify.image", `none are configured, so no image is allowed), got "public.ecr.aws/docker/library/busybox:1.36"`},
		{"kueue queue", func(c *Config) { cluster(c).Kueue.Queue = "team-a" }, func(c *Config) { cluster(c).Kueue.Queue = "Team A" },
			"clusters[0].kueue.queue", `a Kueue LocalQueue name must be a DNS-1123 subdomain`},
		{"HyperPod cluster name needed by templates",
			func(c *Config) { cluster(c).HyperPod.ClusterName = "ml-prod-hp-2" }, func(c *Config) { cluster(c).HyperPod.ClusterName = "" },
			"clusters[0].hyperpod.clusterName", "must be set when templates are registered"},
		{"template role is registered",
			func(c *Config) {
				c.AWS.Roles["hyperpod-exec-2"] = "arn:aws:iam::123456789012:role/Other"
				setTemplate(c, func(t *Template) { t.ExecutionRole = "hyperpod-exec-2" })
			},
			func(c *Config) { setTemplate(c, func(t *Template) { t.ExecutionRole = "admin" }) },
			"clusters[0].hyperpod.templates.gpu-small.executionRole", `must name a role in aws.roles (defined: "hyperpod-exec"), got "admin"`},
		{"template instance type is allowed",
			func(c *Config) {
				setTemplate(c, func(t *Template) { t.InstanceGroups[1].InstanceType = "ml.p5.48xlarge" })
			},
			func(c *Config) {
				setTemplate(c, func(t *Template) { t.InstanceGroups[1].InstanceType = "ml.p4d.24xlarge" })
			},
			"clusters[0].hyperpod.templates.gpu-small.instanceGroups[1].instanceType", `got "ml.p4d.24xlarge"`},
		{"template instance count within the limit",
			func(c *Config) { setTemplate(c, func(t *Template) { t.InstanceGroups[1].InstanceCount = 16 }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.InstanceGroups[1].InstanceCount = 17 }) },
			"clusters[0].hyperpod.templates.gpu-small.instanceGroups[1].instanceCount", "must be ≤ limits.maxNodesPerGroup (16), got 17"},
		{"template threads per core",
			func(c *Config) { setTemplate(c, func(t *Template) { t.InstanceGroups[1].ThreadsPerCore = 2 }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.InstanceGroups[1].ThreadsPerCore = 4 }) },
			"clusters[0].hyperpod.templates.gpu-small.instanceGroups[1].threadsPerCore", "must be 1 or 2"},
		{"template lifecycle script is an S3 prefix",
			func(c *Config) { setTemplate(c, func(t *Template) { t.LifecycleScript = "s3://bucket-1/" }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.LifecycleScript = "https://bucket-1/x" }) },
			"clusters[0].hyperpod.templates.gpu-small.lifecycleScript", `must be an S3 prefix such as "s3://bucket/prefix/", got "https://bucket-1/x"`},
		{"template instance group names are unique",
			func(c *Config) { setTemplate(c, func(t *Template) { t.InstanceGroups[1].Name = "workers" }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.InstanceGroups[1].Name = "controller" }) },
			"clusters[0].hyperpod.templates.gpu-small.instanceGroups[1]", `duplicate instance group name "controller"`},
		{"template VPC subnets are required",
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.Subnets = []string{"subnet-0123abcd"} }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.Subnets = nil }) },
			"clusters[0].hyperpod.templates.gpu-small.vpc.subnets", "must list 1 to 16 subnet IDs"},
		{"template VPC subnets are subnet IDs",
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.Subnets[1] = "subnet-89abcdef" }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.Subnets[1] = "sg-0123456789abcdef0" }) },
			"clusters[0].hyperpod.templates.gpu-small.vpc.subnets[1]", `must be a subnet ID such as subnet-0123456789abcdef0, got "sg-0123456789abcdef0"`},
		{"template VPC subnets are at most 16",
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.Subnets = subnetIDs(16) }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.Subnets = subnetIDs(17) }) },
			"clusters[0].hyperpod.templates.gpu-small.vpc.subnets", "must list at most 16 subnet IDs (SageMaker's limit), got 17"},
		{"template VPC subnets are unique",
			func(c *Config) {
				setTemplate(c, func(t *Template) { t.VPC.Subnets = []string{"subnet-0a1b2c3d", "subnet-0a1b2c3e"} })
			},
			func(c *Config) {
				setTemplate(c, func(t *Template) { t.VPC.Subnets = []string{"subnet-0a1b2c3d", "subnet-0a1b2c3d"} })
			},
			"clusters[0].hyperpod.templates.gpu-small.vpc.subnets[1]", `duplicate subnet ID "subnet-0a1b2c3d"`},
		{"template VPC security groups are required",
			func(c *Config) {
				setTemplate(c, func(t *Template) { t.VPC.SecurityGroups = []string{"sg-0123abcd", "sg-4567abcd"} })
			},
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.SecurityGroups = []string{} }) },
			"clusters[0].hyperpod.templates.gpu-small.vpc.securityGroups", "must list 1 to 5 security group IDs"},
		{"template VPC security groups are security group IDs",
			func(c *Config) {
				setTemplate(c, func(t *Template) { t.VPC.SecurityGroups[0] = "sg-0123456789abcdef1" })
			},
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.SecurityGroups[0] = "sg-XYZ" }) },
			"clusters[0].hyperpod.templates.gpu-small.vpc.securityGroups[0]", `must be a security group ID such as sg-0123456789abcdef0, got "sg-XYZ"`},
		{"template VPC security groups are at most 5",
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.SecurityGroups = securityGroupIDs(5) }) },
			func(c *Config) { setTemplate(c, func(t *Template) { t.VPC.SecurityGroups = securityGroupIDs(6) }) },
			"clusters[0].hyperpod.templates.gpu-small.vpc.securityGroups", "must list at most 5 security group IDs (SageMaker's limit), got 6"},
		{"roles are IAM role ARNs",
			func(c *Config) { c.AWS.Roles["hyperpod-exec"] = "arn:aws-us-gov:iam::123456789012:role/service/Exec" },
			func(c *Config) { c.AWS.Roles["hyperpod-exec"] = "arn:aws:iam::123456789012:user/bob" },
			"aws.roles.hyperpod-exec", `must be an IAM role ARN such as arn:aws:iam::123456789012:role/Name, got "arn:aws:iam::123456789012:user/bob"`},
		{"endpoints are URLs",
			func(c *Config) { c.AWS.Endpoints.SageMaker = "http://127.0.0.1:4566" },
			func(c *Config) { c.AWS.Endpoints.SageMaker = "localhost:4566" },
			"aws.endpoints.sagemaker", `must be an absolute http:// or https:// URL, got "localhost:4566"`},
		{"agents have a name", func(c *Config) {
			c.Agents[0].Name = "helper"
			c.Clusters[0].Profiles["trainer"] = Profile{ServiceAccount: "llm-trainer", Agents: []string{"helper"}}
			c.Budgets[0].Agent = "helper"
		}, func(c *Config) { c.Agents[0].Name = "" },
			"agents[0].name", "an agent must have a name"},
		{"profiles name registered agents", func(c *Config) {
			c.Clusters[0].Profiles["trainer"] = Profile{ServiceAccount: "t", Agents: []string{"ops-agent"}}
		},
			func(c *Config) {
				c.Clusters[0].Profiles["trainer"] = Profile{ServiceAccount: "t", Agents: []string{"nobody"}}
			},
			"clusters[0].profiles.trainer.agents[0]", `must name an agent of agents[] ("ops-agent"), got "nobody"`},
		{"approval rules match profile globs", func(c *Config) { c.Approvals.Rules[1].Profile = []string{"train*"} },
			func(c *Config) { c.Approvals.Rules[1].Profile = []string{"[train"} },
			"approvals.rules[1].profile[0]", `must be a valid glob pattern`},
		{"agents have a Slack user ID", func(c *Config) { c.Agents[0].SlackUser = "W0AGENT" }, func(c *Config) { c.Agents[0].SlackUser = "ops-agent" },
			"agents[0].slackUser", `must be the agent's Slack user ID (U… or W…), got "ops-agent"`},
		{"redact patterns are RE2", func(c *Config) { c.Redact.Patterns = []string{`token=(?P<secret>\w+)`} },
			func(c *Config) { c.Redact.Patterns = []string{`token=(?<=x)`} },
			"redact.patterns[0]", "must be an RE2 regular expression"},
		{"redact patterns match something", func(c *Config) { c.Redact.Patterns = []string{`a+`} }, func(c *Config) { c.Redact.Patterns = []string{`a*`} },
			"redact.patterns[0]", "must not match the empty string"},
		{"redact.maxChars", func(c *Config) { c.Redact.MaxChars = 200 }, func(c *Config) { c.Redact.MaxChars = 100 },
			"redact.maxChars", "must be from 200 to 1000000 characters"},
		{"limits fit int32", func(c *Config) { cluster(c).Limits.MaxGPUsPerJob = 2147483647 }, func(c *Config) { cluster(c).Limits.MaxGPUsPerJob = 2147483648 },
			"clusters[0].limits.maxGPUsPerJob", "a limit must be ≤ 2147483647"},
		{"agents are not bot IDs", func(c *Config) { c.Agents[0].SlackUser = "U0AGENT" }, func(c *Config) { c.Agents[0].SlackUser = "B0BOTID" },
			"agents[0].slackUser", `got the bot ID "B0BOTID": an agent posts its requests as a Slack user (its app's bot user, U…) or over MCP`},
		{"agent operations are globs",
			func(c *Config) { c.Agents[0].Operations = append(c.Agents[0].Operations, "scale-*") },
			func(c *Config) { c.Agents[0].Operations = append(c.Agents[0].Operations, "scale-[") },
			"agents[0].operations[5]", `got "scale-["`},
		{"agents are unique",
			func(c *Config) { c.Agents = append(c.Agents, Agent{Name: "second", SlackUser: "U0SECOND"}) },
			func(c *Config) { c.Agents = append(c.Agents, Agent{Name: "second", SlackUser: "U0AGENT"}) },
			"agents[1]", `duplicate agent slackUser "U0AGENT"`},
		{"an agent may speak MCP only",
			func(c *Config) { c.Agents[0].SlackUser, c.Agents[0].MCP.TokenSHA256 = "", strings.Repeat("ab", 32) },
			func(c *Config) { c.Agents[0].SlackUser, c.Agents[0].MCP.TokenSHA256 = "", "" },
			"agents[0]", "an agent needs slackUser (to DM the bot), mcp.tokenSHA256 (to use MCP), or both"},
		{"MCP tokens are SHA-256 digests",
			func(c *Config) {
				c.Agents[0].MCP.TokenSHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
			},
			func(c *Config) { c.Agents[0].MCP.TokenSHA256 = "my-secret-token" },
			"agents[0].mcp.tokenSHA256", "must be the 64 hex digits of the token's SHA-256"},
		{"MCP tokens are unique",
			func(c *Config) {
				c.Agents[0].MCP.TokenSHA256 = strings.Repeat("ab", 32)
				c.Agents = append(c.Agents, Agent{Name: "second", MCP: AgentMCP{TokenSHA256: strings.Repeat("cd", 32)}})
			},
			func(c *Config) {
				c.Agents[0].MCP.TokenSHA256 = strings.Repeat("ab", 32)
				c.Agents = append(c.Agents, Agent{Name: "second", MCP: AgentMCP{TokenSHA256: strings.Repeat("AB", 32)}})
			},
			"agents[1]", `duplicate agent mcp.tokenSHA256`},
		{"scope clusters are registered",
			func(c *Config) { c.Agents[0].Scope.Clusters = []string{"ml-prod-eks"} },
			func(c *Config) { c.Agents[0].Scope.Clusters = []string{"ml-dev-eks"} },
			"agents[0].scope.clusters[0]", `must name a registered cluster ("ml-prod-eks"), got "ml-dev-eks"`},
		{"scope namespaces are allowed on its clusters",
			func(c *Config) { c.Agents[0].Scope.Namespaces = []string{"ml-research"} },
			func(c *Config) { c.Agents[0].Scope.Namespaces = []string{"ml-research", "ml-sandbox"} },
			"agents[0].scope.namespaces[1]", `must be a namespace allowed on the scope's clusters (clusters[].namespaces: "ml-platform", "ml-research", "ml-dev"), got "ml-sandbox"`},
		{"scope namespaces are unique",
			func(c *Config) { c.Agents[0].Scope.Namespaces = []string{"ml-research"} },
			func(c *Config) { c.Agents[0].Scope.Namespaces = []string{"ml-research", "ml-research"} },
			"agents[0].scope.namespaces[1]", `duplicate namespace "ml-research" (also at agents[0].scope.namespaces[0])`},
		{"scope maxRisk is a risk level",
			func(c *Config) { c.Agents[0].Scope.MaxRisk = "medium" },
			func(c *Config) { c.Agents[0].Scope.MaxRisk = "moderate" },
			"agents[0].scope.maxRisk", `must be one of low, medium, high, critical (empty = critical, no cap), got "moderate"`},
		{"audit keeps at least one entry", func(c *Config) { c.Audit.MaxEntries = 10 }, func(c *Config) { c.Audit.MaxEntries = -1 },
			"audit.maxEntries", "must be at least 1 (0 means the default 100000), got -1"},
		{"audit token is a SHA-256 digest", func(c *Config) { c.Audit.TokenSHA256 = strings.Repeat("ab", 32) },
			func(c *Config) { c.Audit.TokenSHA256 = "siem-token" },
			"audit.tokenSHA256", "must be the 64 hex digits of the token's SHA-256"},
		{"mcp listen", func(c *Config) { c.MCP.Listen = "127.0.0.1:8090" }, func(c *Config) { c.MCP.Listen = "8090" },
			"mcp.listen", `must be host:port or :port (e.g. ":8090"), or empty to turn MCP off, got "8090"`},
		{"mcp has its own listener", func(c *Config) { c.MCP.Listen = ":8090" }, func(c *Config) { c.MCP.Listen = c.Server.Listen },
			"mcp.listen", `must differ from server.listen (":8080")`},
		{"rules name a defined group", func(c *Config) { rule(c).Approvers = "leads" }, func(c *Config) { rule(c).Approvers = "admins" },
			"approvals.rules[1].approvers", `must name a group in approvals.groups ("leads", "managers", "oncall"), got "admins"`},
		{"operators name a defined group", func(c *Config) { c.Approvals.Operators = "leads" }, func(c *Config) { c.Approvals.Operators = "pager" },
			"approvals.operators", `must name a group in approvals.groups ("leads", "managers", "oncall"), got "pager"`},
		{"remindAfter comes before escalateAfter",
			func(c *Config) {
				rule(c).RemindAfter, rule(c).EscalateAfter, rule(c).EscalateTo = dur("5m"), dur("10m"), "managers"
			},
			func(c *Config) {
				rule(c).RemindAfter, rule(c).EscalateAfter, rule(c).EscalateTo = dur("10m"), dur("10m"), "managers"
			},
			"approvals.rules[1].remindAfter", "must come before escalateAfter (10m), got 10m"},
		{"escalateAfter comes before the expiry",
			func(c *Config) { rule(c).EscalateAfter, rule(c).EscalateTo = dur("20m"), "managers" },
			func(c *Config) { rule(c).EscalateAfter, rule(c).EscalateTo = dur("30m"), "managers" },
			"approvals.rules[1].escalateAfter", "must come before the expiry (expiresAfter 30m), got 30m"},
		{"remindAfter comes before the expiry", func(c *Config) { rule(c).RemindAfter = dur("29m") }, func(c *Config) { rule(c).RemindAfter = dur("45m") },
			"approvals.rules[1].remindAfter", "must come before the expiry (expiresAfter 30m), got 45m"},
		{"escalateTo names a defined group",
			func(c *Config) { rule(c).EscalateAfter, rule(c).EscalateTo = dur("20m"), "managers" },
			func(c *Config) { rule(c).EscalateAfter, rule(c).EscalateTo = dur("20m"), "admins" },
			"approvals.rules[1].escalateTo", `must name a group in approvals.groups ("leads", "managers", "oncall"), got "admins"`},
		{"escalateTo names a second group",
			func(c *Config) { rule(c).EscalateAfter, rule(c).EscalateTo = dur("20m"), "managers" },
			func(c *Config) { rule(c).EscalateAfter, rule(c).EscalateTo = dur("20m"), "leads" },
			"approvals.rules[1].escalateTo", `must name another group than approvers ("leads")`},
		{"escalateAfter needs escalateTo",
			func(c *Config) { rule(c).EscalateAfter, rule(c).EscalateTo = dur("20m"), "managers" },
			func(c *Config) { rule(c).EscalateAfter = dur("20m") },
			"approvals.rules[1].escalateTo", `must name the group of approvals.groups to ask after escalateAfter ("leads", "managers", "oncall")`},
		{"escalateTo needs escalateAfter", func(c *Config) {}, func(c *Config) { rule(c).EscalateTo = "managers" },
			"approvals.rules[1].escalateAfter", `must say when "managers" is asked (e.g. "30m"), or drop escalateTo`},
		{"reminders need a quorum", func(c *Config) { rule(c).RemindAfter = dur("10m") },
			func(c *Config) { rule(c).Required = 0; rule(c).RemindAfter = dur("10m") },
			"approvals.rules[1].remindAfter", "needs required ≥ 1"},
		{"breakGlass names a defined group", func(c *Config) { rule(c).BreakGlass = "oncall" }, func(c *Config) { rule(c).BreakGlass = "pager" },
			"approvals.rules[1].breakGlass", `must name the on-call group in approvals.groups ("leads", "managers", "oncall"), got "pager"`},
		{"breakGlass needs a quorum", func(c *Config) { rule(c).BreakGlass = "oncall" },
			func(c *Config) { rule(c).Required = 0; rule(c).BreakGlass = "oncall" },
			"approvals.rules[1].breakGlass", "needs required ≥ 1: a rule that asks for no approval has no glass to break"},
		{"agents never break glass", func(c *Config) { rule(c).Initiator, rule(c).BreakGlass = "human", "oncall" },
			func(c *Config) { rule(c).Initiator, rule(c).BreakGlass = "agent", "oncall" },
			"approvals.rules[1].breakGlass", `can never be used on a rule for initiator "agent": agents never break glass`},
		{"grants stand for one approval", func(c *Config) { f := false; rule(c).Grants = &f },
			func(c *Config) { t := true; rule(c).Grants = &t },
			"approvals.rules[1].grants", "can be true only on a rule with required 1: a standing grant stands for one lead's approval (required is 2)"},
		{"rules use known risk levels", func(c *Config) { rule(c).Risk = []string{"medium"} }, func(c *Config) { rule(c).Risk = []string{"severe"} },
			"approvals.rules[1].risk[0]", `must be one of low, medium, high, critical, got "severe"`},
		{"required is not negative", func(c *Config) { rule(c).Required = 0 }, func(c *Config) { rule(c).Required = -1 },
			"approvals.rules[1].required", "must be ≥ 0 (0 = no approval needed), got -1"},
		{"required needs approvers", func(c *Config) { rule(c).Required = 0; rule(c).Approvers = "" }, func(c *Config) { rule(c).Approvers = "" },
			"approvals.rules[1].approvers", "must name an approver group when required is 2"},
		{"quorum is reachable",
			func(c *Config) { c.Approvals.Groups["leads"] = ApproverGroup{Users: []string{"U0LEAD1", "U0LEAD2"}} },
			func(c *Config) { c.Approvals.Groups["leads"] = ApproverGroup{Users: []string{"U0LEAD1"}} },
			"approvals.rules[1].required", `can never be reached: group "leads" has 1 users, required is 2`},
		{"rules match a known initiator", func(c *Config) { rule(c).Initiator = InitiatorAgent }, func(c *Config) { rule(c).Initiator = "robot" },
			"approvals.rules[1].initiator", `must be "human", "agent" or empty (both), got "robot"`},
		{"rule operations are globs", func(c *Config) { rule(c).Operation = []string{"scale-*"} }, func(c *Config) { rule(c).Operation = []string{"[scale"} },
			"approvals.rules[1].operation[0]", `got "[scale"`},
		{"rule clusters are registered", func(c *Config) { rule(c).Cluster = []string{"ml-prod-eks"} }, func(c *Config) { rule(c).Cluster = []string{"ml-dev"} },
			"approvals.rules[1].cluster[0]", `must name a registered cluster ("ml-prod-eks"), got "ml-dev"`},
		{"approver users are Slack user IDs",
			func(c *Config) {
				c.Approvals.Groups["leads"] = ApproverGroup{Users: []string{"W0ENTERPRISE"}, UserGroups: []string{"S0X"}}
			},
			func(c *Config) {
				c.Approvals.Groups["leads"] = ApproverGroup{Users: []string{"@alice"}, UserGroups: []string{"S0X"}}
			},
			"approvals.groups.leads.users[0]", `must be a Slack user ID (U… or W…), got "@alice"`},
		{"access readers are Slack user IDs",
			func(c *Config) { c.Access.Readers.Users = []string{"W0AUDITOR"} },
			func(c *Config) { c.Access.Readers.Users = []string{"auditor@example.com"} },
			"access.readers.users[0]", `must be a Slack user ID (U… or W…), got "auditor@example.com"`},
		{"access reader groups are Slack user group IDs",
			func(c *Config) { c.Access.Readers.UserGroups = []string{"S0AUDIT"} },
			func(c *Config) { c.Access.Readers.UserGroups = []string{"@auditors"} },
			"access.readers.userGroups[0]", `must be a Slack user group ID (S…), got "@auditors"`},
		{"report cron", func(c *Config) { report(c).Schedule = "*/15 * * * *" }, func(c *Config) { report(c).Schedule = "61 * * * *" },
			"reports[0].schedule", `report "daily-capacity": bad cron expression "61 * * * *"`},
		{"report cron has no seconds", func(c *Config) { report(c).Schedule = "@daily" }, func(c *Config) { report(c).Schedule = "0 0 9 * * *" },
			"reports[0].schedule", "expected exactly 5 fields, found 6"},
		{"report zone is set apart", func(c *Config) {}, func(c *Config) { report(c).Schedule = "CRON_TZ=UTC 0 9 * * *" },
			"reports[0].schedule", "set the zone with timezone"},
		{"report time zone", func(c *Config) { report(c).Timezone = "Europe/Berlin" }, func(c *Config) { report(c).Timezone = "Mars/Olympus" },
			"reports[0].timezone", `report "daily-capacity": must be an IANA time zone such as America/Los_Angeles or UTC, got "Mars/Olympus"`},
		{"report clusters are registered", func(c *Config) { report(c).Clusters = nil }, func(c *Config) { report(c).Clusters = []string{"ml-dev"} },
			"reports[0].clusters[0]", `report "daily-capacity": must name a registered cluster ("ml-prod-eks"), got "ml-dev"`},
		{"report sections are known", func(c *Config) { report(c).Sections = []string{"spend", "chart"} }, func(c *Config) { report(c).Sections = []string{"costs"} },
			"reports[0].sections[0]", `report "daily-capacity": must be one of instance-groups, gpus, pending, queues, workloads, spend, chart, got "costs"`},
		{"report channel", func(c *Config) { report(c).Channel = "G0PRIVATE" }, func(c *Config) { report(c).Channel = "#ops" },
			"reports[0].channel", `must be a Slack channel ID (C… or G…, upper-case letters and digits; not a #name), got "#ops"`},
		{"report names are unique",
			func(c *Config) { r := c.Reports[0]; r.Name = "weekly"; c.Reports = append(c.Reports, r) },
			func(c *Config) { c.Reports = append(c.Reports, c.Reports[0]) },
			"reports[1]", `duplicate report name "daily-capacity"`},
		{"hourly cost medium below high",
			func(c *Config) { c.Risk.HourlyCost = HourlyCost{Medium: 100, High: 200} },
			func(c *Config) { c.Risk.HourlyCost = HourlyCost{Medium: 500, High: 50} },
			"risk.hourlyCost.high", "must be greater than risk.hourlyCost.medium (500), got 50"},
		{"reservation outlived is refuse or critical",
			func(c *Config) { c.Risk.ReservationOutlived = ReservationCritical },
			func(c *Config) { c.Risk.ReservationOutlived = "warn" },
			"risk.reservationOutlived", `must be refuse or critical, got "warn"`},
		{"reservation warning is at least a minute before the end",
			func(c *Config) { c.Risk.ReservationWarnBefore = Duration(3 * time.Hour) },
			func(c *Config) { c.Risk.ReservationWarnBefore = Duration(30 * time.Second) },
			"risk.reservationWarnBefore", `must be a duration of at least 1m such as "1h" (the watcher checks the training plans once a minute), or unset for 1h, got "30s"`},
		{"price overrides are positive",
			func(c *Config) { c.Pricing.Overrides["ml.p5.48xlarge"] = 1.5 },
			func(c *Config) { c.Pricing.Overrides["ml.p5.48xlarge"] = 0 },
			`pricing.overrides["ml.p5.48xlarge"]`, "a price override must be > 0 dollars per hour, got 0"},
		{"pricing source", func(c *Config) { c.Pricing.Source = PricingAWS }, func(c *Config) { c.Pricing.Source = "azure" },
			"pricing.source", `must be "builtin" or "aws", got "azure"`},
		{"pricing cache TTL", func(c *Config) { c.Pricing.CacheTTL = Duration(time.Hour) }, func(c *Config) { c.Pricing.CacheTTL = Duration(-time.Hour) },
			"pricing.cacheTTL", `must be a positive duration such as "1h", got "-1h"`},
		{"log level", func(c *Config) { c.Log.Level = "debug" }, func(c *Config) { c.Log.Level = "verbose" },
			"log.level", `must be one of trace, debug, info, warn, error, got "verbose"`},
		{"log format", func(c *Config) { c.Log.Format = LogConsole }, func(c *Config) { c.Log.Format = "text" },
			"log.format", `must be json, console or auto, got "text"`},
		{"redis URL", func(c *Config) { c.Redis.URL = "rediss://:pw@redis.internal:6380/1" }, func(c *Config) { c.Redis.URL = "http://redis:6379" },
			"redis.url", "must be a Redis URL such as redis://host:6379/0"},
		{"redis sentinel URL", func(c *Config) {
			c.Redis.URL = "redis-sentinel://:pw@s1:26379,s2:26379/mymaster/1?sentinel_password=sp"
		},
			func(c *Config) { c.Redis.URL = "redis-sentinel://s1:26379" },
			"redis.url", "the path must be /master-name or /master-name/db"},
		{"redis cluster URL", func(c *Config) { c.Redis.URL = "rediss-cluster://default:tok@clustercfg.cache.example:6379" },
			func(c *Config) { c.Redis.URL = "redis-cluster://n1:7000/2" },
			"redis.url", "a Redis Cluster has only database 0"},
		{"redis one topology", func(c *Config) { c.Redis.Cluster.Addrs = []string{"n1:6379"} },
			func(c *Config) { c.Redis.URL = "redis://r:6379"; c.Redis.Cluster.Addrs = []string{"n1:6379"} },
			"redis.cluster", "is set together with redis.url: give one of redis.url, redis.sentinel and redis.cluster"},
		{"redis sentinel master name",
			func(c *Config) {
				c.Redis.Sentinel = RedisSentinel{MasterName: "mymaster", Addrs: []string{"s1", "s2:26380"}}
			},
			func(c *Config) { c.Redis.Sentinel = RedisSentinel{Addrs: []string{"s1"}} },
			"redis.sentinel.masterName", `is required: the name in the sentinels' "sentinel monitor" line`},
		{"redis sentinel addresses", func(c *Config) { c.Redis.Sentinel = RedisSentinel{MasterName: "m", Addrs: []string{"[::1]:26379"}} },
			func(c *Config) { c.Redis.Sentinel = RedisSentinel{MasterName: "m", Addrs: []string{"s1:26379", "s1"}} },
			"redis.sentinel.addrs[1]", "s1:26379 is listed twice"},
		{"redis sentinel needs a sentinel", func(c *Config) { c.Redis.Sentinel = RedisSentinel{MasterName: "m", Addrs: []string{"s1"}} },
			func(c *Config) { c.Redis.Sentinel = RedisSentinel{MasterName: "m"} },
			"redis.sentinel.addrs", "name at least one host:port"},
		{"redis cluster addresses", func(c *Config) { c.Redis.Cluster.Addrs = []string{"n1", "n2:7000"} },
			func(c *Config) { c.Redis.Cluster.Addrs = []string{"n1:port"} },
			"redis.cluster.addrs[0]", `"n1:port": the port must be a number from 1 to 65535`},
		{"redis credentials only with fields",
			func(c *Config) { c.Redis.Cluster.Addrs = []string{"n1"}; c.Redis.Password = "pw"; c.Redis.TLS = true },
			func(c *Config) { c.Redis.URL = "redis://r:6379"; c.Redis.Password = "pw" },
			"redis.password", "applies to redis.sentinel and redis.cluster only: a URL carries its own"},
		{"redis wait replicas", func(c *Config) { n := 0; c.Redis.WaitReplicas = &n }, func(c *Config) { n := -1; c.Redis.WaitReplicas = &n },
			"redis.waitReplicas", "must be 0 (do not wait) to 16 replicas, got -1"},
		{"redis wait timeout", func(c *Config) { c.Redis.WaitTimeout = Duration(2 * time.Second) },
			func(c *Config) { c.Redis.WaitTimeout = Duration(3 * time.Second) },
			"redis.waitTimeout", `must be a duration above 0 and at most 2s (the client's read timeout bounds it), got "3s"`},
		{"redis key prefix", func(c *Config) { c.Redis.KeyPrefix = "hyperops:prod" }, func(c *Config) { c.Redis.KeyPrefix = "hyper ops" },
			"redis.keyPrefix", `got "hyper ops"`},
		{"redis TTLs", func(c *Config) { c.Redis.RequestTTL = Duration(time.Hour) }, func(c *Config) { c.Redis.RequestTTL = 0 },
			"redis.requestTTL", `must be a positive duration such as "1h", got "0s"`},
		{"slack channels are IDs",
			func(c *Config) { c.Slack.Channels = []string{"G0PRIVATE"} }, func(c *Config) { c.Slack.Channels = []string{"general"} },
			"slack.channels[0]", `must be a Slack channel ID (C… or G…, upper-case letters and digits; not a #name), got "general"`},
		{"slack approvals channel", func(c *Config) { c.Slack.ApprovalsChannel = "C0NEW" }, func(c *Config) { c.Slack.ApprovalsChannel = "approvals" },
			"slack.approvalsChannel", `got "approvals"`},
		{"slack audit channel", func(c *Config) { c.Slack.AuditChannel = "C0AUDIT" }, func(c *Config) { c.Slack.AuditChannel = "audit" },
			"slack.auditChannel", `got "audit"`},
		{"slack command", func(c *Config) { c.Slack.Command = "/hyperops" }, func(c *Config) { c.Slack.Command = "hp" },
			"slack.command", `must be a slash command: '/' then up to 31 lower-case letters, digits, '-' or '_', got "hp"`},
		{"slack API URL", func(c *Config) { c.Slack.APIURL = "http://127.0.0.1:3000/api/" }, func(c *Config) { c.Slack.APIURL = "slack.local/api/" },
			"slack.apiURL", `must be an absolute http:// or https:// URL, got "slack.local/api/"`},
		{"slack workers", func(c *Config) { c.Slack.Workers = 1 }, func(c *Config) { c.Slack.Workers = -1 },
			"slack.workers", "must be at least 1 (0 means the default 8), got -1"},
		{"slack queue size", func(c *Config) { c.Slack.QueueSize = 1 }, func(c *Config) { c.Slack.QueueSize = -5 },
			"slack.queueSize", "must be at least 1 (0 means the default 256), got -5"},
		{"server listen", func(c *Config) { c.Server.Listen = "127.0.0.1:9090" }, func(c *Config) { c.Server.Listen = "8080" },
			"server.listen", `must be host:port or :port (e.g. ":8080"), got "8080"`},
		{"server port", func(c *Config) { c.Server.Listen = ":0" }, func(c *Config) { c.Server.Listen = ":http-alt" },
			"server.listen", `port must be a number from 0 to 65535, got "http-alt"`},
		{"write timeout", func(c *Config) { c.Execution.WriteTimeout = Duration(time.Minute) },
			func(c *Config) { c.Execution.WriteTimeout = Duration(-time.Second) },
			"execution.writeTimeout", "must be at least 1s (0 means the default), got -1s"},
		{"verify wait", func(c *Config) { c.Execution.VerifyWait = Duration(time.Minute) },
			func(c *Config) { c.Execution.VerifyWait = Duration(time.Millisecond) },
			"execution.verifyWait", "must be at least 1s (0 means the default), got 1ms"},
		{"verify wait within the write timeout", func(c *Config) { c.Execution.VerifyWait = c.Execution.WriteTimeout },
			func(c *Config) { c.Execution.VerifyWait = c.Execution.WriteTimeout + Duration(time.Second) },
			"execution.verifyWait", "must be at most execution.writeTimeout (2m0s), which bounds reading back too; got 2m1s"},
		{"poll interval", func(c *Config) { c.Execution.PollInterval = Duration(5 * time.Second) },
			func(c *Config) { c.Execution.PollInterval = Duration(100 * time.Millisecond) },
			"execution.pollInterval", "must be at least 1s (0 means the default), got 100ms"},
		{"max poll interval at least the poll interval", func(c *Config) { c.Execution.MaxPollInterval = c.Execution.PollInterval },
			func(c *Config) { c.Execution.MaxPollInterval = Duration(3 * time.Second) },
			"execution.maxPollInterval", "must be at least execution.pollInterval (5s), the shortest wait between two status reads; got 3s"},
		{"hold unknown", func(c *Config) { c.Execution.HoldUnknown = Duration(time.Hour) },
			func(c *Config) { c.Execution.HoldUnknown = Duration(-time.Hour) },
			"execution.holdUnknown", "must be at least 1s (0 means the default), got -1h0m0s"},
		{"cluster request timeout", func(c *Config) { cluster(c).RequestTimeout = Duration(5 * time.Second) },
			func(c *Config) { cluster(c).RequestTimeout = Duration(10 * time.Millisecond) },
			"clusters[0].requestTimeout", "must be at least 1s (0 means the default 30s), got 10ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := parseExample(t)
			tt.good(good)
			if err := good.Validate(); err != nil {
				t.Errorf("good value rejected:\n%v", err)
			}
			bad := parseExample(t)
			tt.bad(bad)
			ps := problemsOf(t, bad.Validate())
			p, ok := findProblem(ps, tt.path)
			if !ok {
				t.Fatalf("no problem at %s; got:\n%v", tt.path, ps)
			}
			if !strings.Contains(p.Message, tt.msg) {
				t.Errorf("%s: message %q does not contain %q", tt.path, p.Message, tt.msg)
			}
		})
	}
}

// TestRedisURLProblemHidesPassword covers what config.Validate refuses in redis.url; the go-redis client options it
// leaves to ops/state are refused, without the password, by `hyperops validate-config`
// (TestValidateConfigChecksRedisClientOptions) and state.CheckEndpoint.
func TestRedisURLProblemHidesPassword(t *testing.T) {
	for _, raw := range []string{"redis://:hunter2@redis:notaport", "redis://admin:hunter2@redis:6379/db",
		"redis-sentinel://admin:hunter2@s1:26379/m?master_name=x", "redis-cluster://:hunter2@n1:99999"} {
		c := parseExample(t)
		c.Redis.URL = raw
		ps := problemsOf(t, c.Validate())
		p, ok := findProblem(ps, "redis.url")
		if !ok {
			t.Fatalf("%s: no redis.url problem in %v", raw, ps)
		}
		if strings.Contains(p.Message, "hunter2") {
			t.Errorf("the problem shows the password: %s", p.Message)
		}
	}
}

func TestValidateReportsLinesOfDefaultedValues(t *testing.T) {
	// defaultNamespace is absent, so its problem is placed on the nearest line that exists: the cluster's.
	_, err := Parse([]byte("slack: {channels: [C0123OPS]}\nclusters:\n  - name: dev\n    namespaces: [Bad_NS]\n"), "x")
	ps := problemsOf(t, err)
	p, ok := findProblem(ps, "clusters[0].defaultNamespace")
	if !ok || p.Line != 3 {
		t.Errorf("defaultNamespace problem = %+v (found %v), want line 3", p, ok)
	}
	if p, ok := findProblem(ps, "clusters[0].namespaces[0]"); !ok || p.Line != 4 {
		t.Errorf("namespaces[0] problem = %+v (found %v), want line 4", p, ok)
	}
}

// subnetIDs returns n distinct subnet IDs.
func subnetIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("subnet-%017x", i)
	}
	return ids
}

// securityGroupIDs returns n distinct security group IDs.
func securityGroupIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("sg-%08x", i)
	}
	return ids
}

func TestRedisEndpoint(t *testing.T) {
	one, three := 1, 3
	cases := []struct {
		name      string
		redis     Redis
		kind      endpoint.Kind
		addrs     []string
		wait      int
		user, pwd string
		tls       bool
	}{
		{"one node", Redis{URL: "redis://:pw@r:6379/0"}, endpoint.Node, []string{"r:6379"}, 0, "", "pw", false},
		{"one node with replicas to wait for", Redis{URL: "rediss://r:6380", WaitReplicas: &one}, endpoint.Node, []string{"r:6380"}, 1, "", "", true},
		{"sentinel URL", Redis{URL: "redis-sentinel://s1,s2/m"}, endpoint.Sentinel, []string{"s1:26379", "s2:26379"}, 1, "", "", false},
		{"sentinel fields", Redis{Sentinel: RedisSentinel{MasterName: "m", Addrs: []string{"s1:26380"}}, Username: "app", Password: "pw", TLS: true},
			endpoint.Sentinel, []string{"s1:26380"}, 1, "app", "pw", true},
		{"cluster fields", Redis{Cluster: RedisCluster{Addrs: []string{"cfg.example"}}, WaitReplicas: &three},
			endpoint.Cluster, []string{"cfg.example:6379"}, 3, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.redis.WaitTimeout = Duration(time.Second)
			if c.redis.Embedded() {
				t.Fatalf("Embedded() = true")
			}
			e, err := c.redis.Endpoint()
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind != c.kind || !slices.Equal(e.Addrs, c.addrs) || e.WaitReplicas != c.wait || e.Username != c.user ||
				e.Password != c.pwd || e.TLS != c.tls || e.WaitTimeout != time.Second {
				t.Errorf("Endpoint() = %+v", e)
			}
		})
	}
	if !(&Redis{}).Embedded() {
		t.Errorf("no url, sentinel or cluster: Embedded() = false")
	}
}

// A rule whose reminder, escalation and expiry are out of order and whose escalateTo names no group gets every
// problem in one answer, each at its key.
func TestNudgeProblemsAtOnce(t *testing.T) {
	c := parseExample(t)
	r := &c.Approvals.Rules[1] // expiresAfter 30m
	r.RemindAfter, r.EscalateAfter, r.EscalateTo = Duration(40*time.Minute), Duration(35*time.Minute), "admins"
	ps := problemsOf(t, c.Validate())
	for _, want := range []string{
		"approvals.rules[1].remindAfter: must come before escalateAfter (35m), got 40m",
		"approvals.rules[1].remindAfter: must come before the expiry (expiresAfter 30m), got 40m",
		"approvals.rules[1].escalateAfter: must come before the expiry (expiresAfter 30m), got 35m",
		`approvals.rules[1].escalateTo: must name a group in approvals.groups ("leads", "managers", "oncall"), got "admins"`,
	} {
		if !strings.Contains(ps.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, ps)
		}
	}
}

// The execution timeouts and the cluster's request timeout are reported together, each with its key.
func TestExecutionTimeoutsReportedAtOnce(t *testing.T) {
	c := parseExample(t)
	c.Execution.WriteTimeout, c.Execution.VerifyWait, c.Execution.HoldUnknown = -1, -1, -1
	c.Clusters[0].RequestTimeout = -1
	ps := problemsOf(t, c.Validate())
	for _, at := range []string{"execution.writeTimeout", "execution.verifyWait", "execution.holdUnknown", "clusters[0].requestTimeout"} {
		if _, ok := findProblem(ps, at); !ok {
			t.Errorf("no problem at %s; got:\n%v", at, ps)
		}
	}
}

// Unset, the timeouts take their documented defaults.
func TestExecutionTimeoutDefaults(t *testing.T) {
	var c Config
	c.Clusters = []Cluster{{Name: "a"}}
	c.ApplyDefaults()
	if c.Execution.PollInterval != DefaultPollInterval || c.Execution.MaxPollInterval != DefaultMaxPollInterval {
		t.Errorf("poll defaults: %s, max %s", c.Execution.PollInterval, c.Execution.MaxPollInterval)
	}
	if c.Execution.WriteTimeout != DefaultWriteTimeout || c.Execution.VerifyWait != DefaultVerifyWait ||
		c.Execution.HoldUnknown != DefaultHoldUnknown || c.Clusters[0].RequestTimeout != DefaultRequestTimeout {
		t.Errorf("defaults: write %s, verify %s, hold %s, request %s", c.Execution.WriteTimeout, c.Execution.VerifyWait,
			c.Execution.HoldUnknown, c.Clusters[0].RequestTimeout)
	}
}

// TestAgentScopeProblemsAtOnce: a scope naming an unknown cluster, a namespace no cluster allows and a risk level
// that does not exist is three problems in one answer: the namespace is checked against every registered cluster
// when the scope's own are misspelt.
func TestAgentScopeProblemsAtOnce(t *testing.T) {
	text := strings.NewReplacer("      clusters: []", "      clusters: [ml-dev-eks]", "      namespaces: []", "      namespaces: [ml-sandbox]",
		"      maxRisk: critical", "      maxRisk: moderate").Replace(string(Example))
	_, err := Parse([]byte(text), "hyperops.yaml")
	if err == nil {
		t.Fatal("a scope with three problems parsed")
	}
	for _, want := range []string{
		`agents[0].scope.clusters[0]: must name a registered cluster ("ml-prod-eks"), got "ml-dev-eks"`,
		`agents[0].scope.namespaces[0]: must be a namespace allowed on the scope's clusters (clusters[].namespaces: "ml-platform", "ml-research", "ml-dev"), got "ml-sandbox"`,
		`agents[0].scope.maxRisk: must be one of low, medium, high, critical`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "agents[0].scope"); n != 3 {
		t.Errorf("%d scope problems, want 3:\n%v", n, err)
	}
}

// TestBudgetProblemsAtOnce: a budget naming an unknown agent and cluster, two initiators, a window and a time zone
// that do not exist and no limit is every problem in one answer, each at its path.
func TestBudgetProblemsAtOnce(t *testing.T) {
	text := string(Example) + `
  - {name: Bad_Name, agent: nobody, user: U0ALICE, cluster: ml-dev-eks, window: fortnight, timeZone: Mars/Olympus}
`
	_, err := Parse([]byte(text), "hyperops.yaml")
	if err == nil {
		t.Fatal("a budget with six problems parsed")
	}
	for _, want := range []string{
		`budgets[4].name: must be lowercase letters, digits and dashes`,
		`budgets[4]: a budget covers one initiator: set one of agent, user and userGroup, not 2`,
		`budgets[4].agent: must name a registered agent (agents[].name: "ops-agent"), got "nobody"`,
		`budgets[4].cluster: must name a registered cluster ("ml-prod-eks"), got "ml-dev-eks"`,
		`budgets[4].window: must be one of day, week, month (default day), got "fortnight"`,
		`budgets[4].timeZone: must be an IANA time zone such as UTC or Europe/Berlin, got "Mars/Olympus"`,
		`budgets[4].limits: a budget must limit cost (US $), gpuHours or gpus`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
}
