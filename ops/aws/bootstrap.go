package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/progress"
)

// OpBootstrapCluster is the name of the bootstrap-cluster operation.
const OpBootstrapCluster = "bootstrap-cluster"

// KindHyperPodCluster names a HyperPod cluster in plans and results.
const KindHyperPodCluster = "HyperPodCluster"

// bootstrapOp is bootstrap-cluster: SageMaker CreateCluster, orchestrated by the cluster's existing EKS cluster,
// from a template registered in config. The execution role comes from aws.roles by the template's role name;
// nothing in a request can name a role.
type bootstrapOp struct {
	c      *Clients
	pricer ops.Pricer
}

var bootstrapParams = []ops.ParamSpec{
	{Name: "template", Kind: ops.KindString, Required: true, Help: "a HyperPod template registered for the cluster in config"},
}

func (o *bootstrapOp) Spec() ops.Spec {
	return ops.Spec{
		Name: OpBootstrapCluster, Domain: "bootstrap", Topic: "bootstrap", Verb: "hyperpod", Mutates: true,
		Summary:  "Create the cluster's SageMaker HyperPod cluster on its EKS cluster from a registered template",
		Baseline: ops.RiskHigh, Params: bootstrapParams, Budget: ops.BudgetBootstrap, ClusterWide: true,
		Lock:     func(r ops.Request) ops.LockScope { return ops.LockScope{Cluster: r.Target.Cluster, Kind: "bootstrap"} },
		Headline: bootstrapHeadline,
		Revert:   "deletes the HyperPod cluster it created, and its instances with it",
	}
}

var bootstrapHeadline = ops.MustTemplate(`Create a HyperPod cluster on {{.Cluster}} from the template {{.Param "template"}}`)

// blueprint is a template resolved against config: what CreateCluster will be sent.
type blueprint struct {
	t        *target
	name     string // the template's name
	tpl      config.Template
	roleName string
	roleARN  string
}

func (o *bootstrapOp) resolve(req *ops.Request) (*blueprint, error) {
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, err
	}
	if t.cl.HyperPod.ClusterName == "" || t.cl.EKS.ClusterName == "" {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "cluster",
			"set hyperpod.clusterName (the cluster to create) and eks.clusterName (its orchestrator) in config",
			"cluster %s needs both hyperpod.clusterName and eks.clusterName to bootstrap HyperPod", t.name)
	}
	name := req.Params.String("template")
	tpl, ok := t.cl.Template(name)
	if !ok {
		known := make([]string, 0, len(t.cl.HyperPod.Templates))
		for k := range t.cl.HyperPod.Templates {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, ops.Unknown(ops.CodeInvalidArgument, "template", "templates of "+t.name, name, known,
			"no HyperPod template %q registered for cluster %s", name, t.name)
	}
	if len(tpl.VPC.Subnets) == 0 || len(tpl.VPC.SecurityGroups) == 0 {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "template",
			"add vpc: {subnets: [subnet-…], securityGroups: [sg-…]} to the template in config",
			"template %s has no VPC subnets or security groups; an EKS-orchestrated HyperPod cluster needs both", name)
	}
	arn, ok := o.c.cfg.RoleARN(tpl.ExecutionRole)
	if !ok {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "template", "register the role under aws.roles in config",
			"template %s names execution role %q, which is not in aws.roles", name, tpl.ExecutionRole)
	}
	for _, g := range tpl.InstanceGroups {
		if !t.cl.AllowsInstanceType(g.InstanceType) {
			return nil, ops.Errorf(ops.CodeInstanceTypeNotAllow, "template",
				"allowed instance types of "+t.name+" (instanceTypes): "+strings.Join(t.cl.InstanceTypes, ", "),
				"template %s group %s uses %s, which is not in instanceTypes of cluster %s", name, g.Name, g.InstanceType, t.name)
		}
		if g.InstanceCount > t.cl.Limits.MaxNodesPerGroup {
			return nil, ops.Errorf(ops.CodeQuotaExceeded, "template", "lower the template's instanceCount or raise the limit",
				"template %s group %s asks for %d instances, above limits.maxNodesPerGroup=%d of cluster %s",
				name, g.Name, g.InstanceCount, t.cl.Limits.MaxNodesPerGroup, t.name)
		}
	}
	return &blueprint{t: t, name: name, tpl: tpl, roleName: tpl.ExecutionRole, roleARN: arn}, nil
}

// Validate resolves the template, its role and its guardrails from config.
func (o *bootstrapOp) Validate(_ context.Context, req *ops.Request) error {
	_, err := o.resolve(req)
	return err
}

// existing is the state bootstrap plans against.
type existing struct {
	eksARN, eksStatus string
	hp                *sagemaker.DescribeClusterOutput // nil when the HyperPod cluster does not exist
}

// observe resolves the request's blueprint and reads what exists of it: what Plan, Recheck and Observe all start from.
func (o *bootstrapOp) observe(ctx context.Context, req *ops.Request) (*blueprint, *existing, error) {
	b, err := o.resolve(req)
	if err != nil {
		return nil, nil, err
	}
	cl, err := o.c.eksStatus(ctx, b.t)
	if err != nil {
		return nil, nil, err
	}
	ex := &existing{eksARN: awssdk.ToString(cl.Arn), eksStatus: string(cl.Status)}
	hp, err := o.c.describeHyperPod(ctx, b.t)
	switch {
	case err == nil:
		ex.hp = hp
	case apiCode(err) != "ResourceNotFound":
		return nil, nil, err
	}
	return b, ex, nil
}

func (ex *existing) observed() string {
	hp := "absent"
	if ex.hp != nil {
		hp = fmt.Sprintf("%s status=%s", awssdk.ToString(ex.hp.ClusterArn), ex.hp.ClusterStatus)
	}
	return fmt.Sprintf("eks %s status=%s; hyperpod %s", ex.eksARN, ex.eksStatus, hp)
}

// Plan lists the cluster and every instance group with its hourly cost.
func (o *bootstrapOp) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	b, ex, err := o.observe(ctx, req)
	if err != nil {
		return nil, err
	}
	hpName := b.t.cl.HyperPod.ClusterName
	p := &ops.Plan{Observed: ex.observed()}
	if ex.hp != nil {
		p.Summary = fmt.Sprintf("HyperPod cluster %s already exists (%s): nothing to create", hpName, ex.hp.ClusterStatus)
		p.Changes = []ops.Change{{Action: ops.ActionNoop, Kind: KindHyperPodCluster, Name: hpName}}
		p.Actions, _ = json.Marshal(bootstrapAction{ClusterName: hpName, Template: b.name})
		return p, nil
	}
	if ex.eksStatus != statusActive {
		return nil, clusterBusy("EKS cluster "+b.t.cl.EKS.ClusterName, ex.eksStatus, statusActive, "")
	}
	p.Summary = fmt.Sprintf("Create HyperPod cluster %s on EKS cluster %s from template %s (%d instance groups)",
		hpName, b.t.cl.EKS.ClusterName, b.name, len(b.tpl.InstanceGroups))
	p.Changes = append(p.Changes, ops.Change{Action: ops.ActionCreate, Kind: KindHyperPodCluster, Name: hpName,
		Fields: []ops.FieldChange{
			{Path: "Orchestrator.Eks.ClusterArn", To: ex.eksARN}, {Path: "template", To: b.name},
			{Path: "VpcConfig.Subnets", To: strings.Join(b.tpl.VPC.Subnets, ", ")},
			{Path: "VpcConfig.SecurityGroupIds", To: strings.Join(b.tpl.VPC.SecurityGroups, ", ")},
		}})
	for _, g := range b.tpl.InstanceGroups {
		p.Changes = append(p.Changes, ops.Change{Action: ops.ActionCreate, Kind: KindHyperPodGroup, Name: g.Name,
			Fields: []ops.FieldChange{
				{Path: "InstanceType", To: g.InstanceType}, {Path: "InstanceCount", To: strconv.Itoa(g.InstanceCount)},
				{Path: "ExecutionRole", To: b.roleName + " (" + b.roleARN + ")"},
				{Path: "LifeCycleConfig", To: b.tpl.LifecycleScript + b.tpl.OnCreate},
			}})
		if err := addGroupCost(ctx, o.pricer, b.t.region, g, &p.Cost); err != nil {
			p.Warnings = append(p.Warnings, err.Error())
		}
	}
	manifest, _ := json.MarshalIndent(createInput(b, ex.eksARN), "", "  ")
	p.Manifest = string(manifest)
	if p.Actions, err = json.Marshal(newBootstrapAction(b, ex.eksARN)); err != nil {
		return nil, fmt.Errorf("encode the CreateCluster request: %w", err)
	}
	return p, nil
}

// bootstrapAction is the contract of a bootstrap plan (Plan.Actions): exactly the CreateCluster request Write
// sends, or nothing when the cluster exists.
type bootstrapAction struct {
	Create        bool        `json:"create"`
	ClusterName   string      `json:"clusterName"`
	Template      string      `json:"template"`
	EKSClusterARN string      `json:"eksClusterArn"`
	Subnets       []string    `json:"subnets"`
	Groups        []groupSpec `json:"groups"`
	// SecurityGroups of the VPC config.
	SecurityGroups []string `json:"securityGroups"`
	// Instances is the instance count the created cluster should reach.
	Instances int `json:"instances"`
}

func newBootstrapAction(b *blueprint, eksARN string) bootstrapAction {
	in := createInput(b, eksARN)
	a := bootstrapAction{Create: true, ClusterName: awssdk.ToString(in.ClusterName), Template: b.name, EKSClusterARN: eksARN,
		Subnets: in.VpcConfig.Subnets, SecurityGroups: in.VpcConfig.SecurityGroupIds}
	for _, g := range in.InstanceGroups {
		a.Groups = append(a.Groups, groupSpec{g})
		a.Instances += int(awssdk.ToInt32(g.InstanceCount))
	}
	return a
}

func (a bootstrapAction) input() *sagemaker.CreateClusterInput {
	in := &sagemaker.CreateClusterInput{
		ClusterName:  awssdk.String(a.ClusterName),
		Orchestrator: &smtypes.ClusterOrchestrator{Eks: &smtypes.ClusterOrchestratorEksConfig{ClusterArn: awssdk.String(a.EKSClusterARN)}},
		NodeRecovery: smtypes.ClusterNodeRecoveryAutomatic,
		VpcConfig:    &smtypes.VpcConfig{Subnets: a.Subnets, SecurityGroupIds: a.SecurityGroups},
	}
	for _, g := range a.Groups {
		in.InstanceGroups = append(in.InstanceGroups, g.ClusterInstanceGroupSpecification)
	}
	return in
}

func plannedBootstrap(plan *ops.Plan) (bootstrapAction, error) {
	var a bootstrapAction
	if plan == nil || len(plan.Actions) == 0 {
		return a, ops.Errorf(ops.CodeInternal, "", "submit the request again", "the approved plan carries no CreateCluster request")
	}
	if err := json.Unmarshal(plan.Actions, &a); err != nil {
		return a, ops.Wrap(err, ops.CodeInternal, "", "submit the request again", "the approved CreateCluster request does not decode: %v", err)
	}
	return a, nil
}

func addGroupCost(ctx context.Context, pricer ops.Pricer, region string, g config.InstanceGroup, cost *ops.Cost) error {
	if g.InstanceCount == 0 {
		return nil
	}
	c, err := deltaCost(ctx, pricer, region, g.InstanceType, g.InstanceCount)
	for _, l := range c.Lines {
		cost.AddHourly(g.Name+": "+l.Item, l.Quantity, l.UnitPrice, l.Unit)
	}
	cost.Unknown = append(cost.Unknown, c.Unknown...)
	if cost.Source == "" {
		cost.Source = c.Source
	}
	return err
}

func createInput(b *blueprint, eksARN string) *sagemaker.CreateClusterInput {
	in := &sagemaker.CreateClusterInput{
		ClusterName:  awssdk.String(b.t.cl.HyperPod.ClusterName),
		Orchestrator: &smtypes.ClusterOrchestrator{Eks: &smtypes.ClusterOrchestratorEksConfig{ClusterArn: awssdk.String(eksARN)}},
		NodeRecovery: smtypes.ClusterNodeRecoveryAutomatic,
		VpcConfig: &smtypes.VpcConfig{
			Subnets: slices.Clone(b.tpl.VPC.Subnets), SecurityGroupIds: slices.Clone(b.tpl.VPC.SecurityGroups)},
	}
	for _, g := range b.tpl.InstanceGroups {
		spec := smtypes.ClusterInstanceGroupSpecification{
			InstanceGroupName: awssdk.String(g.Name),
			InstanceType:      smtypes.ClusterInstanceType(g.InstanceType),
			InstanceCount:     awssdk.Int32(int32(g.InstanceCount)),
			ExecutionRole:     awssdk.String(b.roleARN),
			LifeCycleConfig: &smtypes.ClusterLifeCycleConfig{
				SourceS3Uri: awssdk.String(b.tpl.LifecycleScript), OnCreate: awssdk.String(b.tpl.OnCreate)},
		}
		if g.ThreadsPerCore > 0 {
			spec.ThreadsPerCore = awssdk.Int32(int32(g.ThreadsPerCore))
		}
		if g.VolumeSizeGB > 0 {
			spec.InstanceStorageConfigs = []smtypes.ClusterInstanceStorageConfig{&smtypes.ClusterInstanceStorageConfigMemberEbsVolumeConfig{
				Value: smtypes.ClusterEbsVolumeConfig{VolumeSizeInGB: awssdk.Int32(int32(g.VolumeSizeGB))}}}
		}
		in.InstanceGroups = append(in.InstanceGroups, spec)
	}
	return in
}

// BootstrapResult is bootstrap-cluster's machine-readable result (Result.Data).
type BootstrapResult struct {
	Cluster   string         `json:"cluster"`
	HyperPod  string         `json:"hyperpod"`
	ARN       string         `json:"arn"`
	Status    string         `json:"status"`
	Template  string         `json:"template"`
	Instances map[string]int `json:"instances"` // running instances by group
}

// Recheck re-reads the EKS cluster and whether the HyperPod cluster exists, which is what the plan's hash covers.
func (o *bootstrapOp) Recheck(ctx context.Context, req *ops.Request, _ *ops.Plan) (string, error) {
	_, ex, err := o.observe(ctx, req)
	if err != nil {
		return "", err
	}
	return ex.observed(), nil
}

// Execute is Write then Await in one go (ops.ExecuteSteps).
func (o *bootstrapOp) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return ops.ExecuteSteps(ctx, o, req, plan, x)
}

// Write sends exactly the plan's CreateCluster request (nothing when the plan found the cluster), right after
// checking that this execution still holds its lock. A cluster that exists by then is not an error: Await waits.
func (o *bootstrapOp) Write(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) ([]byte, error) {
	a, err := plannedBootstrap(plan)
	if err != nil {
		return nil, err
	}
	if !a.Create {
		progress.Note(ctx, "HyperPod cluster %s already exists; waiting for it", a.ClusterName)
		return []byte(`{"sent":false}`), nil
	}
	b, err := o.resolve(req)
	if err != nil {
		return nil, err
	}
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	out, err := b.t.sm.CreateCluster(ctx, a.input(), refusedOnly)
	switch {
	case err == nil:
		progress.Note(ctx, "CreateCluster accepted: %s (%s)", a.ClusterName, awssdk.ToString(out.ClusterArn))
		return json.Marshal(map[string]any{"sent": true, "arn": awssdk.ToString(out.ClusterArn)})
	case apiCode(err) == "ResourceInUse":
		progress.Note(ctx, "HyperPod cluster %s already exists; waiting for it", a.ClusterName)
		return []byte(`{"sent":false}`), nil
	}
	return nil, writeError(serviceSageMaker, "CreateCluster", err)
}

// Verify reads back whether a CreateCluster whose answer was lost took effect: DescribeCluster shows the cluster
// with the plan's orchestrator and instance groups, or no cluster at all. CreateCluster is never sent again.
func (o *bootstrapOp) Verify(ctx context.Context, req *ops.Request, plan *ops.Plan, _ ops.Execution) (ops.Verdict, []byte, error) {
	a, err := plannedBootstrap(plan)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	b, err := o.resolve(req)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	var arn string
	v, err := o.c.readBack(ctx, func(ctx context.Context) (ops.Verdict, error) {
		d, err := o.c.describeHyperPod(ctx, b.t)
		switch {
		case apiCode(err) == "ResourceNotFound":
			return ops.VerdictNotApplied, nil
		case err != nil:
			return ops.VerdictUnknown, err
		}
		if diff := a.differs(d); diff != "" {
			return ops.VerdictUnknown, ops.Errorf(ops.CodeAWSError, "template",
				"compare the cluster with the template, then Take over and Resume, or Stop",
				"HyperPod cluster %s exists but not as planned: %s", a.ClusterName, diff)
		}
		arn = awssdk.ToString(d.ClusterArn)
		return ops.VerdictApplied, nil
	})
	if v != ops.VerdictApplied {
		return v, nil, err
	}
	progress.Note(ctx, "read back: HyperPod cluster %s exists as planned (%s), so CreateCluster took effect", a.ClusterName, arn)
	w, err := json.Marshal(map[string]any{"sent": true, "arn": arn})
	return v, w, err
}

// differs says how a described cluster differs from the planned CreateCluster ("" when it is ours).
func (a bootstrapAction) differs(d *sagemaker.DescribeClusterOutput) string {
	if d.Orchestrator == nil || d.Orchestrator.Eks == nil || awssdk.ToString(d.Orchestrator.Eks.ClusterArn) != a.EKSClusterARN {
		return "it is not orchestrated by " + a.EKSClusterARN
	}
	for _, g := range a.Groups {
		name := awssdk.ToString(g.InstanceGroupName)
		i := slices.IndexFunc(d.InstanceGroups, func(x smtypes.ClusterInstanceGroupDetails) bool { return awssdk.ToString(x.InstanceGroupName) == name })
		if i < 0 {
			return "it has no instance group " + name
		}
		got := d.InstanceGroups[i]
		if string(got.InstanceType) != string(g.InstanceType) || awssdk.ToInt32(got.TargetCount) != awssdk.ToInt32(g.InstanceCount) {
			return fmt.Sprintf("instance group %s is %d × %s, planned %d × %s", name, awssdk.ToInt32(got.TargetCount), got.InstanceType,
				awssdk.ToInt32(g.InstanceCount), g.InstanceType)
		}
	}
	return ""
}

// Await waits for the cluster to be InService; it sends nothing.
func (o *bootstrapOp) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, _ []byte, _ ops.Execution) (*ops.Result, error) {
	a, err := plannedBootstrap(plan)
	if err != nil {
		return nil, err
	}
	b, err := o.resolve(req)
	if err != nil {
		return nil, err
	}
	hpName := a.ClusterName
	res := BootstrapResult{Cluster: b.t.name, HyperPod: hpName, Template: b.name}
	want := a.Instances
	if !a.Create {
		for _, g := range b.tpl.InstanceGroups {
			want += g.InstanceCount
		}
	}
	err = o.c.wait(ctx, "HyperPod cluster "+hpName+" to be InService", func(ctx context.Context) (string, bool, error, error) {
		d, err := o.c.describeHyperPod(ctx, b.t)
		if err != nil {
			return "", false, nil, err
		}
		res.ARN, res.Status, res.Instances = awssdk.ToString(d.ClusterArn), string(d.ClusterStatus), map[string]int{}
		running := 0
		for _, g := range d.InstanceGroups {
			n := int(awssdk.ToInt32(g.CurrentCount))
			res.Instances[awssdk.ToString(g.InstanceGroupName)] = n
			running += n
		}
		status := fmt.Sprintf("%s: %d/%d instances running", d.ClusterStatus, running, want)
		if d.ClusterStatus == smtypes.ClusterStatusFailed {
			return status, false, ops.Errorf(ops.CodeAWSError, "", "read the failure, fix its cause (template, role, quotas), delete the failed cluster, then retry",
				"creating HyperPod cluster %s failed: %s", hpName, failureText(awssdk.ToString(d.FailureMessage))), nil
		}
		return status, d.ClusterStatus == smtypes.ClusterStatusInservice, nil, nil
	})
	if err != nil {
		return nil, err
	}
	data, _ := json.Marshal(res)
	return &ops.Result{
		Summary: fmt.Sprintf("HyperPod cluster %s is InService on EKS cluster %s (template %s)", hpName, b.t.cl.EKS.ClusterName, b.name),
		Details: []ops.Detail{{Label: "HyperPod cluster", Value: res.ARN}, {Label: "template", Value: b.name},
			{Label: "execution role", Value: b.roleName}},
		Data:    data,
		Objects: []ops.ObjectRef{{Cluster: b.t.name, Kind: KindHyperPodCluster, Name: hpName}},
	}, nil
}

// Observe reads the HyperPod cluster's state for a request whose execution was interrupted.
func (o *bootstrapOp) Observe(ctx context.Context, req *ops.Request) (*ops.Result, error) {
	b, ex, err := o.observe(ctx, req)
	if err != nil {
		return nil, err
	}
	if ex.hp == nil {
		return &ops.Result{Summary: fmt.Sprintf("HyperPod cluster %s does not exist", b.t.cl.HyperPod.ClusterName)}, nil
	}
	summary := fmt.Sprintf("HyperPod cluster %s is %s", b.t.cl.HyperPod.ClusterName, ex.hp.ClusterStatus)
	if m := awssdk.ToString(ex.hp.FailureMessage); m != "" {
		summary += ": " + m
	}
	return &ops.Result{Summary: summary, Objects: []ops.ObjectRef{{Cluster: b.t.name, Kind: KindHyperPodCluster, Name: b.t.cl.HyperPod.ClusterName}}}, nil
}
