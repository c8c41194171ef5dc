package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/progress"
)

// The names of the node recovery operations.
const (
	OpRebootNodes  = "reboot-nodes"
	OpReplaceNodes = "replace-nodes"
)

// maxRecoveryNodes is how many instances one BatchRebootClusterNodes or BatchReplaceClusterNodes takes.
const maxRecoveryNodes = 25

// The instance statuses recovery reads (smtypes.ClusterInstanceStatus).
const (
	instanceRunning      = "Running"
	instanceFailure      = "Failure"
	instancePending      = "Pending"
	instanceShuttingDown = "ShuttingDown"
)

// recoveryOp is reboot-nodes or replace-nodes: one BatchRebootClusterNodes or BatchReplaceClusterNodes for chosen
// instances of one HyperPod instance group, then watched until every instance is back (or its replacement runs).
type recoveryOp struct {
	c *Clients
	// nodes is the Kubernetes view; when it is an fleet.NodePodReader the plan lists the pods it stops.
	nodes   fleet.NodeCounter
	replace bool
}

var recoveryParams = []ops.ParamSpec{
	{Name: "group", Kind: ops.KindString, Required: true, Help: "the HyperPod instance group the nodes belong to"},
	{Name: "nodes", Kind: ops.KindString, Help: "instance ids of the group, comma-separated (or faulty=true)"},
	{Name: "faulty", Kind: ops.KindBool, Help: "the instances of the group HyperPod reports as Failure (instead of nodes=)"},
}

// call is the SageMaker call the operation makes; verb and done say what happens to a node in words.
func (o *recoveryOp) call() string {
	if o.replace {
		return "BatchReplaceClusterNodes"
	}
	return "BatchRebootClusterNodes"
}

func (o *recoveryOp) verb() string {
	if o.replace {
		return "replace"
	}
	return "reboot"
}

func (o *recoveryOp) Spec() ops.Spec {
	s := ops.Spec{
		Name: OpRebootNodes, Domain: "capacity", Topic: "nodes", Verb: "reboot", Mutates: true,
		Summary:  "Reboot instances of a HyperPod instance group (by id, or the faulty ones) with BatchRebootClusterNodes",
		Baseline: ops.RiskMedium, Params: recoveryParams, Budget: ops.BudgetCapacity,
		Lock: recoveryLock, Headline: rebootHeadline, Destructive: true, ClusterWide: true,
		Revert: "nothing: a reboot cannot be undone",
	}
	if o.replace {
		s.Name, s.Verb, s.Baseline, s.Headline = OpReplaceNodes, "replace", ops.RiskHigh, replaceHeadline
		s.Summary = "Replace instances of a HyperPod instance group (by id, or the faulty ones) with new ones, keeping the count, with BatchReplaceClusterNodes"
		s.Revert = "nothing: a replaced instance and its local storage are gone"
	}
	return s
}

// recoveryLock is scale-capacity's scope, so a scaling and a recovery of one group never overlap.
func recoveryLock(r ops.Request) ops.LockScope {
	return ops.LockScope{Cluster: r.Target.Cluster, Kind: "capacity", Name: r.Params.String("group")}
}

var (
	rebootHeadline = ops.MustTemplate(`Reboot {{if .Set "nodes"}}the nodes {{.Param "nodes"}}{{else}}the faulty nodes{{end}}` +
		` of the instance group {{.Param "group"}} of {{.Cluster}}`)
	replaceHeadline = ops.MustTemplate(`Replace {{if .Set "nodes"}}the nodes {{.Param "nodes"}}{{else}}the faulty nodes{{end}}` +
		` of the instance group {{.Param "group"}} of {{.Cluster}} with new instances`)
)

// Validate checks what needs no AWS read: a HyperPod cluster is configured, and exactly one of nodes= and faulty=true
// is given, with at most maxRecoveryNodes ids. The ids and the cluster's status are checked by Plan.
func (o *recoveryOp) Validate(_ context.Context, req *ops.Request) error {
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return err
	}
	if t.cl.HyperPod.ClusterName == "" {
		return ops.Errorf(ops.CodeInvalidArgument, "cluster", "set hyperpod.clusterName for the cluster in config, or pick a HyperPod cluster",
			"cluster %s has no HyperPod cluster: %s works on HyperPod instances only", t.name, o.Spec().Name)
	}
	ids, faulty := nodeIDs(req.Params), req.Params.Bool("faulty")
	switch {
	case len(ids) == 0 && !faulty:
		return ops.Errorf(ops.CodeInvalidArgument, "nodes", "add nodes=i-…,i-… or faulty=true",
			"say which nodes to %s: nodes= or faulty=true", o.verb())
	case len(ids) > 0 && faulty:
		return ops.Errorf(ops.CodeInvalidArgument, "nodes", "keep one of nodes= and faulty=true",
			"nodes= and faulty=true both given: pick one")
	case len(ids) > maxRecoveryNodes:
		return ops.Errorf(ops.CodeInvalidArgument, "nodes", fmt.Sprintf("split them into requests of at most %d", maxRecoveryNodes),
			"%d nodes given; %s takes at most %d", len(ids), o.call(), maxRecoveryNodes)
	}
	return nil
}

// nodeIDs is nodes= split on commas, without blanks and repeats, in the order given.
func nodeIDs(p ops.Params) []string {
	var out []string
	for _, id := range strings.Split(p.String("nodes"), ",") {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// recoveryAction is the contract of a recovery plan (Plan.Actions): exactly what Write sends, and what the nodes
// looked like, for the read-back and the wait.
type recoveryAction struct {
	AWSCluster   string   `json:"awsCluster"`
	Group        string   `json:"group"`
	InstanceType string   `json:"instanceType"`
	Nodes        []string `json:"nodes"`
	// Before is each planned node's instance status when planned; Group the group's instance ids then.
	Before    map[string]string `json:"before"`
	GroupIDs  []string          `json:"groupIds"`
	GroupSize int               `json:"groupSize"`
}

// recoveryState is what observe read: the cluster, the group's instances and the chosen ones.
type recoveryState struct {
	t            *target
	awsCluster   string
	status       string
	instanceType string
	group        []fleet.InstanceHealth
	chosen       []fleet.InstanceHealth
}

func (s *recoveryState) observed() string {
	parts := make([]string, 0, len(s.chosen))
	for _, n := range s.chosen {
		parts = append(parts, n.InstanceID+":"+n.Status)
	}
	return fmt.Sprintf("HyperPodInstances %s clusterStatus=%s group-size=%d nodes=%s", s.awsCluster, s.status, len(s.group), strings.Join(parts, ","))
}

// observe reads the cluster and the group's instances, refuses a cluster that is not InService, and resolves the
// nodes: the ids given, each checked against the group, or the group's faulty ones.
func (o *recoveryOp) observe(ctx context.Context, req *ops.Request) (*recoveryState, error) {
	if err := o.Validate(ctx, req); err != nil {
		return nil, err
	}
	t, _ := o.c.cluster(req.Target.Cluster)
	d, err := o.c.describeHyperPod(ctx, t)
	if err != nil {
		return nil, err
	}
	name := req.Params.String("group")
	g := hyperPodGroup(d, name)
	if g == nil {
		var known []string
		for _, x := range d.InstanceGroups {
			known = append(known, awssdk.ToString(x.InstanceGroupName))
		}
		sort.Strings(known)
		return nil, ops.Unknown(ops.CodeNotFound, "group", "instance groups of "+awssdk.ToString(d.ClusterName), name, known,
			"no instance group %q in HyperPod cluster %s", name, awssdk.ToString(d.ClusterName))
	}
	if g.ClusterStatus != statusInService {
		return nil, o.busy(g)
	}
	all, err := o.c.listClusterNodes(ctx, t)
	if err != nil {
		return nil, err
	}
	s := &recoveryState{t: t, awsCluster: g.Cluster, status: g.ClusterStatus, instanceType: g.InstanceType()}
	for _, n := range all {
		if n.Group == name {
			s.group = append(s.group, n)
		}
	}
	if req.Params.Bool("faulty") {
		for _, n := range s.group {
			if n.Status == instanceFailure {
				s.chosen = append(s.chosen, n)
			}
		}
		if len(s.chosen) == 0 {
			return nil, ops.Errorf(ops.CodeNotFound, "faulty", "check the nodes with "+ops.Ask("capacity show")+", or name them with nodes=",
				"instance group %s of %s has no faulty instances (none is Failure): nothing to %s", name, g.Cluster, o.verb())
		}
		return s, nil
	}
	return s, s.choose(all, name, nodeIDs(req.Params))
}

// choose picks the named instances of the group, refusing an id the group does not have.
func (s *recoveryState) choose(all []fleet.InstanceHealth, group string, ids []string) error {
	var known []string
	for _, n := range s.group {
		known = append(known, n.InstanceID)
	}
	for _, id := range ids {
		i := slices.IndexFunc(s.group, func(n fleet.InstanceHealth) bool { return n.InstanceID == id })
		if i >= 0 {
			s.chosen = append(s.chosen, s.group[i])
			continue
		}
		if j := slices.IndexFunc(all, func(n fleet.InstanceHealth) bool { return n.InstanceID == id }); j >= 0 {
			return ops.Errorf(ops.CodeInvalidArgument, "nodes", "give group="+all[j].Group+", or only instances of "+group,
				"instance %s is in instance group %s, not %s", id, all[j].Group, group)
		}
		return ops.Unknown(ops.CodeNotFound, "nodes", "instances of "+group, id, known,
			"no instance %s in instance group %s of %s", id, group, s.awsCluster)
	}
	return nil
}

func (o *recoveryOp) busy(g *groupState) error {
	msg := fmt.Sprintf("HyperPod cluster %s is %s; %s needs InService", g.Cluster, g.ClusterStatus, o.Spec().Name)
	if g.Failure != "" {
		msg += " (" + g.Failure + ")"
	}
	return &ops.Error{Code: ops.CodeClusterUnavailable, Field: "cluster", Message: msg,
		Next: "wait for the change in progress to finish (" + ops.Ask("capacity show") + "), then retry"}
}

// Plan lists the nodes with their health, what the change costs (nothing added: a replacement keeps the count) and
// its risk: a healthy node taken down interrupts whatever runs on it, so each raises the risk.
func (o *recoveryOp) Plan(ctx context.Context, req *ops.Request) (*ops.Plan, error) {
	s, err := o.observe(ctx, req)
	if err != nil {
		return nil, err
	}
	a := recoveryAction{AWSCluster: s.awsCluster, Group: req.Params.String("group"), InstanceType: s.instanceType,
		Before: map[string]string{}, GroupSize: len(s.group)}
	for _, n := range s.group {
		a.GroupIDs = append(a.GroupIDs, n.InstanceID)
	}
	p := &ops.Plan{Observed: s.observed()}
	var kube []string
	for _, n := range s.chosen {
		a.Nodes = append(a.Nodes, n.InstanceID)
		a.Before[n.InstanceID] = n.Status
		kube = append(kube, "hyperpod-"+n.InstanceID)
		to := "Running (rebooted)"
		if o.replace {
			to = "a new instance"
		}
		p.Changes = append(p.Changes, ops.Change{Action: ops.ActionUpdate, Kind: "HyperPodInstance", Name: n.InstanceID,
			Fields: []ops.FieldChange{{Path: "InstanceStatus", From: instanceWords(n), To: to}}})
		switch n.Status {
		case instanceRunning:
			p.Risk.RaiseOneLevel("%s is Running and healthy: what runs on it is interrupted", n.InstanceID)
		case instancePending, instanceShuttingDown:
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s is %s already: AWS will likely refuse it (InstanceIdInUse)", n.InstanceID, n.Status))
		}
	}
	p.Summary = fmt.Sprintf("%s %d of %d instances (%s) of instance group %s of %s with %s", titleVerb(o.verb()), len(a.Nodes),
		len(s.group), s.instanceType, a.Group, s.awsCluster, o.call())
	if o.replace {
		p.Summary += "; the group keeps its count, so no added hourly cost"
		p.Risk.Add(ops.RiskHigh, "replace: the instances and their local storage are gone for good; running work on them stops")
	} else {
		p.Risk.Add(ops.RiskMedium, "reboot: work running on the nodes stops while they restart")
	}
	o.interrupted(ctx, req.Target.Cluster, kube, p)
	if p.Actions, err = json.Marshal(a); err != nil {
		return nil, fmt.Errorf("encode the AWS request: %w", err)
	}
	return p, nil
}

// interrupted says which pods on the nodes stop (training workers interrupted, inference replicas dropped) and
// raises the risk when there are any; without a Kubernetes view that lists pods, it names the nodes and says so.
func (o *recoveryOp) interrupted(ctx context.Context, cluster string, kube []string, p *ops.Plan) {
	check := "check with kubectl get pods -A --field-selector spec.nodeName=<node>"
	reader, ok := o.nodes.(fleet.NodePodReader)
	if !ok {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the pods on Kubernetes nodes %s stop (training jobs interrupted, inference replicas dropped); "+
			"this plan cannot list them: %s", strings.Join(kube, ", "), check))
		return
	}
	pods, err := reader.PodsOnNodes(ctx, cluster, kube)
	if err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("the pods on Kubernetes nodes %s could not be read (%v); they stop: %s",
			strings.Join(kube, ", "), err, check))
		return
	}
	if len(pods) == 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("no pods run on Kubernetes nodes %s (DaemonSet pods aside)", strings.Join(kube, ", ")))
		return
	}
	named := make([]string, 0, min(len(pods), maxNamedPods+1))
	for i, pod := range pods {
		if i == maxNamedPods {
			named = append(named, fmt.Sprintf("and %d more", len(pods)-maxNamedPods))
			break
		}
		what := pod.Namespace + "/" + pod.Name
		if pod.Owner != "" {
			what += " (" + pod.Owner + ")"
		}
		named = append(named, what+" on "+pod.Node)
	}
	p.Warnings = append(p.Warnings, fmt.Sprintf("stops %d pod(s) — training jobs interrupted, inference replicas dropped: %s",
		len(pods), strings.Join(named, "; ")))
	p.Risk.RaiseOneLevel("interrupts %d pod(s) running on the nodes", len(pods))
}

// maxNamedPods bounds the pods a recovery plan names.
const maxNamedPods = 8

func titleVerb(v string) string { return strings.ToUpper(v[:1]) + v[1:] }

func instanceWords(n fleet.InstanceHealth) string {
	if n.Message == "" {
		return n.Status
	}
	return n.Status + " (" + n.Message + ")"
}

func plannedRecovery(plan *ops.Plan) (recoveryAction, error) {
	var a recoveryAction
	if plan == nil || len(plan.Actions) == 0 {
		return a, ops.Errorf(ops.CodeInternal, "", "submit the request again", "the approved plan carries no AWS request to send")
	}
	if err := json.Unmarshal(plan.Actions, &a); err != nil {
		return a, ops.Wrap(err, ops.CodeInternal, "", "submit the request again", "the approved plan's AWS request does not decode: %v", err)
	}
	return a, nil
}

// Recheck re-reads the cluster and the nodes, which is all the plan's hash covers.
func (o *recoveryOp) Recheck(ctx context.Context, req *ops.Request, _ *ops.Plan) (string, error) {
	s, err := o.observe(ctx, req)
	if err != nil {
		return "", err
	}
	return s.observed(), nil
}

// Execute is Write then Await in one go (ops.ExecuteSteps).
func (o *recoveryOp) Execute(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) (*ops.Result, error) {
	return ops.ExecuteSteps(ctx, o, req, plan, x)
}

// recoveryWritten is what Write recorded: the nodes AWS took, and the ones it refused with why.
type recoveryWritten struct {
	Accepted []string      `json:"accepted"`
	Failed   []nodeRefusal `json:"failed,omitempty"`
}

type nodeRefusal struct {
	Node    string `json:"node"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (r nodeRefusal) String() string { return fmt.Sprintf("%s: %s: %s", r.Node, r.Code, r.Message) }

// Write sends the plan's one Batch call after checking that this execution still holds its lock. The calls take
// no client token, so the SDK retries only throttling (refusedOnly); an answer lost after AWS acted is read back by
// Verify, never sent again. Nodes AWS refuses are reported one by one; all refused fails the request.
func (o *recoveryOp) Write(ctx context.Context, req *ops.Request, plan *ops.Plan, x ops.Execution) ([]byte, error) {
	a, err := plannedRecovery(plan)
	if err != nil {
		return nil, err
	}
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, err
	}
	if err := x.Check(ctx); err != nil {
		return nil, err
	}
	w, err := o.send(ctx, t, a)
	if err != nil {
		return nil, writeError(serviceSageMaker, o.call(), err)
	}
	for _, f := range w.Failed {
		progress.Note(ctx, "%s refused %s", o.call(), f)
	}
	if len(w.Accepted) == 0 {
		parts := make([]string, 0, len(w.Failed))
		for _, f := range w.Failed {
			parts = append(parts, f.String())
		}
		return nil, ops.Errorf(ops.CodeAWSError, "nodes", "check the nodes with "+ops.Ask("capacity show")+", then retry with the ones that can be recovered",
			"%s refused every node, nothing changed: %s", o.call(), strings.Join(parts, "; "))
	}
	progress.Note(ctx, "%s accepted: %s", o.call(), strings.Join(w.Accepted, ", "))
	return json.Marshal(w)
}

func (o *recoveryOp) send(ctx context.Context, t *target, a recoveryAction) (recoveryWritten, error) {
	var w recoveryWritten
	name := awssdk.String(a.AWSCluster)
	if o.replace {
		out, err := t.sm.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: name, NodeIds: a.Nodes}, refusedOnly)
		if err != nil {
			return w, err
		}
		w.Accepted = out.Successful
		for _, f := range out.Failed {
			w.Failed = append(w.Failed, nodeRefusal{awssdk.ToString(f.NodeId), string(f.ErrorCode), awssdk.ToString(f.Message)})
		}
		return w, nil
	}
	out, err := t.sm.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: name, NodeIds: a.Nodes}, refusedOnly)
	if err != nil {
		return w, err
	}
	w.Accepted = out.Successful
	for _, f := range out.Failed {
		w.Failed = append(w.Failed, nodeRefusal{awssdk.ToString(f.NodeId), string(f.ErrorCode), awssdk.ToString(f.Message)})
	}
	return w, nil
}

// groupNodes reads the group's instances by id.
func (o *recoveryOp) groupNodes(ctx context.Context, t *target, group string) (map[string]fleet.InstanceHealth, error) {
	all, err := o.c.listClusterNodes(ctx, t)
	if err != nil {
		return nil, err
	}
	out := map[string]fleet.InstanceHealth{}
	for _, n := range all {
		if n.Group == group {
			out[n.InstanceID] = n
		}
	}
	return out, nil
}

// touched reports whether the node shows the call took effect: a reboot leaves it Pending (or brought a Failure
// back to Running); a replacement leaves it ShuttingDown, or gone.
func (o *recoveryOp) touched(a recoveryAction, now map[string]fleet.InstanceHealth, id string) bool {
	n, ok := now[id]
	if o.replace {
		return !ok || n.Status == instanceShuttingDown
	}
	return ok && (n.Status == instancePending || a.Before[id] == instanceFailure && n.Status == instanceRunning)
}

// Verify reads back, from the nodes' state, whether a Batch call whose answer was lost took effect, without
// sending it again: the nodes that show it are the accepted ones.
func (o *recoveryOp) Verify(ctx context.Context, req *ops.Request, plan *ops.Plan, _ ops.Execution) (ops.Verdict, []byte, error) {
	a, err := plannedRecovery(plan)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return ops.VerdictUnknown, nil, err
	}
	var w recoveryWritten
	v, err := o.c.readBack(ctx, func(ctx context.Context) (ops.Verdict, error) {
		now, err := o.groupNodes(ctx, t, a.Group)
		if err != nil {
			return ops.VerdictUnknown, err
		}
		w = recoveryWritten{}
		for _, id := range a.Nodes {
			if o.touched(a, now, id) {
				w.Accepted = append(w.Accepted, id)
			} else {
				w.Failed = append(w.Failed, nodeRefusal{id, "NotSeen", "no sign of the " + o.verb() + " after the answer was lost"})
			}
		}
		if len(w.Accepted) > 0 {
			return ops.VerdictApplied, nil
		}
		return ops.VerdictNotApplied, nil
	})
	if v != ops.VerdictApplied {
		return v, nil, err
	}
	progress.Note(ctx, "read back: %s under way for %s, so %s took effect", o.verb(), strings.Join(w.Accepted, ", "), o.call())
	out, err := json.Marshal(w)
	return v, out, err
}

// RecoveryResult is reboot-nodes' and replace-nodes' machine-readable result (Result.Data).
type RecoveryResult struct {
	Cluster    string `json:"cluster"`
	AWSCluster string `json:"awsCluster"`
	Group      string `json:"group"`
	// Nodes are the instances AWS took; Refused the ones it did not, with why.
	Nodes   []string      `json:"nodes"`
	Refused []nodeRefusal `json:"refused,omitempty"`
	// NewNodes are the instances that replaced Nodes (replace-nodes).
	NewNodes []string `json:"newNodes,omitempty"`
	// GroupSize is the group's instance count at the end.
	GroupSize int `json:"groupSize"`
}

// Await watches the nodes until each is Running again (reboot) or gone with a Running instance in its place
// (replace), reporting each change of their state and the group's cluster events (eventFeed). It sends nothing.
func (o *recoveryOp) Await(ctx context.Context, req *ops.Request, plan *ops.Plan, written []byte, x ops.Execution) (*ops.Result, error) {
	a, err := plannedRecovery(plan)
	if err != nil {
		return nil, err
	}
	var w recoveryWritten
	if err := json.Unmarshal(written, &w); err != nil {
		return nil, ops.Wrap(err, ops.CodeInternal, "", "check the nodes with "+ops.Ask("capacity show"), "the recorded write does not decode")
	}
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, err
	}
	res := RecoveryResult{Cluster: t.name, AWSCluster: a.AWSCluster, Group: a.Group, Nodes: w.Accepted, Refused: w.Failed}
	what := fmt.Sprintf("%s of %s in %s", o.verb(), strings.Join(w.Accepted, ", "), a.Group)
	down := map[string]bool{} // nodes seen out of Running since the write
	events := o.c.newEventFeed(t, a.AWSCluster, a.Group, x, false)
	err = o.c.wait(ctx, what, func(ctx context.Context) (string, bool, error, error) {
		now, err := o.groupNodes(ctx, t, a.Group)
		if err != nil {
			return "", false, nil, err
		}
		status, done := o.progress(a, w, now, down, &res)
		events.tell(ctx, done)
		for _, id := range w.Accepted {
			if _, ok := now[id]; !ok && !o.replace {
				return status, false, ops.Errorf(ops.CodeAWSError, "nodes", "check the group with "+ops.Ask("capacity show"),
					"instance %s left instance group %s while it was rebooting", id, a.Group), nil
			}
		}
		return status, done, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return o.result(t, &res), nil
}

// progress says where each node is and whether all are done. A rebooted node is back once it is Running after
// having been seen down (or after having been Failure): a read just after the write may still show it Running.
func (o *recoveryOp) progress(a recoveryAction, w recoveryWritten, now map[string]fleet.InstanceHealth, down map[string]bool, res *RecoveryResult) (string, bool) {
	var parts []string
	done := true
	for _, id := range w.Accepted {
		n, ok := now[id]
		if ok && n.Status != instanceRunning {
			down[id] = true
		}
		switch {
		case !ok:
			parts = append(parts, id+" gone")
		case n.Status == instanceRunning && !o.replace && (down[id] || a.Before[id] == instanceFailure):
			parts = append(parts, id+" Running")
		default:
			parts = append(parts, id+" "+instanceWords(n))
			done = false
		}
		if !o.replace {
			continue
		}
		done = done && !ok
	}
	res.GroupSize, res.NewNodes = len(now), nil
	if o.replace {
		for id, n := range now {
			if slices.Contains(a.GroupIDs, id) {
				continue
			}
			res.NewNodes = append(res.NewNodes, id)
			parts = append(parts, "new "+id+" "+n.Status)
			done = done && n.Status == instanceRunning
		}
		sort.Strings(res.NewNodes)
		done = done && len(now) >= a.GroupSize
	}
	sort.Strings(parts)
	return strings.Join(parts, ", "), done
}

func (o *recoveryOp) result(t *target, r *RecoveryResult) *ops.Result {
	data, _ := json.Marshal(r)
	summary := fmt.Sprintf("Rebooted %s of instance group %s of %s: Running again", strings.Join(r.Nodes, ", "), r.Group, r.AWSCluster)
	if o.replace {
		summary = fmt.Sprintf("Replaced %s of instance group %s of %s with %s; the group has %d instances", strings.Join(r.Nodes, ", "),
			r.Group, r.AWSCluster, strings.Join(r.NewNodes, ", "), r.GroupSize)
	}
	res := &ops.Result{Summary: summary, Data: data,
		Details: []ops.Detail{{Label: "group", Value: r.Group}, {Label: "nodes", Value: strings.Join(r.Nodes, ", ")}},
		Objects: []ops.ObjectRef{{Cluster: t.name, Kind: KindHyperPodGroup, Name: r.Group}},
	}
	if len(r.NewNodes) > 0 {
		res.Details = append(res.Details, ops.Detail{Label: "new nodes", Value: strings.Join(r.NewNodes, ", ")})
	}
	for _, f := range r.Refused {
		res.Details = append(res.Details, ops.Detail{Label: "refused", Value: f.String()})
	}
	return res
}

// Observe reads the group's instances now, for a request whose execution was interrupted.
func (o *recoveryOp) Observe(ctx context.Context, req *ops.Request) (*ops.Result, error) {
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return nil, err
	}
	group := req.Params.String("group")
	now, err := o.groupNodes(ctx, t, group)
	if err != nil {
		return nil, err
	}
	var parts []string
	for id, n := range now {
		parts = append(parts, id+" "+instanceWords(n))
	}
	sort.Strings(parts)
	r := RecoveryResult{Cluster: t.name, AWSCluster: t.cl.HyperPod.ClusterName, Group: group, Nodes: nodeIDs(req.Params), GroupSize: len(now)}
	data, _ := json.Marshal(r)
	return &ops.Result{
		Summary: fmt.Sprintf("instance group %s of %s has %d instances: %s", group, r.AWSCluster, len(now), strings.Join(parts, ", ")),
		Data:    data, Objects: []ops.ObjectRef{{Cluster: t.name, Kind: KindHyperPodGroup, Name: group}},
	}, nil
}
