package config

// Config is the whole HyperOps configuration file. Load or Parse build one; both apply defaults and validate.
type Config struct {
	Slack     Slack     `yaml:"slack"`
	Redis     Redis     `yaml:"redis"`
	Clusters  []Cluster `yaml:"clusters"`
	AWS       AWS       `yaml:"aws"`
	Agents    []Agent   `yaml:"agents"`
	Approvals Approvals `yaml:"approvals"`
	Access    Access    `yaml:"access"`
	Risk      Risk      `yaml:"risk"`
	Pricing   Pricing   `yaml:"pricing"`
	Reports   []Report  `yaml:"reports"`
	Server    Server    `yaml:"server"`
	MCP       MCP       `yaml:"mcp"`
	Log       Log       `yaml:"log"`
	Execution Execution `yaml:"execution"`
	Redact    Redact    `yaml:"redact"`
	Audit     Audit     `yaml:"audit"`
	// Budgets limit what an initiator, a team or a cluster may spend per window (docs/scopes.md, "Budgets").
	Budgets []SpendBudget `yaml:"budgets"`
}

// The budget windows.
const (
	WindowDay   = "day"
	WindowWeek  = "week"
	WindowMonth = "month"
)

// BudgetWindows lists the budget windows.
var BudgetWindows = []string{WindowDay, WindowWeek, WindowMonth}

// SpendBudget limits the spend of the requests it covers over a window: those of one initiator (an agent, a person,
// or the members of a Slack user group as a team), optionally on one cluster, or those of everyone on a cluster.
// A request counts against every budget that covers it; over one it is refused (E_BUDGET_EXCEEDED), or sent to the
// higher approval of its rule's overBudget.
type SpendBudget struct {
	// Name identifies the budget in plans, refusals and /hp budget; unique, lowercase letters, digits and dashes.
	Name string `yaml:"name"`
	// Agent is the name of a registered agent (agents[].name) whose requests the budget covers.
	Agent string `yaml:"agent"`
	// User is a person's Slack user ID (U…/W…) whose requests the budget covers.
	User string `yaml:"user"`
	// UserGroup is a Slack user group ID (S…): the budget covers its members' requests together, as a team.
	UserGroup string `yaml:"userGroup"`
	// Cluster narrows the budget to requests on one registered cluster; alone, it covers everyone's requests there.
	Cluster string `yaml:"cluster"`
	// Window is day, week (Monday first) or month (default day).
	Window string `yaml:"window"`
	// TimeZone is the IANA time zone the windows start in (default UTC), e.g. Europe/Berlin.
	TimeZone string `yaml:"timeZone"`
	// Limits are the caps; at least one; 0 means that measure is not limited.
	Limits BudgetLimits `yaml:"limits"`
}

// BudgetLimits caps a budget's window.
type BudgetLimits struct {
	// Cost is US $ of planned cost: approved and running requests at their worst case, finished runs as they ran.
	Cost float64 `yaml:"cost"`
	// GPUHours is GPU-hours, counted like Cost.
	GPUHours float64 `yaml:"gpuHours"`
	// GPUs is how many GPUs the covered requests may hold at once.
	GPUs int `yaml:"gpus"`
}

// OverBudget is the approval a rule asks for when a plan would take a budget past its limit, instead of refusing it.
type OverBudget struct {
	// Approvers names a group in approvals.groups.
	Approvers string `yaml:"approvers"`
	// Required is the quorum, at least 1.
	Required int `yaml:"required"`
}

// Execution configures the executors: approved requests wait in a durable queue in Redis and every replica runs
// some of them, apart from the Slack workers, each within its operation's time budget.
type Execution struct {
	// Workers bounds the executions one replica runs at once (default 16).
	Workers int `yaml:"workers"`
	// PerCluster bounds the executions of one cluster that one replica runs at once (default 4).
	PerCluster int `yaml:"perCluster"`
	// Budgets are how long an execution may take, per kind of operation.
	Budgets Budgets `yaml:"budgets"`
	// HoldUnknown is how long the lock of a request interrupted with an unknown outcome (AWS's answer lost and
	// reading back could not tell) stays held for a person to choose Stop or Take over (default 24h).
	HoldUnknown Duration `yaml:"holdUnknown"`
	// WriteTimeout bounds the one call of an execution that changes the world, and reading it back when its answer
	// was lost (default 2m). A write in flight when the replica stops is not cut short before it.
	WriteTimeout Duration `yaml:"writeTimeout"`
	// VerifyWait bounds how long reading back an AWS write whose answer was lost waits for AWS to show the change
	// before concluding it was not made (default 30s); at most writeTimeout.
	VerifyWait Duration `yaml:"verifyWait"`
	// PollInterval is the first wait between two status reads of an AWS change in progress, and the shortest
	// (default 15s). The wait grows with the time the change has taken so far (a tenth of it), up to
	// MaxPollInterval, and doubles while AWS throttles the reads.
	PollInterval Duration `yaml:"pollInterval"`
	// MaxPollInterval is the longest wait between two status reads of an AWS change in progress (default 2m);
	// at least pollInterval.
	MaxPollInterval Duration `yaml:"maxPollInterval"`
}

// Budgets are execution time budgets; an execution still running when its budget ends fails (the change may still
// complete on AWS, which the failure says).
type Budgets struct {
	// Kubernetes bounds applies to the cluster and what waits on them (default 5m).
	Kubernetes Duration `yaml:"kubernetes"`
	// Capacity bounds scaling a HyperPod instance group or an EKS node group (default 2h).
	Capacity Duration `yaml:"capacity"`
	// Bootstrap bounds creating a HyperPod cluster (default 4h).
	Bootstrap Duration `yaml:"bootstrap"`
}

// Slack configures the Socket Mode connection, where commands are accepted and the bounded worker pool.
type Slack struct {
	// AppToken is the app-level token (xapp-…) used by Socket Mode; it comes from ${SLACK_APP_TOKEN}.
	AppToken string `yaml:"appToken"`
	// BotToken is the bot token (xoxb-…) used by the Web API; it comes from ${SLACK_BOT_TOKEN}.
	BotToken string `yaml:"botToken"`
	// APIURL overrides Slack's Web API base URL (tests, proxies); empty means Slack's. Defaults add a trailing "/".
	APIURL string `yaml:"apiURL"`
	// Command is the slash command the app registers (default "/hp").
	Command string `yaml:"command"`
	// Channels are the channel IDs where slash commands are accepted.
	Channels []string `yaml:"channels"`
	// ApprovalsChannel is where agent-initiated requests are approved (default: the first of Channels).
	ApprovalsChannel string `yaml:"approvalsChannel"`
	// AuditChannel, when set, receives a copy of every transition.
	AuditChannel string `yaml:"auditChannel"`
	// Workers is the size of the bounded pool that handles envelopes after they are acked (default 8).
	Workers int `yaml:"workers"`
	// QueueSize is how many acked envelopes may wait for a worker (default 256).
	QueueSize int `yaml:"queueSize"`
	// HandleTimeout bounds the handling of one envelope after its ack: validating, planning, voting (default 2m).
	// Executions never run in it; they have their own budgets (execution.budgets).
	HandleTimeout Duration `yaml:"handleTimeout"`
}

// Redis configures the state store: one node, a Sentinel group or a Cluster, given by URL or by the sentinel or
// cluster fields (at most one of the three). None of them starts the embedded single-replica server.
type Redis struct {
	// URL is redis://user:pass@host:6379/0 or rediss://… (one node), redis-sentinel://user:pass@host:26379,…/master[/db]
	// (Sentinel) or redis-cluster://user:pass@host:6379,… (Cluster), with an "s" for TLS; empty means embedded unless
	// sentinel or cluster is set.
	URL string `yaml:"url"`
	// Sentinel is a Sentinel group given by fields instead of a redis-sentinel:// URL.
	Sentinel RedisSentinel `yaml:"sentinel"`
	// Cluster is a Redis Cluster given by fields instead of a redis-cluster:// URL.
	Cluster RedisCluster `yaml:"cluster"`
	// Username and Password log in to the data nodes of sentinel or cluster (a URL carries its own).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// TLS turns on TLS to the nodes of sentinel or cluster (a URL says rediss…).
	TLS bool `yaml:"tls"`
	// WaitReplicas is how many replicas must acknowledge each write before it counts as done (default 1 for Sentinel
	// and Cluster, so that a failover cannot lose a write that was reported done; 0 for one node). 0 does not wait.
	WaitReplicas *int `yaml:"waitReplicas"`
	// WaitTimeout bounds that wait; a write not acknowledged in time is E_STATE_UNAVAILABLE (default 500ms).
	WaitTimeout Duration `yaml:"waitTimeout"`
	// KeyPrefix is put before every key (default "hyperops").
	KeyPrefix string `yaml:"keyPrefix"`
	// RequestTTL is how long request records and idempotency keys live (default 720h).
	RequestTTL Duration `yaml:"requestTTL"`
	// DedupeTTL is how long Slack delivery ids are remembered (default 1h).
	DedupeTTL Duration `yaml:"dedupeTTL"`
}

// RedisSentinel is a Sentinel group: the sentinels' addresses and the name they monitor the master under.
type RedisSentinel struct {
	// MasterName is the name in the sentinels' "sentinel monitor" line.
	MasterName string `yaml:"masterName"`
	// Addrs are the sentinels' host:port (port default 26379).
	Addrs []string `yaml:"addrs"`
	// Username and Password log in to the sentinels themselves, when they ask for it (sentinel requirepass).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// RedisCluster is a Redis Cluster (ElastiCache with cluster mode on): seed nodes the client learns the rest from.
type RedisCluster struct {
	// Addrs are nodes' host:port (port default 6379); one configuration endpoint is enough.
	Addrs []string `yaml:"addrs"`
}

// Environment is a cluster's or a namespace's environment; EnvProduction raises the risk of every change there by
// one level.
type Environment string

// The environments a cluster or namespace can be in.
const (
	EnvProduction  Environment = "production"
	EnvStaging     Environment = "staging"
	EnvDevelopment Environment = "development"
)

// Cluster is one registered EKS cluster (optionally with SageMaker HyperPod) and its guardrails.
type Cluster struct {
	// Name is how people and agents name the cluster (DNS-1123 label).
	Name string `yaml:"name"`
	// Kubeconfig is a kubeconfig file; empty means in-cluster, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string `yaml:"kubeconfig"`
	// Context is the kubeconfig context; empty means the file's current context.
	Context string `yaml:"context"`
	// Region is the AWS region; empty means the AWS SDK's default chain.
	Region string `yaml:"region"`
	// Environment is production, staging or development (default production, the cautious choice): the environment
	// of the cluster as a whole and of each namespace NamespaceEnvironments does not list.
	Environment Environment `yaml:"environment"`
	// HyperPod names the SageMaker HyperPod cluster and the templates bootstrap-cluster may create it from.
	HyperPod HyperPod `yaml:"hyperpod"`
	// EKS names the EKS cluster (for managed node groups).
	EKS EKS `yaml:"eks"`
	// Namespaces are the only namespaces operations may touch.
	Namespaces []string `yaml:"namespaces"`
	// DefaultNamespace is used when a request names none (default: the first of Namespaces).
	DefaultNamespace string `yaml:"defaultNamespace"`
	// NamespaceEnvironments gives some of Namespaces an environment of their own, e.g. {ml-dev: development} for a
	// test namespace on a production cluster; a change there is then assessed as that environment's. A namespace it
	// does not list has the cluster's Environment (default: none listed). A change to the cluster as a whole
	// (capacity, bootstrap) always has the cluster's.
	NamespaceEnvironments map[string]Environment `yaml:"namespaceEnvironments"`
	// InstanceTypes are the instance types capacity may use; empty means none.
	InstanceTypes []string `yaml:"instanceTypes"`
	// Images are globs (path.Match) of the images workloads may run; empty means none.
	Images []string `yaml:"images"`
	// Limits caps sizes; each 0 means the operation it caps is not allowed.
	Limits Limits `yaml:"limits"`
	// GPUNodes is how workloads are placed on GPU nodes.
	GPUNodes GPUNodes `yaml:"gpuNodes"`
	// Kueue names the LocalQueue training jobs are submitted to; empty means Kueue is not used.
	Kueue Kueue `yaml:"kueue"`
	// Profiles are the execution identities requests choose by name (default {default: {serviceAccount: default}}).
	Profiles map[string]Profile `yaml:"profiles"`
	// Impersonate makes the executor impersonate slack:<userID> so cluster RBAC and audit see who asked.
	Impersonate bool `yaml:"impersonate"`
	// RequiredLabels are put on every object HyperOps creates.
	RequiredLabels map[string]string `yaml:"requiredLabels"`
	// StorageClasses are the storage classes create-storage may use; empty means any.
	StorageClasses []string `yaml:"storageClasses"`
	// Verify configures the smoke test of /hp bootstrap verify.
	Verify Verify `yaml:"verify"`
	// RequestTimeout bounds every call to the cluster's API server but watches (default 30s), so a server that
	// hangs never holds a caller forever.
	RequestTimeout Duration `yaml:"requestTimeout"`
}

// Verify configures verify-cluster's smoke-test Job.
type Verify struct {
	// Image is the image the smoke-test Job runs; it needs only `echo` and must match the cluster's Images.
	// Empty means DefaultVerifyImage (see Cluster.VerifyImage).
	Image string `yaml:"image"`
}

// HyperPod names a cluster's SageMaker HyperPod cluster and its creation templates.
type HyperPod struct {
	// ClusterName is the HyperPod cluster's name; empty means the cluster has no HyperPod.
	ClusterName string `yaml:"clusterName"`
	// Templates are what bootstrap-cluster may create, chosen by name.
	Templates map[string]Template `yaml:"templates"`
}

// Template is a registered HyperPod CreateCluster shape.
type Template struct {
	// InstanceGroups are the groups the cluster starts with.
	InstanceGroups []InstanceGroup `yaml:"instanceGroups"`
	// LifecycleScript is the S3 prefix holding the lifecycle scripts ("s3://bucket/prefix/").
	LifecycleScript string `yaml:"lifecycleScript"`
	// OnCreate is the script under LifecycleScript run on node creation (default "on_create.sh").
	OnCreate string `yaml:"onCreate"`
	// ExecutionRole names a role in aws.roles; roles are never taken from a request.
	ExecutionRole string `yaml:"executionRole"`
	// VPC is where the cluster's instances attach (CreateCluster's VpcConfig); an EKS-orchestrated HyperPod
	// cluster needs one, so it is required.
	VPC VPC `yaml:"vpc"`
}

// VPC is the subnets and security groups HyperPod instances attach to, as IDs (subnet-…, sg-…). The subnets
// must reach the EKS cluster's control plane, and the security groups must allow it to reach them.
type VPC struct {
	// Subnets are 1 to 16 subnet IDs (subnet-0123abcd…), usually private ones in the EKS cluster's VPC.
	Subnets []string `yaml:"subnets"`
	// SecurityGroups are 1 to 5 security group IDs (sg-0123abcd…).
	SecurityGroups []string `yaml:"securityGroups"`
}

// InstanceGroup is one HyperPod instance group in a Template.
type InstanceGroup struct {
	Name          string `yaml:"name"`
	InstanceType  string `yaml:"instanceType"`
	InstanceCount int    `yaml:"instanceCount"`
	// ThreadsPerCore is 1 or 2; 0 means the instance type's default.
	ThreadsPerCore int `yaml:"threadsPerCore,omitempty"`
	// VolumeSizeGB is the extra EBS volume per instance; 0 means none.
	VolumeSizeGB int `yaml:"volumeSizeGB,omitempty"`
}

// EKS names a cluster's EKS control plane.
type EKS struct {
	// ClusterName is the EKS cluster's name as AWS knows it.
	ClusterName string `yaml:"clusterName"`
}

// Limits are a cluster's caps. A value of 0 forbids what it caps (fail closed); negative values are invalid.
type Limits struct {
	MaxNodesPerGroup     int `yaml:"maxNodesPerGroup"`
	MaxTrainingReplicas  int `yaml:"maxTrainingReplicas"`
	MaxGPUsPerJob        int `yaml:"maxGPUsPerJob"`
	MaxTrainingHours     int `yaml:"maxTrainingHours"`
	MaxInferenceReplicas int `yaml:"maxInferenceReplicas"`
}

// GPUNodes is how GPU workloads are placed.
type GPUNodes struct {
	// NodeSelector is added to every GPU pod.
	NodeSelector map[string]string `yaml:"nodeSelector"`
	// Tolerations are added to every GPU pod.
	Tolerations []Toleration `yaml:"tolerations"`
	// GPUsPerNode is the GPUs of one node, for cost shares; 0 means read it from the nodes.
	GPUsPerNode int `yaml:"gpusPerNode,omitempty"`
}

// Toleration mirrors a Kubernetes toleration.
type Toleration struct {
	Key string `yaml:"key"`
	// Operator is Equal (default) or Exists.
	Operator string `yaml:"operator"`
	Value    string `yaml:"value"`
	// Effect is NoSchedule, PreferNoSchedule, NoExecute, or empty for all.
	Effect string `yaml:"effect"`
}

// Kueue configures submission through Kueue.
type Kueue struct {
	// Queue is the LocalQueue name; empty means Kueue is not used.
	Queue string `yaml:"queue"`
}

// Profile is a registered execution identity and who may choose it.
type Profile struct {
	// ServiceAccount is the service account workloads run as.
	ServiceAccount string `yaml:"serviceAccount"`
	// Agents names the agents (agents[].name) that may use the profile. Empty means none, except for the profile
	// named default, which every agent may use when it lists none.
	Agents []string `yaml:"agents"`
	// Humans says whether people (slash commands) may use the profile (default true).
	Humans *bool `yaml:"humans"`
}

// AWS holds the IAM roles HyperOps may pass and endpoint overrides.
type AWS struct {
	// Roles maps a role name (used in templates) to its IAM role ARN.
	Roles map[string]string `yaml:"roles"`
	// Endpoints override AWS service endpoints; empty means AWS's.
	Endpoints Endpoints `yaml:"endpoints"`
}

// Endpoints are AWS service endpoint overrides (tests, VPC endpoints).
type Endpoints struct {
	SageMaker string `yaml:"sagemaker"`
	EKS       string `yaml:"eks"`
	Pricing   string `yaml:"pricing"`
}

// Agent is a registered AI agent: the Slack user ID it posts as (never a bot ID) for DMs, its MCP token for MCP, at
// least one of them, and the operations it may request.
type Agent struct {
	Name      string `yaml:"name"`
	SlackUser string `yaml:"slackUser"`
	// MCP is how the agent reaches HyperOps over the Model Context Protocol; empty means not at all.
	MCP AgentMCP `yaml:"mcp"`
	// Operations are globs (path.Match) of operation names.
	Operations []string `yaml:"operations"`
	// Scope narrows where and how far the agent may act, on top of Operations; empty means no narrowing.
	Scope AgentScope `yaml:"scope"`
}

// AgentScope narrows an agent's rights: the clusters and namespaces it may act in, the highest risk it may ask for,
// and whether it may change anything at all. A request outside it is refused (E_OUT_OF_SCOPE), never sent for
// approval. The zero value narrows nothing.
type AgentScope struct {
	// Clusters are the registered clusters the agent may target; empty means every registered cluster.
	Clusters []string `yaml:"clusters"`
	// Namespaces are the namespaces it may target, on each of its clusters; empty means every allowed namespace.
	// An agent with namespaces may not change a cluster as a whole (capacity, bootstrap), which reaches past them;
	// it may still read it.
	Namespaces []string `yaml:"namespaces"`
	// MaxRisk is the highest plan risk it may ask for (low, medium, high, critical); a plan above it is refused
	// after planning. Empty means critical: no cap.
	MaxRisk string `yaml:"maxRisk"`
	// ReadOnly limits the agent to operations that change nothing (default false).
	ReadOnly bool `yaml:"readOnly"`
}

// AgentMCP authenticates an agent on the MCP listener.
type AgentMCP struct {
	// TokenSHA256 is the hex SHA-256 digest of the agent's bearer token; the token itself lives only in the
	// agent's secret. Empty means the agent has no MCP access.
	TokenSHA256 string `yaml:"tokenSHA256"`
}

// InitiatorID is the identity the agent's requests are recorded under, the same for its DMs and its MCP calls: its
// Slack ID, or "agent:<name>" for an agent that only speaks MCP.
func (a Agent) InitiatorID() string {
	if a.SlackUser != "" {
		return a.SlackUser
	}
	return "agent:" + a.Name
}

// Approvals holds approver groups and the rules that decide how many approvals a request needs.
type Approvals struct {
	Groups map[string]ApproverGroup `yaml:"groups"`
	// RequireChannelMembership makes approvers also be members of the approvals channel.
	RequireChannelMembership bool `yaml:"requireChannelMembership"`
	// Operators names a group in Groups whose members may take over any request (and then resume or stop it),
	// besides the approvers of the request's own group. Empty (the default): only approvers take over.
	Operators string `yaml:"operators"`
	// Rules are tried in order; the first match wins.
	Rules []ApprovalRule `yaml:"rules"`
}

// ApproverGroup is a set of Slack users and Slack user groups.
type ApproverGroup struct {
	Users      []string `yaml:"users"`
	UserGroups []string `yaml:"userGroups"`
}

// Access says who may use HyperOps beyond the members of slack.channels, the approver groups and the registered
// agents (who always may).
type Access struct {
	// Readers may use HyperOps and see every request (plans, manifests, logs) without being in its channel, e.g.
	// auditors. Being a reader gives no vote.
	Readers AccessReaders `yaml:"readers"`
}

// AccessReaders are Slack users and Slack user groups, like an approver group.
type AccessReaders struct {
	Users      []string `yaml:"users"`
	UserGroups []string `yaml:"userGroups"`
}

// The initiator kinds an ApprovalRule can match.
const (
	InitiatorHuman = "human"
	InitiatorAgent = "agent"
)

// ApprovalRule decides the approvals of the requests it matches. An empty matcher list matches anything.
type ApprovalRule struct {
	Risk []string `yaml:"risk"`
	// Operation are globs (path.Match) of operation names.
	Operation []string `yaml:"operation"`
	Cluster   []string `yaml:"cluster"`
	Namespace []string `yaml:"namespace"`
	// Initiator is "human", "agent", or empty for both.
	Initiator string `yaml:"initiator"`
	// Approvers names a group in Approvals.Groups.
	Approvers string `yaml:"approvers"`
	// Required is the quorum; 0 means no approval.
	Required int `yaml:"required"`
	// ExpiresAfter is how long the request waits for approval (default 1h when Required > 0).
	ExpiresAfter Duration `yaml:"expiresAfter"`
	// Profile are globs (path.Match) of execution profile names; a request naming none uses "default".
	Profile []string `yaml:"profile"`
	// AllowSelfApproval lets the requester count towards the quorum (default false).
	AllowSelfApproval bool `yaml:"allowSelfApproval"`
	// OverBudget, when set, sends a plan over a spend budget to this higher approval instead of refusing it.
	OverBudget *OverBudget `yaml:"overBudget"`
	// RemindAfter, when set, reminds the approvers who have not voted, once, this long after the request began to
	// wait: a new reply in the request's thread that mentions them. Zero (the default): no reminder.
	RemindAfter Duration `yaml:"remindAfter"`
	// EscalateAfter and EscalateTo, when set, ask a second approver group, once, this long after the request
	// began to wait: a new message in the approvals channel that mentions the group, with Approve and Deny. From
	// then on the members of either group may vote, towards the same quorum. Zero (the default): no escalation.
	EscalateAfter Duration `yaml:"escalateAfter"`
	EscalateTo    string   `yaml:"escalateTo"`
	// BreakGlass, when set, names the on-call group (in Approvals.Groups) whose members may break glass on the
	// requests this rule covers: a member who asked for a request approves it alone, with a reason, without a
	// vote; every approver and the audit channel are told at once, and the same person cannot break glass again
	// until a lead (a member of Approvers) acknowledges it. People only: agents never break glass. A critical-risk
	// plan may be broken only when Risk lists "critical" explicitly. Empty (the default): no break-glass.
	BreakGlass string `yaml:"breakGlass"`
	// Grants says whether a lead may give a standing grant on the requests this rule covers (Approve and allow
	// similar…, docs/grants.md), and whether a grant may approve them. Unset (the default): allowed where a grant
	// can apply at all (one approval, not critical risk, not over a budget); false: never.
	Grants *bool `yaml:"grants"`
}

// GrantsAllowed says whether the rule lets standing grants give and approve its requests (Grants unset or true).
func (r *ApprovalRule) GrantsAllowed() bool { return r.Grants == nil || *r.Grants }

// The risk levels, lowest first.
const (
	RiskLow      = "low"
	RiskMedium   = "medium"
	RiskHigh     = "high"
	RiskCritical = "critical"
)

// RiskLevels lists the risk levels, lowest first.
var RiskLevels = []string{RiskLow, RiskMedium, RiskHigh, RiskCritical}

// Risk holds the thresholds that raise a plan's risk.
type Risk struct {
	HourlyCost HourlyCost `yaml:"hourlyCost"`
	// ReservationOutlived is what a training plan does when the job's max-hours outlives the reservation (training
	// plan) its instance group runs on: ReservationRefuse (the default) refuses it with E_RESERVATION_ENDS,
	// ReservationCritical plans it at critical risk with the reason.
	ReservationOutlived string `yaml:"reservationOutlived"`
	// ReservationWarnBefore is how long before a training plan ends the job-watch threads of the workloads running
	// on its instance group are warned, once per end of the plan (default 1h; at least 1m, the watcher checks once
	// a minute).
	ReservationWarnBefore Duration `yaml:"reservationWarnBefore"`
}

// The values of risk.reservationOutlived.
const (
	ReservationRefuse   = "refuse"
	ReservationCritical = "critical"
)

// HourlyCost thresholds in US dollars per hour: a plan whose Δ cost reaches Medium is medium risk, High is high.
type HourlyCost struct {
	Medium float64 `yaml:"medium"`
	High   float64 `yaml:"high"`
}

// The pricing sources.
const (
	PricingBuiltin = "builtin"
	PricingAWS     = "aws"
)

// Pricing configures where on-demand prices come from.
type Pricing struct {
	// Source is "builtin" (default: the table compiled in) or "aws" (the Pricing API, cached in Redis).
	Source string `yaml:"source"`
	// Overrides are $/hour by instance type, taking precedence over either source.
	Overrides map[string]float64 `yaml:"overrides"`
	// CacheTTL is how long AWS prices are cached (default 24h).
	CacheTTL Duration `yaml:"cacheTTL"`
}

// ReportSections are the sections a Report may list, in the order they are rendered.
var ReportSections = []string{"instance-groups", "gpus", "pending", "queues", "workloads", "spend", "chart"}

// Report is a scheduled capacity report.
type Report struct {
	Name string `yaml:"name"`
	// Schedule is a standard 5-field cron expression (minute hour day-of-month month day-of-week) or a @descriptor.
	Schedule string `yaml:"schedule"`
	// Timezone is an IANA zone the schedule is read in (default "UTC").
	Timezone string `yaml:"timezone"`
	// Channel is the Slack channel ID the report is posted to.
	Channel string `yaml:"channel"`
	// Clusters are the clusters covered; empty means all.
	Clusters []string `yaml:"clusters"`
	// Sections are the sections shown (see ReportSections); empty means all.
	Sections []string `yaml:"sections"`
	// Samples is how many past runs of this report the chart plots (default 30).
	Samples int `yaml:"samples,omitempty"`
}

// Server configures the HTTP listener for /healthz, /readyz and /metrics.
type Server struct {
	// Listen is host:port (default ":8080").
	Listen string `yaml:"listen"`
	// ReadTimeout bounds reading one request, headers and body (default 10s).
	ReadTimeout Duration `yaml:"readTimeout"`
	// IdleTimeout closes a kept-alive connection that sends no next request for this long (default 60s).
	IdleTimeout Duration `yaml:"idleTimeout"`
}

// MCP configures the Model Context Protocol server (streamable HTTP at path /mcp) for registered agents.
type MCP struct {
	// Listen is host:port of its own listener; empty (the default) turns MCP off.
	Listen string `yaml:"listen"`
	// ReadTimeout bounds reading one request, headers and body (default 10s). It does not bound the answer: a
	// wait_request or an event stream may take longer.
	ReadTimeout Duration `yaml:"readTimeout"`
	// IdleTimeout closes a kept-alive connection that sends no next request for this long (default 60s).
	IdleTimeout Duration `yaml:"idleTimeout"`
	// SessionIdleTimeout ends an MCP session that sends no request for this long (default 10m); the client
	// initializes a new one.
	SessionIdleTimeout Duration `yaml:"sessionIdleTimeout"`
	// MaxSessionsPerAgent caps the live sessions of one agent on one replica (default 256); an initialize over it
	// is refused with HTTP 429.
	MaxSessionsPerAgent int `yaml:"maxSessionsPerAgent"`
	// MaxWaitsPerAgent caps what follows requests for one agent on one replica: wait_request calls in flight and
	// resource subscriptions together (default 128). A call over it is refused with E_BUSY.
	MaxWaitsPerAgent int `yaml:"maxWaitsPerAgent"`
}

// The log formats.
const (
	LogJSON    = "json"
	LogConsole = "console"
	LogAuto    = "auto"
)

// Redact configures what is removed from text that leaves HyperOps: log lines, and cluster or AWS text posted to
// Slack (log tails, events, error messages). Slack and AWS credential shapes and the configured secrets are always
// removed; Patterns add the operator's own.
type Redact struct {
	// Patterns are RE2 regular expressions whose matches are replaced by [REDACTED]; a pattern with a group named
	// secret, (?P<secret>…), replaces only that group, so the text around it stays readable.
	Patterns []string `yaml:"patterns"`
	// MaxChars caps each cluster or AWS text (a log tail, an event) before it goes to Slack (default 20000).
	MaxChars int `yaml:"maxChars"`
}

// Log configures logging.
type Log struct {
	// Level is trace, debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is json, console, or auto (default: console on a terminal, json otherwise).
	Format string `yaml:"format"`
}

// Audit configures the audit trail: the stream of every stored transition in Redis ({prefix}:audit), how much of it
// is kept, and the bearer token of GET /audit on server.listen, which a SIEM pulls it from as JSON lines
// (docs/audit.md).
type Audit struct {
	// MaxEntries caps the stream (XADD MAXLEN ~, so Redis may keep slightly more): the oldest transitions are
	// trimmed past it (default 100000).
	MaxEntries int64 `yaml:"maxEntries"`
	// TokenSHA256 is the hex SHA-256 digest of the bearer token GET /audit takes; the token itself lives only in
	// the SIEM's secret. Empty (the default) turns the endpoint off.
	TokenSHA256 string `yaml:"tokenSHA256"`
}
