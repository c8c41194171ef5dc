package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/fleet"
	"github.com/hyperops/hyperops/ops/redact"
)

// OpGetCapacity is the name of the get-capacity operation.
const OpGetCapacity = "get-capacity"

// Capacity is what get-capacity reports for one cluster (its Result.Data): the HyperPod instance groups and the
// EKS managed node groups as AWS sees them, each merged with the Kubernetes view when there is one.
type Capacity struct {
	Cluster  string            `json:"cluster"`
	Region   string            `json:"region"`
	HyperPod *HyperPodCapacity `json:"hyperpod,omitempty"`
	EKS      *EKSCapacity      `json:"eks,omitempty"`
	// Hourly is the on-demand $/h of every targeted instance whose price is known; Unknown lists the others.
	Hourly   float64  `json:"hourly"`
	Unknown  []string `json:"unknown,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// HyperPodCapacity is a SageMaker HyperPod cluster.
type HyperPodCapacity struct {
	Name           string          `json:"name"`
	ARN            string          `json:"arn"`
	Status         string          `json:"status"`
	FailureMessage string          `json:"failureMessage,omitempty"`
	Groups         []GroupCapacity `json:"groups"`
}

// EKSCapacity is an EKS cluster and its managed node groups.
type EKSCapacity struct {
	Name       string          `json:"name"`
	ARN        string          `json:"arn"`
	Status     string          `json:"status"`
	Version    string          `json:"version"`
	Nodegroups []GroupCapacity `json:"nodegroups"`
}

// GroupCapacity is one instance group or node group.
type GroupCapacity struct {
	Name          string   `json:"name"`
	InstanceTypes []string `json:"instanceTypes"`
	Status        string   `json:"status"`
	// Current is the instances running; -1 where AWS does not report it (EKS node groups).
	Current int `json:"current"`
	Target  int `json:"target"`
	Min     int `json:"min,omitempty"`
	Max     int `json:"max,omitempty"`
	// Instances counts the HyperPod instances by status (ListClusterNodes); NotRunning lists those not Running,
	// with HyperPod's message.
	Instances  map[string]int         `json:"instances,omitempty"`
	NotRunning []fleet.InstanceHealth `json:"notRunning,omitempty"`
	// Hourly is Target × the on-demand price; 0 with PriceKnown false when the price is unknown.
	Hourly     float64           `json:"hourly"`
	PriceKnown bool              `json:"priceKnown"`
	Kubernetes *fleet.GroupNodes `json:"kubernetes,omitempty"`
	Issues     string            `json:"issues,omitempty"`
}

// getCapacityOp is get-capacity (read-only).
type getCapacityOp struct {
	c      *Clients
	pricer ops.Pricer
	nodes  fleet.NodeCounter
}

func (o *getCapacityOp) Spec() ops.Spec {
	return ops.Spec{Name: OpGetCapacity, Domain: "capacity", Topic: "capacity", Verb: "show", ClusterWide: true,
		Summary: "Show the HyperPod instance groups and EKS node groups of a cluster: counts, status, cost per hour"}
}

func (o *getCapacityOp) Validate(_ context.Context, req *ops.Request) error {
	t, err := o.c.cluster(req.Target.Cluster)
	if err != nil {
		return err
	}
	return checkHasCapacity(t)
}

// Plan is never called for a read-only operation; it describes what Execute would read.
func (o *getCapacityOp) Plan(_ context.Context, req *ops.Request) (*ops.Plan, error) {
	return &ops.Plan{Summary: "read the capacity of " + req.Target.Cluster}, nil
}

func (o *getCapacityOp) Execute(ctx context.Context, req *ops.Request, _ *ops.Plan, _ ops.Execution) (*ops.Result, error) {
	capacity, err := o.c.Capacity(ctx, req.Target.Cluster, o.pricer, o.nodes)
	if err != nil {
		return nil, err
	}
	return capacity.result(), nil
}

// Capacity reads a cluster's capacity from AWS, priced with pricer and merged with the Kubernetes view from
// nodes (either may be nil). ops/report uses it for scheduled reports.
func (c *Clients) Capacity(ctx context.Context, cluster string, pricer ops.Pricer, nodes fleet.NodeCounter) (*Capacity, error) {
	t, err := c.cluster(cluster)
	if err != nil {
		return nil, err
	}
	if err := checkHasCapacity(t); err != nil {
		return nil, err
	}
	out := &Capacity{Cluster: t.name, Region: t.region}
	if t.cl.HyperPod.ClusterName != "" {
		out.HyperPod, err = c.hyperPodCapacity(ctx, t)
		switch {
		case apiCode(err) == "ResourceNotFound":
			out.Warnings = append(out.Warnings, fmt.Sprintf("HyperPod cluster %s does not exist yet ("+ops.Ask("bootstrap hyperpod template=…")+")",
				t.cl.HyperPod.ClusterName))
		case err != nil:
			return nil, err
		}
	}
	if t.cl.EKS.ClusterName != "" {
		if out.EKS, err = c.eksCapacity(ctx, t); err != nil {
			return nil, err
		}
	}
	if nodes != nil {
		if kube, err := nodes.NodeGroups(ctx, t.name); err != nil {
			out.Warnings = append(out.Warnings, "Kubernetes view unavailable: "+err.Error())
		} else {
			out.merge(kube)
		}
	}
	out.price(ctx, pricer)
	return out, nil
}

func (c *Clients) hyperPodCapacity(ctx context.Context, t *target) (*HyperPodCapacity, error) {
	d, err := c.describeHyperPod(ctx, t)
	if err != nil {
		return nil, err
	}
	hp := &HyperPodCapacity{Name: awssdk.ToString(d.ClusterName), ARN: awssdk.ToString(d.ClusterArn),
		Status: string(d.ClusterStatus), FailureMessage: awssdk.ToString(d.FailureMessage), Groups: []GroupCapacity{}}
	nodes, err := c.listClusterNodes(ctx, t)
	if err != nil {
		return nil, err
	}
	instances, unhealthy := map[string]map[string]int{}, map[string][]fleet.InstanceHealth{}
	for _, n := range nodes {
		if instances[n.Group] == nil {
			instances[n.Group] = map[string]int{}
		}
		instances[n.Group][n.Status]++
		if n.Status != string(smtypes.ClusterInstanceStatusRunning) {
			unhealthy[n.Group] = append(unhealthy[n.Group], n)
		}
	}
	for _, g := range d.InstanceGroups {
		name := awssdk.ToString(g.InstanceGroupName)
		hp.Groups = append(hp.Groups, GroupCapacity{
			Name: name, InstanceTypes: []string{string(g.InstanceType)}, Status: string(g.Status),
			Current: int(awssdk.ToInt32(g.CurrentCount)), Target: int(awssdk.ToInt32(g.TargetCount)), Instances: instances[name],
			NotRunning: unhealthy[name],
		})
	}
	return hp, nil
}

// listClusterNodes reads every instance of the cluster's HyperPod cluster, a page of 100 at a time; the SDK's
// retryer backs off and retries a ThrottlingException, as it does for every read.
func (c *Clients) listClusterNodes(ctx context.Context, t *target) ([]fleet.InstanceHealth, error) {
	var out []fleet.InstanceHealth
	p := sagemaker.NewListClusterNodesPaginator(t.sm, &sagemaker.ListClusterNodesInput{
		ClusterName: awssdk.String(t.cl.HyperPod.ClusterName), MaxResults: awssdk.Int32(100)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, awsError(serviceSageMaker, "ListClusterNodes", err)
		}
		for _, n := range page.ClusterNodeSummaries {
			in := fleet.InstanceHealth{Group: awssdk.ToString(n.InstanceGroupName), InstanceID: awssdk.ToString(n.InstanceId), Status: "Unknown"}
			if n.InstanceStatus != nil {
				in.Status, in.Message = string(n.InstanceStatus.Status), instanceMessage(awssdk.ToString(n.InstanceStatus.Message))
			}
			out = append(out, in)
		}
	}
	return out, nil
}

// maxInstanceMessage caps HyperPod's message of one instance: it is shown per unhealthy node in status, reports and
// plans, where a page of log text would drown the rest.
const maxInstanceMessage = 300

// instanceMessage is HyperPod's message as HyperOps passes it on: without credential shapes, and capped.
func instanceMessage(s string) string {
	s = redact.Credentials(s)
	if r := []rune(s); len(r) > maxInstanceMessage {
		return string(r[:maxInstanceMessage-1]) + "…"
	}
	return s
}

var _ fleet.InstanceHealthReader = (*Clients)(nil)

// HyperPodInstances implements fleet.InstanceHealthReader: every instance of the cluster's HyperPod cluster with its
// status and message; none for a cluster without HyperPod, or whose HyperPod cluster does not exist yet.
func (c *Clients) HyperPodInstances(ctx context.Context, cluster string) ([]fleet.InstanceHealth, error) {
	t, err := c.cluster(cluster)
	if err != nil {
		return nil, err
	}
	if t.cl.HyperPod.ClusterName == "" {
		return nil, nil
	}
	nodes, err := c.listClusterNodes(ctx, t)
	if apiCode(err) == "ResourceNotFound" {
		return nil, nil
	}
	return nodes, err
}

func (c *Clients) eksCapacity(ctx context.Context, t *target) (*EKSCapacity, error) {
	cl, err := c.eksStatus(ctx, t)
	if err != nil {
		return nil, err
	}
	out := &EKSCapacity{Name: awssdk.ToString(cl.Name), ARN: awssdk.ToString(cl.Arn), Status: string(cl.Status),
		Version: awssdk.ToString(cl.Version), Nodegroups: []GroupCapacity{}}
	names, err := c.listNodegroups(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		ng, err := c.describeNodegroup(ctx, t, name)
		if err != nil {
			return nil, err
		}
		g := nodegroupState(out.Status, ng)
		out.Nodegroups = append(out.Nodegroups, GroupCapacity{Name: g.Name, InstanceTypes: g.InstanceTypes, Status: g.Status,
			Current: -1, Target: g.Target, Min: g.Min, Max: g.Max, Issues: g.Failure})
	}
	return out, nil
}

// groups lists every group, HyperPod first, so merge and price can walk them.
func (c *Capacity) groups() []*GroupCapacity {
	var out []*GroupCapacity
	if c.HyperPod != nil {
		for i := range c.HyperPod.Groups {
			out = append(out, &c.HyperPod.Groups[i])
		}
	}
	if c.EKS != nil {
		for i := range c.EKS.Nodegroups {
			out = append(out, &c.EKS.Nodegroups[i])
		}
	}
	return out
}

// merge attaches the Kubernetes view to the groups of the same name and warns about nodes of groups AWS does not
// list.
func (c *Capacity) merge(kube []fleet.GroupNodes) {
	byName := map[string]*GroupCapacity{}
	for _, g := range c.groups() {
		byName[g.Name] = g
	}
	for i := range kube {
		k := kube[i]
		if g, ok := byName[k.Group]; ok {
			g.Kubernetes = &k
			continue
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("Kubernetes has %d nodes in group %q that AWS does not list", k.Nodes, k.Group))
	}
}

func (c *Capacity) price(ctx context.Context, pricer ops.Pricer) {
	unknown := map[string]bool{}
	for _, g := range c.groups() {
		if len(g.InstanceTypes) == 0 {
			continue
		}
		it := g.InstanceTypes[0]
		if pricer != nil {
			if p, ok, err := pricer.Price(ctx, c.Region, it); err == nil && ok {
				g.Hourly, g.PriceKnown = float64(g.Target)*p.Hourly, true
				c.Hourly += g.Hourly
				continue
			}
		}
		if g.Target > 0 {
			unknown[it] = true
		}
	}
	for it := range unknown {
		c.Unknown = append(c.Unknown, it)
	}
	sort.Strings(c.Unknown)
}

func (c *Capacity) result() *ops.Result {
	data, _ := json.Marshal(c)
	var details []ops.Detail
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-24s %-18s %-10s %9s %8s  %s\n", "SOURCE", "GROUP", "TYPE", "STATUS", "INSTANCES", "$/H", "KUBERNETES")
	row := func(src string, g *GroupCapacity) {
		count := fmt.Sprintf("%d/%d", g.Current, g.Target)
		if g.Current < 0 {
			count = fmt.Sprintf("want %d", g.Target)
		}
		cost := "unknown"
		if g.PriceKnown {
			cost = fmt.Sprintf("%.2f", g.Hourly)
		}
		kube := "–"
		if k := g.Kubernetes; k != nil {
			kube = fmt.Sprintf("%d nodes, %d Ready", k.Nodes, k.Ready)
		}
		types := strings.Join(g.InstanceTypes, ",")
		fmt.Fprintf(&b, "%-12s %-24s %-18s %-10s %9s %8s  %s\n", src, g.Name, types, g.Status, count, cost, kube)
		details = append(details, ops.Detail{Label: g.Name + " (" + types + ")",
			Value: fmt.Sprintf("%s instances, %s, $%s/h, Kubernetes: %s", count, g.Status, cost, kube)})
	}
	var parts []string
	if hp := c.HyperPod; hp != nil {
		parts = append(parts, fmt.Sprintf("HyperPod %s %s (%d groups)", hp.Name, hp.Status, len(hp.Groups)))
		for i := range hp.Groups {
			row("hyperpod", &hp.Groups[i])
		}
	}
	if e := c.EKS; e != nil {
		parts = append(parts, fmt.Sprintf("EKS %s %s (%d node groups)", e.Name, e.Status, len(e.Nodegroups)))
		for i := range e.Nodegroups {
			row("eks", &e.Nodegroups[i])
		}
	}
	summary := fmt.Sprintf("Capacity of %s: %s; $%.2f/h on demand (estimate)", c.Cluster, strings.Join(parts, "; "), c.Hourly)
	if len(c.Unknown) > 0 {
		summary += "; price unknown for " + strings.Join(c.Unknown, ", ")
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return &ops.Result{Summary: summary, Details: details, Output: b.String(), Data: data}
}
