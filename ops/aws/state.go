package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/readings"
)

// The group kinds, as plans and results name them.
const (
	KindHyperPodGroup = "HyperPodInstanceGroup"
	KindEKSNodegroup  = "EKSNodegroup"
)

// The statuses scaling waits for.
const (
	statusInService = "InService"
	statusFailed    = "Failed"
	statusActive    = "ACTIVE"
)

// groupState is one HyperPod instance group or EKS managed node group as AWS reports it now.
type groupState struct {
	Kind          string
	Cluster       string // the AWS name of the HyperPod or EKS cluster
	ClusterStatus string
	Name          string
	InstanceTypes []string
	Status        string
	// Current is the instances running (HyperPod CurrentCount); -1 where AWS does not say (EKS).
	Current int
	// Target is HyperPod's TargetCount or EKS's desiredSize.
	Target   int
	Min, Max int // EKS scaling bounds; 0 for HyperPod
	Failure  string
	hp       *smtypes.ClusterInstanceGroupDetails
}

// InstanceType is the group's (first) instance type.
func (g *groupState) InstanceType() string {
	if len(g.InstanceTypes) == 0 {
		return ""
	}
	return g.InstanceTypes[0]
}

// observed renders the state a plan diffs against; it is part of the plan hash.
func (g *groupState) observed() string {
	return fmt.Sprintf("%s %s cluster=%s clusterStatus=%s group=%s types=%s status=%s current=%d target=%d min=%d max=%d",
		g.Kind, g.Cluster, g.Cluster, g.ClusterStatus, g.Name, strings.Join(g.InstanceTypes, ","), g.Status,
		g.Current, g.Target, g.Min, g.Max)
}

// describeHyperPod reads the HyperPod cluster; while a request is validated and planned (readings.With) the
// one answer serves both.
func (c *Clients) describeHyperPod(ctx context.Context, t *target) (*sagemaker.DescribeClusterOutput, error) {
	return readings.Once(ctx, "sagemaker DescribeCluster "+t.name, func() (*sagemaker.DescribeClusterOutput, error) {
		out, err := t.sm.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: awssdk.String(t.cl.HyperPod.ClusterName)})
		if err != nil {
			return nil, awsError(serviceSageMaker, "DescribeCluster", err)
		}
		return out, nil
	})
}

func hyperPodGroup(out *sagemaker.DescribeClusterOutput, name string) *groupState {
	for i := range out.InstanceGroups {
		d := &out.InstanceGroups[i]
		if awssdk.ToString(d.InstanceGroupName) != name {
			continue
		}
		return &groupState{
			Kind: KindHyperPodGroup, Cluster: awssdk.ToString(out.ClusterName), ClusterStatus: string(out.ClusterStatus),
			Name: name, InstanceTypes: []string{string(d.InstanceType)}, Status: string(d.Status),
			Current: int(awssdk.ToInt32(d.CurrentCount)), Target: int(awssdk.ToInt32(d.TargetCount)),
			Failure: awssdk.ToString(out.FailureMessage), hp: d,
		}
	}
	return nil
}

// eksStatus reads the EKS cluster, once while a request is validated and planned (readings.With).
func (c *Clients) eksStatus(ctx context.Context, t *target) (*ekstypes.Cluster, error) {
	return readings.Once(ctx, "eks DescribeCluster "+t.name, func() (*ekstypes.Cluster, error) {
		out, err := t.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String(t.cl.EKS.ClusterName)})
		if err != nil {
			return nil, awsError(serviceEKS, "DescribeCluster", err)
		}
		return out.Cluster, nil
	})
}

// describeNodegroup reads one EKS managed node group, once while a request is validated and planned.
func (c *Clients) describeNodegroup(ctx context.Context, t *target, name string) (*ekstypes.Nodegroup, error) {
	return readings.Once(ctx, "eks DescribeNodegroup "+t.name+" "+name, func() (*ekstypes.Nodegroup, error) {
		out, err := t.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{
			ClusterName: awssdk.String(t.cl.EKS.ClusterName), NodegroupName: awssdk.String(name)})
		if err != nil {
			return nil, awsError(serviceEKS, "DescribeNodegroup", err)
		}
		return out.Nodegroup, nil
	})
}

func nodegroupState(clusterStatus string, ng *ekstypes.Nodegroup) *groupState {
	g := &groupState{
		Kind: KindEKSNodegroup, Cluster: awssdk.ToString(ng.ClusterName), ClusterStatus: clusterStatus,
		Name: awssdk.ToString(ng.NodegroupName), InstanceTypes: ng.InstanceTypes, Status: string(ng.Status), Current: -1,
	}
	if sc := ng.ScalingConfig; sc != nil {
		g.Target, g.Min, g.Max = int(awssdk.ToInt32(sc.DesiredSize)), int(awssdk.ToInt32(sc.MinSize)), int(awssdk.ToInt32(sc.MaxSize))
	}
	if ng.Health != nil && len(ng.Health.Issues) > 0 {
		var msgs []string
		for _, is := range ng.Health.Issues {
			msgs = append(msgs, fmt.Sprintf("%s: %s", is.Code, awssdk.ToString(is.Message)))
		}
		g.Failure = strings.Join(msgs, "; ")
	}
	return g
}

// listNodegroups lists every managed node group of the cluster's EKS cluster.
func (c *Clients) listNodegroups(ctx context.Context, t *target) ([]string, error) {
	var names []string
	p := eks.NewListNodegroupsPaginator(t.eks, &eks.ListNodegroupsInput{ClusterName: awssdk.String(t.cl.EKS.ClusterName)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, awsError(serviceEKS, "ListNodegroups", err)
		}
		names = append(names, page.Nodegroups...)
	}
	return names, nil
}

// findGroup looks the group up among the HyperPod instance groups, then the EKS managed node groups.
func (c *Clients) findGroup(ctx context.Context, t *target, name string) (*groupState, error) {
	var known []string
	if t.cl.HyperPod.ClusterName != "" {
		out, err := c.describeHyperPod(ctx, t)
		switch {
		case err == nil:
			if g := hyperPodGroup(out, name); g != nil {
				return g, nil
			}
			for _, d := range out.InstanceGroups {
				known = append(known, awssdk.ToString(d.InstanceGroupName))
			}
		case apiCode(err) != "ResourceNotFound" || t.cl.EKS.ClusterName == "":
			// A HyperPod cluster not bootstrapped yet leaves the EKS node groups to look at.
			return nil, err
		}
	}
	if t.cl.EKS.ClusterName != "" {
		cl, err := c.eksStatus(ctx, t)
		if err != nil {
			return nil, err
		}
		ng, err := c.describeNodegroup(ctx, t, name)
		if err == nil {
			return nodegroupState(string(cl.Status), ng), nil
		}
		if code := apiCode(err); code != "ResourceNotFoundException" {
			return nil, err
		}
		names, err := c.listNodegroups(ctx, t)
		if err != nil {
			return nil, err
		}
		known = append(known, names...)
	}
	sort.Strings(known)
	if len(known) == 0 {
		return nil, ops.Errorf(ops.CodeNotFound, "group", "cluster "+t.name+" has no instance groups or node groups",
			"no instance group or node group %q in cluster %s", name, t.name)
	}
	return nil, ops.Unknown(ops.CodeNotFound, "group", "groups of "+t.name, name, known, "no instance group or node group %q in cluster %s", name, t.name)
}

// errNoCapacityTarget is returned for a cluster with neither HyperPod nor EKS configured.
var errNoCapacityTarget = errors.New("no hyperpod.clusterName or eks.clusterName")

func checkHasCapacity(t *target) error {
	if t.cl.HyperPod.ClusterName == "" && t.cl.EKS.ClusterName == "" {
		return ops.Wrap(errNoCapacityTarget, ops.CodeInvalidArgument, "cluster",
			"set hyperpod.clusterName or eks.clusterName for the cluster in config",
			"cluster %s has no HyperPod or EKS cluster configured", t.name)
	}
	return nil
}
