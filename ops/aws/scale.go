package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/pricing"
	"github.com/hyperops/hyperops/ops/progress"
)

// OpScaleCapacity is the name of the scale-capacity operation.
const OpScaleCapacity = "scale-capacity"

// scaleOp is scale-capacity: a HyperPod instance group (UpdateCluster) or an EKS managed node group
// (UpdateNodegroupConfig) to count instances, then watched until AWS reports it done.
type scaleOp struct {
	c      *Clients
	pricer ops.Pricer
	nodes  fleet.NodeCounter
}

var scaleParams = []ops.ParamSpec{
	{Name: "group", Kind: ops.KindString, Required: true, Help: "the HyperPod instance group or EKS managed node group"},
	{Name: "count", Kind: ops.KindInt, Required: true, Help: "the number of instances the group should have",
		Bound: &ops.Bound{Limit: func(l config.Limits) int { return l.MaxNodesPerGroup }}},
}

func (o *scaleOp) Spec() ops.Spec {
	return ops.Spec{
		Name: OpScaleCapacity, Domain: "capacity", Topic: "capacity", Verb: "scale", Mutates: true,
		Summary:  "Scale a HyperPod instance group or an EKS managed node group to a number of instances",
		Baseline: ops.RiskLow, Params: scaleParams, Budget: ops.BudgetCapacity,
		Lock: func(r ops.Request) ops.LockScope {
			return ops.LockScope{Cluster: r.Target.Cluster, Kind: "capacity", Name: r.Params.String("group")}
		},
		Headline: scaleHeadline, Destructive: true, ClusterWide: true,
		Revert: "scales the group back to the instance count it had",
	}
}

var scaleHeadline = ops.MustTemplate(`Scale the node group {{.Param "group"}} of {{.Cluster}}` +
	`{{with .Change}} from {{.From}} to {{.To}}{{else}} to {{.Plural (.Int "count" 0) "node" "nodes"}}{{end}}`)

// Validate checks the guardrails: the count is within limits.maxNodesPerGroup, and the group exists and has an
// allowed instance type. Whether the cluster is InService is checked by Plan, after the engine has checked the
// lock, so that a second scaling of a busy group is told who holds it.
func (o *scaleOp) Validate(ctx context.Context, req *ops.Request) error {
	t, g, err := o.lookup(ctx, req)
	if err != nil {
		return err
	}
	return checkInstanceTypes(g, t)
}

// observe reads the group and checks every guardrail, the cluster's status included.
func (o *scaleOp) observe(ctx context.Context, req *ops.Request) (*target, *groupState, error) {
	t, g, err := o.lookup(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if err := checkGroup(t, g); err != nil {
		return nil, nil, err
	}
	return t, g, nil
}

func (o *scaleOp) lookup(ctx context.Context, req *ops.Request) (*target, *groupState, error) {
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, nil, err
	}
	if err := checkHasCapacity(t); err != nil {
		return nil, nil, err
	}
	if err := checkCount(t, req.Params); err != nil {
		return nil, nil, err
	}
	g, err := o.c.findGroup(ctx, t, req.Params.String("group"))
	if err != nil {
		return nil, nil, err
	}
	return t, g, nil
}

func checkCount(t *target, p ops.Params) error {
	count, ok := p.Int("count")
	if !ok {
		return ops.Errorf(ops.CodeInvalidArgument, "count", "add count=N", "count is required")
	}
	if count < 0 {
		return ops.Errorf(ops.CodeInvalidArgument, "count", "give 0 or more instances", "count=%d is negative", count)
	}
	limit := t.cl.Limits.MaxNodesPerGroup
	if count > int64(limit) {
		return ops.Errorf(ops.CodeQuotaExceeded, "count",
			fmt.Sprintf("ask for at most %d, or raise limits.maxNodesPerGroup for %s in config", limit, t.name),
			"count=%d is above limits.maxNodesPerGroup=%d of cluster %s", count, limit, t.name)
	}
	return nil
}

func checkInstanceTypes(g *groupState, t *target) error {
	for _, it := range g.InstanceTypes {
		if !t.cl.AllowsInstanceType(it) {
			return ops.Errorf(ops.CodeInstanceTypeNotAllow, "group",
				fmt.Sprintf("allowed instance types of %s (instanceTypes): %s", t.name, strings.Join(t.cl.InstanceTypes, ", ")),
				"group %s runs %s, which is not in instanceTypes of cluster %s", g.Name, it, t.name)
		}
	}
	return nil
}

// checkGroup refuses a group whose instance type is not allowed or whose cluster is busy or failed.
func checkGroup(t *target, g *groupState) error {
	if err := checkInstanceTypes(g, t); err != nil {
		return err
	}
	want := statusInService
	if g.Kind == KindEKSNodegroup {
		want = statusActive
	}
	what := "HyperPod cluster " + g.Cluster
	if g.Kind == KindEKSNodegroup {
		what = "EKS cluster " + g.Cluster
	}
	if g.ClusterStatus != want {
		return clusterBusy(what, g.ClusterStatus, want, g.Failure)
	}
	if g.Kind == KindEKSNodegroup && g.Status != statusActive {
		return clusterBusy("node group "+g.Name, g.Status, want, g.Failure)
	}
	return nil
}

func clusterBusy(what, status, want, failure string) error {
	msg := fmt.Sprintf("%s is %s; scale-capacity needs %s", what, status, want)
	if failure != "" {
		msg += " (" + failure + ")"
	}
	return &ops.Error{Code: ops.CodeClusterUnavailable, Field: "cluster", Message: msg,
		Next: "wait for the change in progress to finish (" + ops.Ask("capacity show") + "), then retry"}
}

// Plan diffs the count against AWS's, prices the difference and rates scaling down.
func (o *scaleOp) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	t, g, err := o.observe(ctx, req)
	if err != nil {
		return nil, err
	}
	count, _ := req.Params.Int("count")
	to := int(count)
	p := &ops.Plan{Observed: g.observed()}
	field := "InstanceCount"
	if g.Kind == KindEKSNodegroup {
		field = "scalingConfig.desiredSize"
	}
	ch := ops.Change{Action: ops.ActionUpdate, Kind: g.Kind, Name: g.Name,
		Fields: []ops.FieldChange{{Path: field, From: strconv.Itoa(g.Target), To: strconv.Itoa(to)}}}
	if g.Kind == KindEKSNodegroup {
		ch.Fields = append(ch.Fields, eksBoundChanges(g, to)...)
	}
	if to == g.Target {
		ch.Action, ch.Fields = ops.ActionNoop, nil
		p.Summary = fmt.Sprintf("%s %s of %s already targets %d × %s: nothing to change", kindLabel(g.Kind), g.Name, g.Cluster, to, g.InstanceType())
		p.Undo = &ops.Undo{Refusal: "it changed nothing: the group already had that count"}
	} else {
		p.Summary = fmt.Sprintf("Scale %s %s of %s from %d to %d × %s", kindLabel(g.Kind), g.Name, g.Cluster, g.Target, to, g.InstanceType())
		p.Undo = &ops.Undo{Operation: OpScaleCapacity, Params: ops.Params{"group": g.Name, "count": int64(g.Target)},
			Restores: fmt.Sprintf("%s %s back to %d, the count it had", kindLabel(g.Kind), g.Name, g.Target)}
	}
	p.Changes = []ops.Change{ch}
	if p.Actions, err = json.Marshal(action(g, to)); err != nil {
		return nil, fmt.Errorf("encode the AWS request: %w", err)
	}
	if len(g.InstanceTypes) > 1 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("node group %s mixes %s; priced as %s", g.Name, strings.Join(g.InstanceTypes, ", "), g.InstanceType()))
	}
	if g.Current >= 0 && g.Current != g.Target {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s has %d instances running of %d targeted", g.Name, g.Current, g.Target))
	}
	delta := to - g.Target
	if delta != 0 {
		p.Cost, err = deltaCost(ctx, o.pricer, t.region, g.InstanceType(), delta)
		if err != nil {
			p.Warnings = append(p.Warnings, err.Error())
		}
	}
	if r := o.c.groupReservation(ctx, t, g); r != nil {
		reservationNotes(p, r, delta)
	}
	switch {
	case to == 0 && g.Target > 0:
		p.Risk.Add(ops.RiskCritical, "scales %s to zero: removes all %d instances and stops everything running on them", g.Name, g.Target)
	case delta < 0:
		p.Risk.Add(ops.RiskHigh, "scale down: removes %d of %d instances of %s (work running on them is stopped)", -delta, g.Target, g.Name)
	}
	return p, nil
}

// soonEnding is how close to its reservation's end a scale-up is planned at medium risk: the instances it adds
// would hardly be up before they are taken back.
const soonEnding = time.Hour

// reservationNotes tells a scale plan the reservation its group runs on and when it ends; adding instances to one
// that ends within soonEnding, or has ended, is medium risk. An end that could not be read is said, the risk left
// as it is.
func reservationNotes(p *ops.Plan, r *ops.CapacityReservation, delta int) {
	p.Reservations = append(p.Reservations, *r)
	if !r.Known() {
		p.Warnings = append(p.Warnings, r.Line()+": the plan goes on without it")
		return
	}
	if delta > 0 && r.Left < soonEnding {
		p.Risk.Add(ops.RiskMedium, "adds %d instance(s) to %s, whose training plan %s %s: SageMaker takes them back then",
			delta, r.Group, r.Plan, r.Ends())
	}
}

func kindLabel(kind string) string {
	if kind == KindEKSNodegroup {
		return "EKS node group"
	}
	return "HyperPod instance group"
}

// eksBoundChanges lists the min/max changes UpdateNodegroupConfig needs so that min ≤ desired ≤ max.
func eksBoundChanges(g *groupState, to int) []ops.FieldChange {
	var out []ops.FieldChange
	if to > g.Max {
		out = append(out, ops.FieldChange{Path: "scalingConfig.maxSize", From: strconv.Itoa(g.Max), To: strconv.Itoa(to)})
	}
	if to < g.Min {
		out = append(out, ops.FieldChange{Path: "scalingConfig.minSize", From: strconv.Itoa(g.Min), To: strconv.Itoa(to)})
	}
	return out
}

// deltaCost is Δ instances × the on-demand price, and Δ instances × the type's GPUs; an unknown price is listed,
// never priced at zero.
func deltaCost(ctx context.Context, pricer ops.Pricer, region, instanceType string, delta int) (ops.Cost, error) {
	var cost ops.Cost
	if shape, ok := pricing.Shape(instanceType); ok {
		cost.GPUs = delta * shape.GPUs // what GPU and GPU-hour budgets charge
	}
	if pricer == nil {
		cost.Unknown = []string{instanceType}
		return cost, nil
	}
	price, ok, err := pricer.Price(ctx, region, instanceType)
	if err != nil || !ok {
		cost.Unknown = []string{instanceType}
		if err != nil {
			return cost, fmt.Errorf("price of %s unavailable: %w", instanceType, err)
		}
		return cost, nil
	}
	cost.Source = price.Source
	cost.AddHourly(fmt.Sprintf("%s × %+d", instanceType, delta), float64(delta), price.Hourly, "instance-hour")
	return cost, nil
}

// ScaleResult is scale-capacity's machine-readable result (Result.Data).
type ScaleResult struct {
	Cluster      string `json:"cluster"`
	AWSCluster   string `json:"awsCluster"`
	Kind         string `json:"kind"`
	Group        string `json:"group"`
	InstanceType string `json:"instanceType"`
	From         int    `json:"from"`
	To           int    `json:"to"`
	Status       string `json:"status"`
	// Current is the instances running, or -1 where AWS does not report it (EKS).
	Current int `json:"current"`
	// UpdateID is the EKS update that made the change.
	UpdateID string `json:"updateId,omitempty"`
}

// scaleAction is the contract of a scale-capacity plan (Plan.Actions): exactly what Write sends.
type scaleAction struct {
	Kind       string `json:"kind"`
	AWSCluster string `json:"awsCluster"`
	Group      string `json:"group"`
	From       int    `json:"from"`
	To         int    `json:"to"`
	// InstanceType is for the result's wording.
	InstanceType string `json:"instanceType"`
	// HyperPod is the instance group of UpdateCluster; EKS the scaling config of UpdateNodegroupConfig.
	HyperPod *groupSpec                       `json:"hyperPod,omitempty"`
	EKS      *ekstypes.NodegroupScalingConfig `json:"eks,omitempty"`
}

// scaleWritten is what Write recorded: the EKS update to follow (HyperPod has no update id; its group is read).
type scaleWritten struct {
	Sent     bool   `json:"sent"`
	UpdateID string `json:"updateId,omitempty"`
}

// action builds the exact AWS request of a plan.
func action(g *groupState, to int) scaleAction {
	a := scaleAction{Kind: g.Kind, AWSCluster: g.Cluster, Group: g.Name, From: g.Target, To: to, InstanceType: g.InstanceType()}
	if g.Target == to {
		return a
	}
	if g.Kind == KindHyperPodGroup {
		a.HyperPod = &groupSpec{updateSpec(g.hp, to)}
		return a
	}
	sc := &ekstypes.NodegroupScalingConfig{DesiredSize: awssdk.Int32(int32(to))}
	if to > g.Max {
		sc.MaxSize = awssdk.Int32(int32(to))
	}
	if to < g.Min {
		sc.MinSize = awssdk.Int32(int32(to))
	}
	a.EKS = sc
	return a
}

func planned(plan *ops.Plan) (scaleAction, error) {
	var a scaleAction
	if plan == nil || len(plan.Actions) == 0 {
		return a, ops.Errorf(ops.CodeInternal, "", "submit the request again", "the approved plan carries no AWS request to send")
	}
	if err := json.Unmarshal(plan.Actions, &a); err != nil {
		return a, ops.Wrap(err, ops.CodeInternal, "", "submit the request again", "the approved plan's AWS request does not decode: %v", err)
	}
	return a, nil
}

// Recheck re-reads the group and the cluster's status, which is all the plan's hash covers.
func (o *scaleOp) Recheck(ctx context.Context, req *ops.Request, _ *ops.Plan) (string, error) {
	_, g, err := o.observe(ctx, req)
	if err != nil {
		return "", err
	}
	return g.observed(), nil
}

// Execute is Write then Await in one go (ops.ExecuteSteps).
func (o *scaleOp) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return ops.ExecuteSteps(ctx, o, req, plan, x)
}

// Write sends exactly the plan's AWS request, after checking that this execution still holds its lock. EKS's
// clientRequestToken comes from the request id and the fence, so a retry by the same holder is idempotent at AWS
// and a later holder's request is a new one.
func (o *scaleOp) Write(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) ([]byte, error) {
	a, err := planned(plan)
	if err != nil {
		return nil, err
	}
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, err
	}
	if a.HyperPod == nil && a.EKS == nil {
		progress.Note(ctx, "%s already targets %d instances; waiting for AWS to get there", a.Group, a.To)
		return json.Marshal(scaleWritten{})
	}
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	if a.HyperPod != nil {
		_, err := t.sm.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{
			ClusterName: awssdk.String(a.AWSCluster), InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{a.HyperPod.ClusterInstanceGroupSpecification},
		}, refusedOnly)
		if err != nil {
			return nil, writeError(serviceSageMaker, "UpdateCluster", err)
		}
		progress.Note(ctx, "UpdateCluster accepted: %s %d → %d × %s", a.Group, a.From, a.To, a.InstanceType)
		return json.Marshal(scaleWritten{Sent: true})
	}
	id, err := updateNodegroup(ctx, t, a, req, x)
	if err != nil {
		return nil, err
	}
	progress.Note(ctx, "UpdateNodegroupConfig accepted: %s desiredSize %d → %d (update %s)", a.Group, a.From, a.To, id)
	return json.Marshal(scaleWritten{Sent: true, UpdateID: id})
}

// updateNodegroup sends the plan's UpdateNodegroupConfig with the request's and fence's clientRequestToken, so the
// SDK's retries and a read-back's re-send are the same request to EKS.
func updateNodegroup(ctx context.Context, t *target, a scaleAction, req *ops.Request, x ops.Execution) (string, error) {
	out, err := t.eks.UpdateNodegroupConfig(ctx, &eks.UpdateNodegroupConfigInput{
		ClusterName: awssdk.String(a.AWSCluster), NodegroupName: awssdk.String(a.Group), ScalingConfig: a.EKS,
		ClientRequestToken: awssdk.String(clientToken(req.ID, x.Fence)),
	})
	if err != nil {
		return "", writeError(serviceEKS, "UpdateNodegroupConfig", err)
	}
	return awssdk.ToString(out.Update.Id), nil
}

// Verify reads back whether a scaling whose answer was lost took effect, without sending UpdateCluster again.
// HyperPod: DescribeCluster shows the group's TargetCount at the planned count once UpdateCluster was applied.
// EKS: UpdateNodegroupConfig sent again with the same clientRequestToken returns the update the lost call made,
// or makes it now; either way it is one change.
func (o *scaleOp) Verify(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (ops.Verdict, []byte, error) {
	a, err := planned(plan)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	switch {
	case a.EKS != nil:
		return o.resendNodegroup(ctx, t, a, req, x)
	case a.HyperPod == nil:
		return ops.VerdictApplied, []byte(`{"sent":false}`), nil
	}
	v, err := o.c.readBack(ctx, func(ctx context.Context) (ops.Verdict, error) {
		out, err := o.c.describeHyperPod(ctx, t)
		if err != nil {
			return ops.VerdictUnknown, err
		}
		return hyperPodVerdict(hyperPodGroup(out, a.Group), a)
	})
	if v != ops.VerdictApplied {
		return v, nil, err
	}
	progress.Note(ctx, "read back: %s of %s targets %d, so UpdateCluster took effect", a.Group, a.AWSCluster, a.To)
	w, err := json.Marshal(scaleWritten{Sent: true})
	return v, w, err
}

// hyperPodVerdict judges a group as DescribeCluster shows it after an UpdateCluster whose answer was lost.
func hyperPodVerdict(g *groupState, a scaleAction) (ops.Verdict, error) {
	next := "check the group with " + ops.Ask("capacity show") + ", then Take over and Resume, or Stop"
	switch {
	case g == nil:
		return ops.VerdictUnknown, ops.Errorf(ops.CodeAWSError, "group", next, "instance group %s is no longer in %s", a.Group, a.AWSCluster)
	case g.Target == a.To:
		return ops.VerdictApplied, nil
	case g.Target == a.From && g.ClusterStatus == statusInService:
		return ops.VerdictNotApplied, nil
	}
	return ops.VerdictUnknown, ops.Errorf(ops.CodeAWSError, "group", next,
		"instance group %s targets %d (cluster %s): neither the %d it had nor the %d planned", a.Group, g.Target, g.ClusterStatus, a.From, a.To)
}

// resendNodegroup is the EKS read-back: the same request again, under the same lock and token.
func (o *scaleOp) resendNodegroup(ctx context.Context, t *target, a scaleAction, req *ops.Request, x ops.Execution) (ops.Verdict, []byte, error) {
	if err := x.Check(ctx); err != nil {
		return ops.VerdictUnknown, nil, err
	}
	id, err := updateNodegroup(ctx, t, a, req, x)
	switch {
	case errors.Is(err, ops.ErrOutcomeUnknown):
		return ops.VerdictUnknown, nil, err
	case err != nil:
		return ops.VerdictNotApplied, nil, err // a refusal: the token was new to EKS, so the lost call changed nothing
	}
	progress.Note(ctx, "UpdateNodegroupConfig sent again with the same clientRequestToken: update %s", id)
	w, err := json.Marshal(scaleWritten{Sent: true, UpdateID: id})
	return ops.VerdictApplied, w, err
}

// Await watches the group until AWS reports the change done (or failed), reporting each step and, for a HyperPod
// group, the group's cluster events (eventFeed), each once across hand-overs. It sends nothing, so a replica
// resuming a request whose write was recorded only observes.
func (o *scaleOp) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	a, err := planned(plan)
	if err != nil {
		return nil, err
	}
	var w scaleWritten
	if err := json.Unmarshal(written, &w); err != nil {
		return nil, ops.Wrap(err, ops.CodeInternal, "", "check the group with "+ops.Ask("capacity show"), "the recorded write does not decode")
	}
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, err
	}
	res := ScaleResult{Cluster: t.name, AWSCluster: a.AWSCluster, Kind: a.Kind, Group: a.Group, InstanceType: a.InstanceType,
		From: a.From, To: a.To, UpdateID: w.UpdateID}
	if a.Kind == KindHyperPodGroup {
		err = o.awaitHyperPod(ctx, t, a, o.c.newEventFeed(t, a.AWSCluster, a.Group, x, true), &res)
	} else {
		err = o.awaitNodegroup(ctx, t, a, w, &res)
	}
	if err != nil {
		return nil, err
	}
	return o.result(ctx, t, &res), nil
}

// awaitHyperPod polls the group until it is at its count, telling the group's cluster events as they come.
func (o *scaleOp) awaitHyperPod(ctx context.Context, t *target, a scaleAction, events *eventFeed, res *ScaleResult) error {
	count := a.To
	up := count >= a.From
	return o.c.wait(ctx, fmt.Sprintf("%s of %s to reach %d", a.Group, a.AWSCluster, count), func(ctx context.Context) (string, bool, error, error) {
		out, err := o.c.describeHyperPod(ctx, t)
		if err != nil {
			return "", false, nil, err
		}
		now := hyperPodGroup(out, a.Group)
		if now == nil {
			return "", false, ops.Errorf(ops.CodeAWSError, "group", "check the cluster with "+ops.Ask("capacity show"),
				"instance group %s disappeared from %s while scaling", a.Group, a.AWSCluster), nil
		}
		res.Status, res.Current = now.ClusterStatus, now.Current
		status := fmt.Sprintf("%d/%d InService (cluster %s)", now.Current, count, now.ClusterStatus)
		if !up {
			status = fmt.Sprintf("%d instances left, target %d (cluster %s)", now.Current, count, now.ClusterStatus)
		}
		failed := now.ClusterStatus == statusFailed || now.Status == statusFailed
		done := now.ClusterStatus == statusInService && now.Current == count && now.Target == count
		events.tell(ctx, done || failed) // read after the status, so the events that led to it are told before it
		if failed {
			return status, false, ops.Errorf(ops.CodeAWSError, "", "read the failure on AWS, fix its cause, then retry",
				"scaling %s of %s failed: %s", a.Group, a.AWSCluster, failureText(now.Failure)), nil
		}
		return status, done, nil, nil
	})
}

func failureText(msg string) string {
	if msg == "" {
		return "AWS gave no FailureMessage"
	}
	return msg
}

// clientToken makes UpdateNodegroupConfig idempotent per request and lock holder: a retry by the same holder
// gets the same update back, and a later holder (a larger fence) sends a request of its own.
func clientToken(requestID string, fence int64) string {
	sum := sha256.Sum256([]byte(requestID + "/" + strconv.FormatInt(fence, 10)))
	return "hyperops-" + hex.EncodeToString(sum[:16])
}

func (o *scaleOp) awaitNodegroup(ctx context.Context, t *target, a scaleAction, w scaleWritten, res *ScaleResult) error {
	count := a.To
	if !w.Sent {
		ng, err := o.c.describeNodegroup(ctx, t, a.Group)
		if err != nil {
			return err
		}
		res.Status = string(ng.Status)
		if ng.Status == ekstypes.NodegroupStatusActive {
			progress.Note(ctx, "node group %s already has desiredSize %d", a.Group, count)
			return nil
		}
	}
	id := w.UpdateID
	return o.c.wait(ctx, fmt.Sprintf("node group %s to reach %d", a.Group, count), func(ctx context.Context) (string, bool, error, error) {
		ng, err := o.c.describeNodegroup(ctx, t, a.Group)
		if err != nil {
			return "", false, nil, err
		}
		res.Status = string(ng.Status)
		if id == "" {
			return fmt.Sprintf("node group %s", ng.Status), ng.Status == ekstypes.NodegroupStatusActive, nil, nil
		}
		u, err := t.eks.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: awssdk.String(a.AWSCluster), UpdateId: awssdk.String(id),
			NodegroupName: awssdk.String(a.Group)})
		if err != nil {
			return "", false, nil, awsError(serviceEKS, "DescribeUpdate", err)
		}
		status := fmt.Sprintf("update %s, node group %s", u.Update.Status, ng.Status)
		if k := o.kubeGroup(ctx, t.name, a.Group); k != nil {
			status += fmt.Sprintf(", %d/%d nodes Ready", k.Ready, count)
		}
		switch u.Update.Status {
		case ekstypes.UpdateStatusFailed, ekstypes.UpdateStatusCancelled:
			return status, false, ops.Errorf(ops.CodeAWSError, "", "read the node group's health on AWS, fix its cause, then retry",
				"scaling node group %s failed: %s", a.Group, updateErrors(u.Update.Errors)), nil
		case ekstypes.UpdateStatusSuccessful:
			return status, ng.Status == ekstypes.NodegroupStatusActive, nil, nil
		}
		return status, false, nil, nil
	})
}

func updateErrors(errs []ekstypes.ErrorDetail) string {
	if len(errs) == 0 {
		return "AWS gave no error detail"
	}
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("%s: %s", e.ErrorCode, awssdk.ToString(e.ErrorMessage)))
	}
	return strings.Join(parts, "; ")
}

// kubeGroup is the Kubernetes view of one group, or nil when there is none.
func (o *scaleOp) kubeGroup(ctx context.Context, cluster, group string) *fleet.GroupNodes {
	if o.nodes == nil {
		return nil
	}
	groups, err := o.nodes.NodeGroups(ctx, cluster)
	if err != nil {
		return nil
	}
	for i := range groups {
		if groups[i].Group == group {
			return &groups[i]
		}
	}
	return nil
}

func (o *scaleOp) result(ctx context.Context, t *target, r *ScaleResult) *ops.Result {
	data, _ := json.Marshal(r)
	summary := fmt.Sprintf("%s %s of %s scaled from %d to %d × %s", kindLabel(r.Kind), r.Group, r.AWSCluster, r.From, r.To, r.InstanceType)
	if r.From == r.To {
		summary = fmt.Sprintf("%s %s of %s already had %d × %s", kindLabel(r.Kind), r.Group, r.AWSCluster, r.To, r.InstanceType)
	}
	res := &ops.Result{Summary: summary, Data: data,
		Details: []ops.Detail{{Label: "group", Value: r.Group}, {Label: "instances", Value: fmt.Sprintf("%d → %d", r.From, r.To)},
			{Label: "status", Value: r.Status}},
		Objects: []ops.ObjectRef{{Cluster: t.name, Kind: r.Kind, Name: r.Group}},
	}
	if k := o.kubeGroup(ctx, t.name, r.Group); k != nil {
		res.Details = append(res.Details, ops.Detail{Label: "Kubernetes", Value: fmt.Sprintf("%d nodes, %d Ready", k.Nodes, k.Ready)})
	}
	return res
}

// Observe reads what the group looks like now, for a request whose execution was interrupted.
func (o *scaleOp) Observe(ctx context.Context, req *ops.Request) (*ops.Result, error) {
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, err
	}
	g, err := o.c.findGroup(ctx, t, req.Params.String("group"))
	if err != nil {
		return nil, err
	}
	count, _ := req.Params.Int("count")
	r := ScaleResult{Cluster: t.name, AWSCluster: g.Cluster, Kind: g.Kind, Group: g.Name, InstanceType: g.InstanceType(),
		From: g.Target, To: int(count), Status: g.ClusterStatus, Current: g.Current}
	if g.Kind == KindEKSNodegroup {
		r.Status = g.Status
	}
	data, _ := json.Marshal(r)
	running := "running count not reported by AWS"
	if g.Current >= 0 {
		running = fmt.Sprintf("%d running", g.Current)
	}
	return &ops.Result{
		Summary: fmt.Sprintf("%s %s of %s: target %d (asked %d), %s, status %s", kindLabel(g.Kind), g.Name, g.Cluster, g.Target, count, running, r.Status),
		Data:    data, Objects: []ops.ObjectRef{{Cluster: t.name, Kind: g.Kind, Name: g.Name}},
	}, nil
}
