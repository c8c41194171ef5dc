package fakeaws

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

func seedContinuous(t *testing.T, srv *Server) {
	t.Helper()
	if err := srv.AddEKSCluster(EKSCluster{Name: "ml-eks"}); err != nil {
		t.Fatal(err)
	}
	err := srv.AddHyperPodCluster(HyperPodCluster{Name: "ml-hp", EKSClusterARN: testEKSARN, NodeProvisioningMode: ProvisioningContinuous,
		InstanceGroups: []InstanceGroup{{Name: "gpu", Type: "ml.p5.48xlarge", Count: 2, LifecycleS3URI: testS3URI, ExecutionRole: testRole}}})
	if err != nil {
		t.Fatal(err)
	}
}

// listEvents pages through ListClusterEvents with in, following NextToken, and returns every event.
func listEvents(t *testing.T, f *fixture, in sagemaker.ListClusterEventsInput) []smtypes.ClusterEventSummary {
	t.Helper()
	in.ClusterName = aws.String("ml-hp")
	var all []smtypes.ClusterEventSummary
	for pages := 0; ; pages++ {
		out, err := f.c.sm.ListClusterEvents(ctxT(t), &in)
		if err != nil {
			t.Fatalf("ListClusterEvents: %v", err)
		}
		all = append(all, out.Events...)
		if out.NextToken == nil {
			return all
		}
		if pages > 100 {
			t.Fatal("NextToken never ends")
		}
		in.NextToken = out.NextToken
	}
}

func descriptions(evs []smtypes.ClusterEventSummary) []string {
	var out []string
	for _, e := range evs {
		out = append(out, aws.ToString(e.Description))
	}
	return out
}

// TestClusterEventsOfAScale: UpdateCluster records the group's scaling started, each new instance running once it
// runs (after TransitionDelay) and the scaling completed; ListClusterEvents returns them in order, page by page,
// after a given time, and newest first by default.
func TestClusterEventsOfAScale(t *testing.T) {
	f := newFixture(t, 0)
	seedContinuous(t, f.srv)
	before := f.clock.Now()
	f.clock.Advance(time.Second)
	if _, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 4)}}); err != nil {
		t.Fatal(err)
	}
	asc := sagemaker.ListClusterEventsInput{EventTimeAfter: aws.Time(before), SortOrder: smtypes.SortOrderAscending, MaxResults: aws.Int32(2)}
	if got := descriptions(listEvents(t, f, asc)); len(got) != 1 || !strings.Contains(got[0], "Scaling of InstanceGroup gpu in Cluster ml-hp started: 2 to 4") {
		t.Fatalf("events before the transition ran: %q, want only the scaling started", got)
	}
	f.advance(t, f.delay)
	waitFor(t, func() bool { return len(listEvents(t, f, asc)) == 4 })
	evs := listEvents(t, f, asc)
	got := descriptions(evs)
	if !strings.Contains(got[1], "is running") || !strings.Contains(got[2], "is running") ||
		!strings.Contains(got[3], "Scaling of InstanceGroup gpu in Cluster ml-hp completed: 4 instances") {
		t.Errorf("events %q, want started, two instances running, completed", got)
	}
	for _, e := range evs {
		if e.EventLevel != smtypes.ClusterEventLevelInfo || aws.ToString(e.InstanceGroupName) != "gpu" || aws.ToString(e.ClusterName) != "ml-hp" ||
			!eventUUIDRE.MatchString(aws.ToString(e.EventId)) || !aws.ToTime(e.EventTime).After(before) {
			t.Errorf("event %+v", e)
		}
	}
	if evs[1].ResourceType != smtypes.ClusterEventResourceTypeInstance || !strings.HasPrefix(aws.ToString(evs[1].InstanceId), "i-0") {
		t.Errorf("instance event %+v has no instance", evs[1])
	}
	// After the last one's time: nothing. Default order: newest first.
	last := aws.ToTime(evs[3].EventTime)
	if rest := listEvents(t, f, sagemaker.ListClusterEventsInput{EventTimeAfter: aws.Time(last)}); len(rest) != 0 {
		t.Errorf("events after the last one: %q", descriptions(rest))
	}
	if desc := listEvents(t, f, sagemaker.ListClusterEventsInput{}); aws.ToString(desc[0].EventId) != aws.ToString(evs[3].EventId) {
		t.Errorf("default order starts with %q, want the newest", aws.ToString(desc[0].Description))
	}
	byNode := listEvents(t, f, sagemaker.ListClusterEventsInput{NodeId: evs[1].InstanceId})
	if len(byNode) != 1 || aws.ToString(byNode[0].EventId) != aws.ToString(evs[1].EventId) {
		t.Errorf("events of node %s: %q", aws.ToString(evs[1].InstanceId), descriptions(byNode))
	}
}

// TestClusterEventsOfRecoveryAndHealth: a node failing its health checks is an error event with what the agent
// found; a reboot and a replacement record their start and their end.
func TestClusterEventsOfRecoveryAndHealth(t *testing.T) {
	f := newFixture(t, 0)
	seedContinuous(t, f.srv)
	ids := listNodes(t, f, "gpu")
	a, b := aws.ToString(ids[0].InstanceId), aws.ToString(ids[1].InstanceId)
	if err := f.srv.MarkNodeFaulty("ml-hp", a, "GPU XID 79: fallen off the bus"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.sm.BatchRebootClusterNodes(ctxT(t), &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("ml-hp"), NodeIds: []string{a}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.sm.BatchReplaceClusterNodes(ctxT(t), &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("ml-hp"), NodeIds: []string{b}}); err != nil {
		t.Fatal(err)
	}
	f.advance(t, DefaultRecoveryDuration)
	asc := sagemaker.ListClusterEventsInput{SortOrder: smtypes.SortOrderAscending}
	waitFor(t, func() bool { return len(listEvents(t, f, asc)) == 6 })
	evs := listEvents(t, f, asc)
	if evs[0].EventLevel != smtypes.ClusterEventLevelError || aws.ToString(evs[0].InstanceId) != a ||
		!strings.HasSuffix(aws.ToString(evs[0].Description), "failed health checks: GPU XID 79: fallen off the bus") {
		t.Errorf("first event %+v, want the failed health check with its reason", evs[0])
	}
	want := []string{"is rebooting", "is being replaced"}
	for i, w := range want {
		if !strings.HasSuffix(aws.ToString(evs[i+1].Description), w) {
			t.Errorf("event %d %q, want %q", i+1, aws.ToString(evs[i+1].Description), w)
		}
	}
	rest := strings.Join(descriptions(evs[3:]), " | ")
	for _, w := range []string{a + " in Cluster ml-hp and InstanceGroup gpu rebooted and is running", b + " in Cluster ml-hp and InstanceGroup gpu was replaced",
		"replaced instance " + b + " and is running"} {
		if !strings.Contains(rest, w) {
			t.Errorf("events %q do not say %q", rest, w)
		}
	}
}

// TestListClusterEventsIsStrict: parameters out of the model's range, a token of another query and a cluster that
// does not provision continuously are refused as AWS refuses them; throttling is injectable like every call.
func TestListClusterEventsIsStrict(t *testing.T) {
	f := newFixture(t, 0)
	seedContinuous(t, f.srv)
	for i := range 3 {
		if err := f.srv.AddClusterEvent("ml-hp", ClusterEvent{Description: "event " + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := f.c.sm.ListClusterEvents(ctxT(t), &sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-hp"), MaxResults: aws.Int32(1)})
	if err != nil || first.NextToken == nil {
		t.Fatalf("first page: %+v %v", first, err)
	}
	cases := []struct {
		name string
		in   sagemaker.ListClusterEventsInput
		code string
		word string
	}{
		{"max results 0", sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-hp"), MaxResults: aws.Int32(0)}, "ValidationException", "maxResults"},
		{"max results 101", sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-hp"), MaxResults: aws.Int32(101)}, "ValidationException", "maxResults"},
		{"bad operation id", sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-hp"), OperationId: aws.String("op-1")}, "ValidationException", "operationId"},
		{"token of another query", sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-hp"), NextToken: first.NextToken,
			SortOrder: smtypes.SortOrderAscending}, "ValidationException", "pagination token"},
		{"unknown cluster", sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-nope")}, "ResourceNotFound", "ml-nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.c.sm.ListClusterEvents(ctxT(t), &tc.in)
			if apiCode(err) != tc.code || !strings.Contains(err.Error(), tc.word) {
				t.Errorf("error %v, want %s about %s", err, tc.code, tc.word)
			}
		})
	}
	if err := f.srv.AddHyperPodCluster(HyperPodCluster{Name: "ml-old", InstanceGroups: []InstanceGroup{{Name: "gpu", Type: "ml.p5.48xlarge", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err = f.c.sm.ListClusterEvents(ctxT(t), &sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-old")})
	if apiCode(err) != "ValidationException" || !strings.Contains(err.Error(), "NodeProvisioningMode") {
		t.Errorf("a cluster without continuous provisioning: %v, want ValidationException naming NodeProvisioningMode", err)
	}
	f.srv.Fail(OpSageMakerListClusterEvents, -1, "ThrottlingException", 400, "Rate exceeded")
	_, err = f.c.sm.ListClusterEvents(ctxT(t), &sagemaker.ListClusterEventsInput{ClusterName: aws.String("ml-hp")})
	if apiCode(err) != "ThrottlingException" || f.srv.Calls(OpSageMakerListClusterEvents) < 3 {
		t.Errorf("throttled: %v after %d calls, want ThrottlingException after the SDK's retries", err, f.srv.Calls(OpSageMakerListClusterEvents))
	}
}
