package playground

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/config/configtest"
)

// The simulated world: one registered cluster, a HyperPod cluster with a GPU instance group, four people and an
// agent in three channels and their direct messages with the bot.
const (
	Cluster    = "ml-prod-eks"
	HyperPod   = "ml-prod-hp"
	EKSCluster = "ml-prod-eks"
	Namespace  = "ml-platform"
	Region     = "us-west-2"
	GPUGroup   = "gpu-workers"
	GPUType    = "ml.p5.48xlarge"
	// GPUNodes is how many instances GPUGroup starts with.
	GPUNodes = 2

	OpsChannel       = "C0MLOPS"
	ApprovalsChannel = "C0MLAPPROVALS"
	ReportsChannel   = "C0MLREPORTS"
	Leads            = "S0LEADS"
	BotUser          = "U0BOT"

	// awsKey and awsSecret are the fake AWS's only credentials; the bot signs with them.
	awsKey    = "AKIDPLAYGROUND"
	awsSecret = "playground-secret-not-a-real-one"
)

// Persona is someone the page can act as.
type Persona struct {
	Key      string `json:"key"`
	ID       string `json:"id"`
	Name     string `json:"name"`
	RealName string `json:"realName"`
	Role     string `json:"role"`
	DM       string `json:"dm"`
	IsAgent  bool   `json:"isAgent"`
}

// Personas are the people and the agent of the playground, in the order the page offers them.
var Personas = []Persona{
	{Key: "engineer", ID: "U0ERIN", Name: "erin", RealName: "Erin Engineer", Role: "ML engineer", DM: "D0ERIN"},
	{Key: "lead1", ID: "U0LEE", Name: "lee", RealName: "Lee Lead", Role: "lead (approver by ID)", DM: "D0LEE"},
	{Key: "lead2", ID: "U0LOU", Name: "lou", RealName: "Lou Lead", Role: "lead (approver via @leads)", DM: "D0LOU"},
	{Key: "bystander", ID: "U0BEA", Name: "bea", RealName: "Bea Bystander", Role: "in #ml-ops, not an approver", DM: "D0BEA"},
	{Key: "agent", ID: "U0AGENT", Name: "ops-agent", RealName: "ops-agent", Role: "registered AI agent", DM: "D0AGENT", IsAgent: true},
}

// PersonaByKey finds a persona.
func PersonaByKey(key string) (Persona, bool) {
	for _, p := range Personas {
		if p.Key == key {
			return p, true
		}
	}
	return Persona{}, false
}

// Channel is a conversation the page shows.
type Channel struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Topic says what the channel is for.
	Topic string `json:"topic"`
}

// Channels are the shared channels, in sidebar order; each persona also has its DM with the bot.
var Channels = []Channel{
	{ID: OpsChannel, Name: "ml-ops", Topic: "where engineers run /hp commands"},
	{ID: ApprovalsChannel, Name: "ml-approvals", Topic: "where agent requests wait for a lead"},
	{ID: ReportsChannel, Name: "ml-reports", Topic: "capacity reports, on a schedule"},
}

// configData fills the bot's configuration.
type configData struct {
	SlackAPIURL string
	AWSURL      string
	Kubeconfig  string
	// OwnCluster drops the HyperPod node selector, which nodes of a user's own cluster do not carry.
	OwnCluster bool
}

var configTemplate = template.Must(template.New("config").Parse(`# The playground's HyperOps configuration: every endpoint is a local fake.
` + configtest.Slack{APIURL: `{{printf "%q" .SlackAPIURL}}`, Channels: []string{OpsChannel}, ApprovalsChannel: ApprovalsChannel,
	Workers: 4, QueueSize: 64}.YAML() + `redis:
  url: ""
  keyPrefix: playground
clusters:
  - name: ` + Cluster + `
    kubeconfig: {{printf "%q" .Kubeconfig}}
    region: ` + Region + `
    environment: production
    hyperpod: {clusterName: ` + HyperPod + `}
    eks: {clusterName: ` + EKSCluster + `}
    namespaces: [` + Namespace + `, ml-research]
    defaultNamespace: ` + Namespace + `
    instanceTypes: [` + GPUType + `, ml.g5.12xlarge]
    images: ["123456789012.dkr.ecr.us-west-2.amazonaws.com/*", "public.ecr.aws/docker/library/*"]
    limits: {maxNodesPerGroup: 8, maxTrainingReplicas: 8, maxGPUsPerJob: 64, maxTrainingHours: 24, maxInferenceReplicas: 4}
{{- if not .OwnCluster}}
    gpuNodes:
      nodeSelector: {sagemaker.amazonaws.com/compute-type: hyperpod}
{{- end}}
    profiles: {default: {serviceAccount: default}}
    requiredLabels: {team: ml-platform}
    storageClasses: [kwok-volume]
aws:
  roles: {hyperpod-exec: "arn:aws:iam::123456789012:role/HyperPodExecutionRole"}
  endpoints: {sagemaker: {{printf "%q" .AWSURL}}, eks: {{printf "%q" .AWSURL}}, pricing: {{printf "%q" .AWSURL}}}
agents:
  - name: ops-agent
    slackUser: U0AGENT
    operations: ["get-*", "list-*", "submit-training-job", "deploy-inference", "scale-inference"]
` + configtest.Approvals{Leads: []string{"U0LEE"}, LeadGroups: []string{Leads}, CriticalQuorum: 2}.YAML() + `pricing:
  source: builtin
reports:
  - name: hourly-capacity
    schedule: "0 * * * *"
    timezone: UTC
    channel: ` + ReportsChannel + `
    clusters: [` + Cluster + `]
server:
  listen: "127.0.0.1:0"
log: {level: info, format: json}
`))

// writeConfig renders the configuration into dir and loads it with the bot's own loader. The Slack tokens are the
// fake Slack's, set after loading, so a real token in the environment is never used.
func writeConfig(dir string, d configData, appToken, botToken string) (*config.Config, string, error) {
	var b strings.Builder
	if err := configTemplate.Execute(&b, d); err != nil {
		return nil, "", fmt.Errorf("render the playground config: %w", err)
	}
	path := filepath.Join(dir, "hyperops.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return nil, "", fmt.Errorf("write the playground config: %w", err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, "", fmt.Errorf("the playground config %s does not load: %w", path, err)
	}
	cfg.Slack.AppToken, cfg.Slack.BotToken = appToken, botToken
	return cfg, path, nil
}
