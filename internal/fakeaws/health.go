package fakeaws

import (
	"context"
	"fmt"
	"net/http"
)

// HyperPod instance statuses beyond the ones a scale moves through (smtypes.ClusterInstanceStatus), and the values of
// the health agent's node label sagemaker.amazonaws.com/node-health-status. The label values are the ones
// "Resilience-related Kubernetes labels by SageMaker HyperPod" lists
// (docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html): Schedulable
// (passed basic health checks), Unschedulable (running deep health checks), UnschedulablePendingReplacement and
// UnschedulablePendingReboot (failed deep health checks or the health-monitoring agent's checks, to be replaced or
// rebooted, automatically when node recovery is Automatic).
const (
	NodeFailure              = "Failure"
	NodeSystemUpdating       = "SystemUpdating"
	NodeDeepHealthCheck      = "DeepHealthCheckInProgress"
	LabelNodeHealth          = "sagemaker.amazonaws.com/node-health-status"
	HealthSchedulable        = "Schedulable"
	HealthUnschedulable      = "Unschedulable"
	HealthPendingReplacement = "UnschedulablePendingReplacement"
	HealthPendingReboot      = "UnschedulablePendingReboot"
)

// NodeHealth is what HyperPod says of one running instance: its InstanceStatus (Status and Message, as
// ListClusterNodes and DescribeClusterNode return them) and the health label its Kubernetes node carries.
type NodeHealth struct {
	// Status is the instance status while it runs: Running (the default), Failure, SystemUpdating or
	// DeepHealthCheckInProgress.
	Status  string
	Message string
	// Label is the node-health-status label (HealthSchedulable when empty).
	Label string
}

func (h NodeHealth) label() string {
	if h.Label == "" {
		return HealthSchedulable
	}
	return h.Label
}

// MarkNodeFaulty makes a running instance of the named HyperPod cluster what the health-monitoring agent makes of
// a node that failed its checks: InstanceStatus Failure with reason as its Message, and its Kubernetes node
// labelled UnschedulablePendingReplacement (told to OnNodesChanged as a health change).
func (s *Server) MarkNodeFaulty(cluster, instanceID, reason string) error {
	return s.SetNodeHealth(cluster, instanceID, NodeHealth{Status: NodeFailure, Message: reason, Label: HealthPendingReplacement})
}

// SetNodeHealth sets the health of a running instance of the named HyperPod cluster (by name or ARN, in any
// region); NodeHealth{} makes it healthy again. An instance that is not running (launching, shutting down) or not
// there is an error.
func (s *Server) SetNodeHealth(cluster, instanceID string, h NodeHealth) error {
	switch h.Status {
	case "", NodeRunning, NodeFailure, NodeSystemUpdating, NodeDeepHealthCheck:
	default:
		return fmt.Errorf("set node health: status %q is not one a running instance reports", h.Status)
	}
	switch h.label() {
	case HealthSchedulable, HealthUnschedulable, HealthPendingReplacement, HealthPendingReboot:
	default:
		return fmt.Errorf("set node health: label %q is not one the health agent sets", h.Label)
	}
	s.mu.Lock()
	c := s.findHyperPod(cluster)
	if c == nil {
		s.mu.Unlock()
		return fmt.Errorf("set node health: no HyperPod cluster %s", cluster)
	}
	g, in := c.instance(instanceID)
	if in == nil || in.phase != phaseUp || in.recovery != recoveryNone {
		s.mu.Unlock()
		return fmt.Errorf("set node health: no running instance %s in cluster %s (or it is being rebooted or replaced)", instanceID, cluster)
	}
	s.healthEvent(c, g, in, h)
	in.health = h
	ch := hyperPodChange(c, g)
	ch.Labels[LabelNodeHealth] = h.label()
	ch.Health = map[NodeName]string{in.name: h.label()}
	s.mu.Unlock()
	s.notify([]NodeChange{ch})
	return nil
}

func (c *hpCluster) instance(id string) (*hpGroup, *instance) {
	for _, g := range c.groups {
		for _, in := range g.nodes {
			if in.id == id {
				return g, in
			}
		}
	}
	return nil, nil
}

// hyperPodStatus is the InstanceStatus of an instance: its phase's while it launches or leaves, its health's while
// it runs.
func hyperPodStatus(in *instance) (status, message string) {
	if in.phase != phaseUp || in.health.Status == "" {
		return hyperPodNodeStatus[in.phase], ""
	}
	return in.health.Status, in.health.Message
}

type smInstanceStatus struct {
	Status  string
	Message *string `json:",omitempty"`
}

func instanceStatusOf(in *instance) smInstanceStatus {
	status, msg := hyperPodStatus(in)
	out := smInstanceStatus{Status: status}
	if msg != "" {
		out.Message = ptr(msg)
	}
	return out
}

type smNodeDetails struct {
	InstanceGroupName string
	InstanceId        string
	InstanceStatus    smInstanceStatus
	InstanceType      string
	LaunchTime        *epochTime `json:",omitempty"`
}

// smDescribeClusterNode serves DescribeClusterNode by NodeId (the instance ID); NodeLogicalId is not modelled.
func (s *Server) smDescribeClusterNode(_ context.Context, region string, body []byte) (any, *apiError) {
	var in struct {
		ClusterName   *string
		NodeId        *string
		NodeLogicalId *string
	}
	if aerr := decodeInput(body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkClusterNameOrARN(in.ClusterName); aerr != nil {
		return nil, aerr
	}
	var v violations
	if v.required("nodeId", in.NodeId != nil) {
		v.length("nodeId", *in.NodeId, 1, 256)
	}
	if aerr := v.err(); aerr != nil {
		return nil, aerr
	}
	c, aerr := s.lockedHyperPod(region, *in.ClusterName)
	if aerr != nil {
		return nil, aerr
	}
	defer s.mu.Unlock()
	g, n := c.instance(*in.NodeId)
	if n == nil {
		return nil, errorf(http.StatusBadRequest, "ResourceNotFound", "Node %s not found in cluster %s", *in.NodeId, c.arn)
	}
	d := smNodeDetails{InstanceGroupName: g.name, InstanceId: n.id, InstanceStatus: instanceStatusOf(n), InstanceType: g.instanceType}
	if !n.launchTime.IsZero() {
		d.LaunchTime = epochPtr(n.launchTime)
	}
	return struct{ NodeDetails smNodeDetails }{d}, nil
}

// healthEvent records what the health agent found when an instance's health changes: an error when it fails its
// checks, a warning while it is checked or updated, and it passing them again.
func (s *Server) healthEvent(c *hpCluster, g *hpGroup, in *instance, h NodeHealth) {
	if h == in.health {
		return
	}
	why := ""
	if h.Message != "" {
		why = ": " + h.Message
	}
	switch h.Status {
	case NodeFailure:
		s.instanceEvent(c, g, in.id, LevelError, "failed health checks"+why)
	case NodeDeepHealthCheck:
		s.instanceEvent(c, g, in.id, LevelWarn, "is running deep health checks"+why)
	case NodeSystemUpdating:
		s.instanceEvent(c, g, in.id, LevelWarn, "is being updated"+why)
	default:
		if in.health.Status != "" && in.health.Status != NodeRunning {
			s.instanceEvent(c, g, in.id, LevelInfo, "passed health checks and is schedulable")
		}
	}
}
