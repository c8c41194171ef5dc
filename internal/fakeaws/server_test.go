package fakeaws

import (
	"github.com/hyperops/hyperops/ops/opstest"

	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/jonboulle/clockwork"
)

// TestCloseStopsTransitions proves Close owns the transition timers: a pending change never reaches the
// hook afterwards, and (with goleak in TestMain) no goroutine outlives the server.
func TestCloseStopsTransitions(t *testing.T) {
	clock := clockwork.NewFakeClock()
	hooks := &hookRecorder{}
	srv := New(Options{Clock: clock, TransitionDelay: time.Minute, OnNodesChanged: hooks.record})
	seedAll(t, srv)
	seeded := len(hooks.All())
	c := newClients(srv, "us-west-2")
	_, err := c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 3)}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv.Close() // idempotent
	clock.Advance(time.Hour)
	if got := len(hooks.All()); got != seeded {
		t.Errorf("hook called %d times after Close", got-seeded)
	}
}

// TestRealClockTransition runs one transition on the real clock with a short delay, as the e2e tier does.
func TestRealClockTransition(t *testing.T) {
	changed := make(chan NodeChange, 4)
	srv := New(Options{TransitionDelay: 20 * time.Millisecond, OnNodesChanged: func(_ context.Context, ch NodeChange) {
		changed <- ch
	}})
	defer srv.Close()
	seedAll(t, srv)
	<-changed // the seeded node group ("gpu-ng")
	<-changed // the seeded system node group
	<-changed // the seeded HyperPod group
	c := newClients(srv, "us-west-2")
	_, err := c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ch := <-changed:
		if len(ch.Added) != 1 || ch.InstanceGroup != "gpu" {
			t.Errorf("change %+v", ch)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no node change within 5s")
	}
	opstest.Eventually(t, 5*time.Second, "InService", func() bool {
		hc, _ := srv.HyperPodCluster("ml-hp")
		return hc.Status == StatusInService && hc.InstanceGroups[0].CurrentCount == 2
	})
}
