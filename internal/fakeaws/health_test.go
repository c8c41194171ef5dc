package fakeaws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestMarkNodeFaulty marks one instance faulty: ListClusterNodes and DescribeClusterNode report it as Failure with
// the reason, the hook is told its new health label, the other instances stay Running, and healing it restores both.
func TestMarkNodeFaulty(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	nodes := listNodes(t, f, "gpu")
	faulty, healthy := aws.ToString(nodes[0].InstanceId), aws.ToString(nodes[1].InstanceId)
	before := len(f.hooks.All())

	const reason = "GPU 3 reported Xid 79 (fallen off the bus)"
	if err := f.srv.MarkNodeFaulty("ml-hp", faulty, reason); err != nil {
		t.Fatal(err)
	}
	status := map[string]smtypes.ClusterInstanceStatusDetails{}
	for _, n := range listNodes(t, f, "gpu") {
		status[aws.ToString(n.InstanceId)] = *n.InstanceStatus
	}
	if s := status[faulty]; s.Status != smtypes.ClusterInstanceStatusFailure || aws.ToString(s.Message) != reason {
		t.Errorf("faulty node listed as %s %q, want Failure %q", s.Status, aws.ToString(s.Message), reason)
	}
	if s := status[healthy]; s.Status != smtypes.ClusterInstanceStatusRunning || s.Message != nil {
		t.Errorf("healthy node listed as %s %q, want Running without a message", s.Status, aws.ToString(s.Message))
	}
	d, err := f.c.sm.DescribeClusterNode(ctxT(t), &sagemaker.DescribeClusterNodeInput{ClusterName: aws.String("ml-hp"), NodeId: aws.String(faulty)})
	if err != nil {
		t.Fatalf("DescribeClusterNode: %v", err)
	}
	if n := d.NodeDetails; aws.ToString(n.InstanceGroupName) != "gpu" || n.InstanceStatus.Status != smtypes.ClusterInstanceStatusFailure ||
		aws.ToString(n.InstanceStatus.Message) != reason || n.InstanceType != "ml.p5.48xlarge" || n.LaunchTime == nil {
		t.Errorf("DescribeClusterNode = %+v / %+v", n, *n.InstanceStatus)
	}
	changes := f.hooks.All()[before:]
	if len(changes) != 1 || changes[0].InstanceGroup != "gpu" || changes[0].Health[NodeName(hyperPodNodePrefix+faulty)] != HealthPendingReplacement ||
		len(changes[0].Added)+len(changes[0].Removed) != 0 {
		t.Errorf("hook told %+v, want one health change of %s to %s", changes, faulty, HealthPendingReplacement)
	}
	hp, _ := f.srv.HyperPodCluster("ml-hp")
	for _, n := range hp.InstanceGroups[0].Nodes {
		if n.InstanceID == faulty && (n.Status != NodeFailure || n.Message != reason || n.Health != HealthPendingReplacement) {
			t.Errorf("snapshot of the faulty node = %+v", n)
		}
	}

	if err := f.srv.SetNodeHealth("ml-hp", faulty, NodeHealth{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range listNodes(t, f, "gpu") {
		if n.InstanceStatus.Status != smtypes.ClusterInstanceStatusRunning || n.InstanceStatus.Message != nil {
			t.Errorf("after healing, %s is %s %q", aws.ToString(n.InstanceId), n.InstanceStatus.Status, aws.ToString(n.InstanceStatus.Message))
		}
	}
	if last := f.hooks.All(); last[len(last)-1].Health[NodeName(hyperPodNodePrefix+faulty)] != HealthSchedulable {
		t.Errorf("healing told %+v", last[len(last)-1])
	}
}

func TestSetNodeHealthRefusals(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	id := aws.ToString(listNodes(t, f, "gpu")[0].InstanceId)
	tests := []struct {
		name, cluster, id string
		h                 NodeHealth
	}{
		{"unknown cluster", "nope", id, NodeHealth{Status: NodeFailure}},
		{"unknown instance", "ml-hp", "i-0000000000000000", NodeHealth{Status: NodeFailure}},
		{"status a running instance never has", "ml-hp", id, NodeHealth{Status: NodePending}},
		{"label the agent never sets", "ml-hp", id, NodeHealth{Label: "Broken"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := f.srv.SetNodeHealth(tt.cluster, tt.id, tt.h); err == nil {
				t.Error("accepted")
			}
		})
	}
	_, err := f.c.sm.DescribeClusterNode(ctxT(t), &sagemaker.DescribeClusterNodeInput{ClusterName: aws.String("ml-hp"), NodeId: aws.String("i-0000000000000000")})
	if apiCode(err) != "ResourceNotFound" {
		t.Errorf("DescribeClusterNode of a missing node: %v, want ResourceNotFound", err)
	}
}
