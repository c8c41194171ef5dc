package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/hyperops/hyperops/config/configtest"
)

// The world every scenario runs in: one registered cluster backed by the local control plane and the fake AWS,
// people and an agent in the fake Slack.
const (
	Cluster    = "ml-e2e"
	HyperPod   = "ml-e2e-hp"
	EKSCluster = "ml-e2e"
	Namespace  = "ml-platform"
	Region     = "us-west-2"
	GPUGroup   = "gpu-workers"
	GPUType    = "ml.p5.48xlarge"
	GPUPrice   = 63.296 // pricing override of GPUType, $/h
	// EKSType is the instance type of EKS managed node groups a scenario adds (priced by override, EKSPrice: one
	// more instance is a medium-risk change, so a lead approves it).
	EKSType      = "p5.48xlarge"
	EKSPrice     = 98.32
	StorageClass = "kwok-volume"

	OpsChannel       = "C0OPS"
	ApprovalsChannel = "C0APPROVE"
	AgentDM          = "D0AGENT"
	// ReportChannel is where the platform team gets the scheduled capacity reports (apart from the ops channel,
	// so a report never lands among a scenario's request messages).
	ReportChannel = "C0PLATFORM"
	// Report is the name of the scheduled capacity report in the generated config.
	Report = "e2e-capacity"
	// DefaultReportSchedule is the report's schedule unless Options.ReportSchedule sets one.
	DefaultReportSchedule = "0 9 * * 1-5"

	Alice  = "U0ALICE" // an engineer
	Lead1  = "U0LEAD1" // approver, listed by ID
	Lead2  = "U0LEAD2" // approver, through the S0LEADS user group
	Agent  = "U0AGENT" // the registered agent ops-agent
	Leads  = "S0LEADS"
	BotKey = "AKIDE2EHYPEROPS" // the fake AWS access key the bot signs with

	// MaxInferenceReplicas is the cluster's inference cap in the generated config.
	MaxInferenceReplicas = 4
	// MaxNodesPerGroup is the cluster's capacity cap in the generated config.
	MaxNodesPerGroup = 6
)

// AgentMCPToken is ops-agent's MCP bearer token; the config holds only its SHA-256 (AgentMCPTokenSHA256).
const AgentMCPToken = "e2e-ops-agent-mcp-token"

// AgentMCPTokenSHA256 is the hex SHA-256 of AgentMCPToken, as agents[].mcp.tokenSHA256 holds it.
var AgentMCPTokenSHA256 = func() string { s := sha256.Sum256([]byte(AgentMCPToken)); return hex.EncodeToString(s[:]) }()

// BotSecret is the secret key of BotKey.
const BotSecret = "e2e-secret-key-not-a-real-one"

// ConfigData fills the generated configuration.
type ConfigData struct {
	SlackAPIURL string
	RedisURL    string
	KeyPrefix   string
	Kubeconfig  string
	AWSURL      string
	// ReportSchedule is the cron schedule of the report Report (UTC); empty means DefaultReportSchedule.
	ReportSchedule string
}

// configTemplate is the bot's configuration. Secrets and the per-replica listen address come from the
// environment, as in production.
var configTemplate = template.Must(template.New("config").Parse(`` + configtest.Slack{APIURL: `{{printf "%q" .SlackAPIURL}}`, Channels: []string{OpsChannel}, ApprovalsChannel: ApprovalsChannel,
	Workers: 4, QueueSize: 64}.YAML() + `  # Smaller than any AWS change of the scenarios: executions must never depend on it.
  handleTimeout: 20s
redis:
  url: {{printf "%q" .RedisURL}}
  keyPrefix: {{.KeyPrefix}}
clusters:
  - name: ` + Cluster + `
    kubeconfig: {{printf "%q" .Kubeconfig}}
    region: ` + Region + `
    environment: staging
    hyperpod:
      clusterName: ` + HyperPod + `
    eks:
      clusterName: ` + EKSCluster + `
    namespaces: [` + Namespace + `]
    defaultNamespace: ` + Namespace + `
    instanceTypes: [` + GPUType + `, ml.g5.12xlarge, ` + EKSType + `]
    images: ["public.ecr.aws/docker/library/*", "123456789012.dkr.ecr.us-west-2.amazonaws.com/*"]
    limits: {maxNodesPerGroup: ` + fmt.Sprint(MaxNodesPerGroup) + `, maxTrainingReplicas: 4, maxGPUsPerJob: 32, maxTrainingHours: 24, maxInferenceReplicas: ` + fmt.Sprint(MaxInferenceReplicas) + `}
    gpuNodes:
      nodeSelector: {sagemaker.amazonaws.com/compute-type: hyperpod}
    profiles: {default: {serviceAccount: default}}
    requiredLabels: {team: ml-platform}
    storageClasses: [` + StorageClass + `]
aws:
  roles: {hyperpod-exec: "arn:aws:iam::123456789012:role/HyperPodExecutionRole"}
  endpoints: {sagemaker: {{printf "%q" .AWSURL}}, eks: {{printf "%q" .AWSURL}}, pricing: {{printf "%q" .AWSURL}}}
agents:
  - name: ops-agent
    slackUser: ` + Agent + `
    mcp: {tokenSHA256: ` + AgentMCPTokenSHA256 + `}
    operations: ["get-*", "list-*", "submit-training-job", "deploy-inference", "scale-inference"]
` + configtest.Approvals{Leads: []string{Lead1}, LeadGroups: []string{Leads}, CriticalQuorum: 2}.YAML() + `pricing:
  source: builtin
  overrides: {` + GPUType + `: ` + fmt.Sprint(GPUPrice) + `, ` + EKSType + `: ` + fmt.Sprint(EKSPrice) + `}
reports:
  - name: ` + Report + `
    schedule: {{printf "%q" .ReportSchedule}}
    timezone: UTC
    channel: ` + ReportChannel + `
    clusters: [` + Cluster + `]
execution:
  workers: 24
  perCluster: 24
server:
  listen: ${HYPEROPS_LISTEN}
mcp:
  listen: ${HYPEROPS_MCP_LISTEN}
log: {level: debug, format: json}
`))

// RenderConfig is the bot's configuration for d, with its ${…} references to the environment left for the loader
// (an in-process bot, e2e/faults, parses it with config.Parse).
func RenderConfig(d ConfigData) (string, error) {
	if d.ReportSchedule == "" {
		d.ReportSchedule = DefaultReportSchedule
	}
	var b strings.Builder
	if err := configTemplate.Execute(&b, d); err != nil {
		return "", fmt.Errorf("render the bot config: %w", err)
	}
	return b.String(), nil
}

// WriteConfig renders the configuration into dir/hyperops.yaml and checks it with the bot's own
// `validate-config` (bin, run with env as its environment), so a bad harness config fails here with the loader's
// message rather than in a replica.
func WriteConfig(ctx context.Context, bin, dir string, d ConfigData, env []string) (string, error) {
	text, err := RenderConfig(d)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "hyperops.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", fmt.Errorf("write the bot config: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, "validate-config", path)
	cmd.Env = append(env, "HYPEROPS_LISTEN=127.0.0.1:1", "HYPEROPS_MCP_LISTEN=127.0.0.1:2")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("the generated bot config %s does not validate: %w\n%s", path, err, out)
	}
	return path, nil
}
