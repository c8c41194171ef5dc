package fakeaws

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

func nodeStatus(t *testing.T, f *fixture, id string) (smtypes.ClusterInstanceStatus, bool) {
	t.Helper()
	for _, n := range listNodes(t, f, "gpu") {
		if aws.ToString(n.InstanceId) == id {
			return n.InstanceStatus.Status, true
		}
	}
	return "", false
}

// TestBatchRebootClusterNodes: a faulty instance is rebooted: Pending and labelled pending a reboot while it takes
// RecoveryDuration, then Running and Schedulable; the same instance again meanwhile, a missing one and one that is
// not running are listed as failed with their codes.
func TestBatchRebootClusterNodes(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	id := aws.ToString(listNodes(t, f, "gpu")[0].InstanceId)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.srv.MarkNodeFaulty("ml-hp", id, "NVLink error"))
	out, err := f.c.sm.BatchRebootClusterNodes(ctxT(t), &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("ml-hp"),
		NodeIds: []string{id, "i-0000000000000000"}})
	must(err)
	if !slices.Equal(out.Successful, []string{id}) || len(out.Failed) != 1 || out.Failed[0].ErrorCode != smtypes.BatchRebootClusterNodesErrorCodeInstanceIdNotFound {
		t.Fatalf("reboot answered %+v / %+v", out.Successful, out.Failed)
	}
	if st, _ := nodeStatus(t, f, id); st != smtypes.ClusterInstanceStatusPending {
		t.Errorf("rebooting instance is %s, want Pending", st)
	}
	again, err := f.c.sm.BatchRebootClusterNodes(ctxT(t), &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("ml-hp"), NodeIds: []string{id}})
	must(err)
	if len(again.Failed) != 1 || again.Failed[0].ErrorCode != smtypes.BatchRebootClusterNodesErrorCodeInstanceIdInUse {
		t.Errorf("a second reboot answered %+v", again.Failed)
	}
	if last := f.hooks.All(); last[len(last)-1].Health[NodeName(hyperPodNodePrefix+id)] != HealthPendingReboot {
		t.Errorf("hook told %+v, want the node pending a reboot", last[len(last)-1])
	}

	f.advance(t, DefaultRecoveryDuration)
	waitFor(t, func() bool { st, _ := nodeStatus(t, f, id); return st == smtypes.ClusterInstanceStatusRunning })
	if last := f.hooks.All(); last[len(last)-1].Health[NodeName(hyperPodNodePrefix+id)] != HealthSchedulable {
		t.Errorf("hook told %+v, want the node Schedulable again", last[len(last)-1])
	}
	if n := f.srv.Applied(OpSageMakerBatchRebootClusterNodes); n != 1 {
		t.Errorf("reboots applied: %d, want 1", n)
	}
}

// TestBatchReplaceClusterNodes: a replaced instance shuts down over RecoveryDuration, then leaves; a new instance of
// the same group runs in its place, so the count stays.
func TestBatchReplaceClusterNodes(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	id := aws.ToString(listNodes(t, f, "gpu")[0].InstanceId)
	out, err := f.c.sm.BatchReplaceClusterNodes(ctxT(t), &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("ml-hp"), NodeIds: []string{id}})
	if err != nil || !slices.Equal(out.Successful, []string{id}) {
		t.Fatalf("replace: %+v %v", out, err)
	}
	if st, _ := nodeStatus(t, f, id); st != smtypes.ClusterInstanceStatusShuttingDown {
		t.Errorf("replaced instance is %s, want ShuttingDown", st)
	}
	f.advance(t, DefaultRecoveryDuration)
	waitFor(t, func() bool { _, there := nodeStatus(t, f, id); return !there })
	nodes := listNodes(t, f, "gpu")
	if len(nodes) != 2 {
		t.Fatalf("gpu has %d instances after the replacement, want 2", len(nodes))
	}
	last := f.hooks.All()[len(f.hooks.All())-1]
	if len(last.Removed) != 1 || last.Removed[0] != NodeName(hyperPodNodePrefix+id) || len(last.Added) != 1 {
		t.Errorf("hook told %+v, want the old node removed and a new one added", last)
	}
	_, g := describeGroup(t, f, "gpu")
	if aws.ToInt32(g.CurrentCount) != 2 {
		t.Errorf("CurrentCount %d, want 2", aws.ToInt32(g.CurrentCount))
	}
	if _, err := f.c.sm.BatchReplaceClusterNodes(ctxT(t), &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("ml-hp")}); apiCode(err) != "ValidationException" {
		t.Errorf("no node ids: %v, want ValidationException", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
