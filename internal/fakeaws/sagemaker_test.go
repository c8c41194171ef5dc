package fakeaws

import (
	"github.com/hyperops/hyperops/ops/opstest"

	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

func seedHyperPod(t *testing.T, srv *Server, groups ...InstanceGroup) {
	t.Helper()
	if len(groups) == 0 {
		groups = []InstanceGroup{
			{Name: "gpu", Type: "ml.p5.48xlarge", Count: 2, LifecycleS3URI: testS3URI, ExecutionRole: testRole},
			{Name: "cpu", Type: "ml.m5.2xlarge", Count: 1, LifecycleS3URI: testS3URI, ExecutionRole: testRole},
		}
	}
	if err := srv.AddEKSCluster(EKSCluster{Name: "ml-eks"}); err != nil {
		t.Fatal(err)
	}
	err := srv.AddHyperPodCluster(HyperPodCluster{Name: "ml-hp", EKSClusterARN: testEKSARN, InstanceGroups: groups})
	if err != nil {
		t.Fatal(err)
	}
}

func groupSpec(name, typ string, count int32) smtypes.ClusterInstanceGroupSpecification {
	return smtypes.ClusterInstanceGroupSpecification{
		InstanceGroupName: aws.String(name),
		InstanceType:      smtypes.ClusterInstanceType(typ),
		InstanceCount:     aws.Int32(count),
		LifeCycleConfig:   &smtypes.ClusterLifeCycleConfig{SourceS3Uri: aws.String(testS3URI), OnCreate: aws.String("on_create.sh")},
		ExecutionRole:     aws.String(testRole),
	}
}

func describeGroup(t *testing.T, f *fixture, name string) (smtypes.ClusterStatus, smtypes.ClusterInstanceGroupDetails) {
	t.Helper()
	out, err := f.c.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	for _, g := range out.InstanceGroups {
		if aws.ToString(g.InstanceGroupName) == name {
			return out.ClusterStatus, g
		}
	}
	t.Fatalf("DescribeCluster has no instance group %s", name)
	return "", smtypes.ClusterInstanceGroupDetails{}
}

func listNodes(t *testing.T, f *fixture, group string) []smtypes.ClusterNodeSummary {
	t.Helper()
	var nodes []smtypes.ClusterNodeSummary
	p := sagemaker.NewListClusterNodesPaginator(f.c.sm, &sagemaker.ListClusterNodesInput{
		ClusterName: aws.String("ml-hp"), InstanceGroupNameContains: aws.String(group),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatalf("ListClusterNodes: %v", err)
		}
		nodes = append(nodes, page.ClusterNodeSummaries...)
	}
	return nodes
}

func TestDescribeHyperPodCluster(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)

	out, err := f.c.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	if out.ClusterStatus != smtypes.ClusterStatusInservice || !strings.HasPrefix(aws.ToString(out.ClusterArn),
		"arn:aws:sagemaker:us-west-2:123456789012:cluster/") {
		t.Errorf("status %s, arn %s", out.ClusterStatus, aws.ToString(out.ClusterArn))
	}
	if got := aws.ToString(out.Orchestrator.Eks.ClusterArn); got != testEKSARN {
		t.Errorf("orchestrator = %s", got)
	}
	if out.CreationTime == nil || !out.CreationTime.Equal(f.clock.Now().Truncate(time.Millisecond)) {
		t.Errorf("creation time %v, clock %v", out.CreationTime, f.clock.Now())
	}
	gpu := out.InstanceGroups[0]
	if aws.ToString(gpu.InstanceGroupName) != "gpu" || gpu.InstanceType != "ml.p5.48xlarge" ||
		aws.ToInt32(gpu.CurrentCount) != 2 || aws.ToInt32(gpu.TargetCount) != 2 ||
		aws.ToString(gpu.ExecutionRole) != testRole || aws.ToString(gpu.LifeCycleConfig.SourceS3Uri) != testS3URI {
		t.Errorf("gpu group = %+v", gpu)
	}

	// By ARN too, as SageMaker accepts either.
	if _, err := f.c.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: out.ClusterArn}); err != nil {
		t.Errorf("DescribeCluster by ARN: %v", err)
	}

	nodes := listNodes(t, f, "")
	if len(nodes) != 3 {
		t.Fatalf("ListClusterNodes returned %d nodes, want 3", len(nodes))
	}
	for _, n := range nodes {
		if !strings.HasPrefix(aws.ToString(n.InstanceId), "i-") || n.InstanceStatus.Status != smtypes.ClusterInstanceStatusRunning ||
			n.LaunchTime == nil {
			t.Errorf("node %+v", n)
		}
	}
	// The seeded instances were reported to the hook, named like HyperPod nodes.
	var hooked []string
	for _, ch := range f.hooks.All() {
		for _, n := range ch.Added {
			hooked = append(hooked, n.InstanceID())
		}
	}
	var listed []string
	for _, n := range nodes {
		listed = append(listed, aws.ToString(n.InstanceId))
	}
	slices.Sort(hooked)
	slices.Sort(listed)
	if !slices.Equal(hooked, listed) {
		t.Errorf("hook saw %v, ListClusterNodes %v", hooked, listed)
	}
}

func TestDescribeMissingClusterIsResourceNotFound(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	_, err := f.c.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("nope")})
	var nf *smtypes.ResourceNotFound
	if !errors.As(err, &nf) {
		t.Fatalf("err = %v, want *types.ResourceNotFound", err)
	}
	// Clusters are regional: the same name is not found from another region.
	other := newClients(f.srv, "us-east-1")
	_, err = other.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
	if !errors.As(err, &nf) {
		t.Fatalf("from us-east-1: err = %v, want *types.ResourceNotFound", err)
	}
}

func TestScaleHyperPodGroup(t *testing.T) {
	tests := []struct {
		name         string
		from, to     int32
		wantAdded    int
		wantRemoved  int
		wantDuring   int32 // CurrentCount while Updating
		nodeInterval time.Duration
	}{
		{name: "up all at once", from: 2, to: 5, wantAdded: 3, wantDuring: 2},
		{name: "down all at once", from: 4, to: 1, wantRemoved: 3, wantDuring: 4},
		{name: "to zero", from: 2, to: 0, wantRemoved: 2, wantDuring: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.nodeInterval)
			seedHyperPod(t, f.srv,
				InstanceGroup{Name: "gpu", Type: "ml.p5.48xlarge", Count: int(tt.from), LifecycleS3URI: testS3URI, ExecutionRole: testRole},
				InstanceGroup{Name: "cpu", Type: "ml.m5.2xlarge", Count: 1, LifecycleS3URI: testS3URI, ExecutionRole: testRole})
			before := listNodes(t, f, "gpu")
			seeded := len(f.hooks.All())

			_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{
				ClusterName:    aws.String("ml-hp"),
				InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", tt.to)},
			})
			if err != nil {
				t.Fatalf("UpdateCluster: %v", err)
			}
			status, g := describeGroup(t, f, "gpu")
			if status != smtypes.ClusterStatusUpdating || aws.ToInt32(g.TargetCount) != tt.to ||
				aws.ToInt32(g.CurrentCount) != tt.wantDuring || g.Status != smtypes.InstanceGroupStatusUpdating {
				t.Fatalf("while updating: status %s, group %s current %d target %d", status, g.Status,
					aws.ToInt32(g.CurrentCount), aws.ToInt32(g.TargetCount))
			}

			f.advance(t, f.delay)
			opstest.Eventually(t, 5*time.Second, "InService", func() bool {
				status, g = describeGroup(t, f, "gpu")
				return status == smtypes.ClusterStatusInservice
			})
			if aws.ToInt32(g.CurrentCount) != tt.to || aws.ToInt32(g.TargetCount) != tt.to {
				t.Errorf("after: current %d target %d, want %d", aws.ToInt32(g.CurrentCount), aws.ToInt32(g.TargetCount), tt.to)
			}
			if _, cpu := describeGroup(t, f, "cpu"); aws.ToInt32(cpu.CurrentCount) != 1 || cpu.Status != smtypes.InstanceGroupStatusInservice {
				t.Errorf("unlisted group changed: %+v", cpu)
			}

			after := listNodes(t, f, "gpu")
			changes := f.hooks.All()[seeded:]
			var added, removed []string
			for _, ch := range changes {
				if ch.Cluster != "ml-hp" || ch.InstanceGroup != "gpu" || ch.InstanceType != "ml.p5.48xlarge" ||
					ch.EKSClusterName != "ml-eks" || ch.Labels["sagemaker.amazonaws.com/instance-group-name"] != "gpu" {
					t.Errorf("change %+v", ch)
				}
				for _, n := range ch.Added {
					added = append(added, n.InstanceID())
				}
				for _, n := range ch.Removed {
					removed = append(removed, n.InstanceID())
				}
			}
			if len(added) != tt.wantAdded || len(removed) != tt.wantRemoved {
				t.Fatalf("hook added %v removed %v", added, removed)
			}
			ids := func(ns []smtypes.ClusterNodeSummary) []string {
				var out []string
				for _, n := range ns {
					out = append(out, aws.ToString(n.InstanceId))
				}
				return out
			}
			beforeIDs, afterIDs := ids(before), ids(after)
			for _, id := range added {
				if slices.Contains(beforeIDs, id) || !slices.Contains(afterIDs, id) {
					t.Errorf("added %s is not a new node", id)
				}
			}
			for _, id := range removed {
				if !slices.Contains(beforeIDs, id) || slices.Contains(afterIDs, id) {
					t.Errorf("removed %s was not an old node", id)
				}
			}
		})
	}
}

func TestScaleHyperPodOneNodeAtATime(t *testing.T) {
	f := newFixture(t, time.Minute)
	seedHyperPod(t, f.srv)
	_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{
		ClusterName:    aws.String("ml-hp"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 5)},
	})
	if err != nil {
		t.Fatalf("UpdateCluster: %v", err)
	}
	pending := 0
	for _, n := range listNodes(t, f, "gpu") {
		if n.InstanceStatus.Status == smtypes.ClusterInstanceStatusPending {
			pending++
		}
	}
	if pending != 3 {
		t.Errorf("pending nodes after UpdateCluster = %d, want 3", pending)
	}
	step := f.delay
	for want := int32(3); want <= 5; want++ {
		f.advance(t, step)
		step = time.Minute
		opstest.Eventually(t, 5*time.Second, "one more node", func() bool {
			_, g := describeGroup(t, f, "gpu")
			return aws.ToInt32(g.CurrentCount) == want
		})
		status, _ := describeGroup(t, f, "gpu")
		if want < 5 && status != smtypes.ClusterStatusUpdating {
			t.Fatalf("at %d nodes status = %s, want Updating", want, status)
		}
	}
	opstest.Eventually(t, 5*time.Second, "InService", func() bool {
		status, _ := describeGroup(t, f, "gpu")
		return status == smtypes.ClusterStatusInservice
	})
}

func TestUpdateClusterValidation(t *testing.T) {
	valid := groupSpec("gpu", "ml.p5.48xlarge", 3)
	with := func(mut func(*smtypes.ClusterInstanceGroupSpecification)) []smtypes.ClusterInstanceGroupSpecification {
		g := groupSpec("gpu", "ml.p5.48xlarge", 3)
		mut(&g)
		return []smtypes.ClusterInstanceGroupSpecification{g}
	}
	tests := []struct {
		name     string
		cluster  string
		groups   []smtypes.ClusterInstanceGroupSpecification
		deletes  []string
		setup    func(f *fixture)
		wantCode string
	}{
		{name: "negative count", groups: with(func(g *smtypes.ClusterInstanceGroupSpecification) { g.InstanceCount = aws.Int32(-1) }),
			wantCode: "ValidationException"},
		{name: "count above the service limit", groups: with(func(g *smtypes.ClusterInstanceGroupSpecification) { g.InstanceCount = aws.Int32(7000) }),
			wantCode: "ValidationException"},
		{name: "no instance type", groups: with(func(g *smtypes.ClusterInstanceGroupSpecification) { g.InstanceType = "" }),
			wantCode: "ValidationException"},
		{name: "no lifecycle config", groups: with(func(g *smtypes.ClusterInstanceGroupSpecification) { g.LifeCycleConfig = nil }),
			wantCode: "ValidationException"},
		{name: "lifecycle not on S3", groups: with(func(g *smtypes.ClusterInstanceGroupSpecification) {
			g.LifeCycleConfig.SourceS3Uri = aws.String("/local/scripts")
		}), wantCode: "ValidationException"},
		{name: "execution role not an ARN", groups: with(func(g *smtypes.ClusterInstanceGroupSpecification) {
			g.ExecutionRole = aws.String("admin-role-please")
		}), wantCode: "ValidationException"},
		{name: "instance type change", groups: with(func(g *smtypes.ClusterInstanceGroupSpecification) { g.InstanceType = "ml.g5.12xlarge" }),
			wantCode: "ValidationException"},
		{name: "duplicate group", groups: []smtypes.ClusterInstanceGroupSpecification{valid, valid}, wantCode: "ValidationException"},
		{name: "delete unknown group", deletes: []string{"ghost"}, wantCode: "ValidationException"},
		{name: "unknown cluster", cluster: "other", groups: []smtypes.ClusterInstanceGroupSpecification{valid},
			wantCode: "ResourceNotFound"},
		{name: "cluster updating", groups: []smtypes.ClusterInstanceGroupSpecification{valid}, wantCode: "ConflictException",
			setup: func(f *fixture) {
				_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
					InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("cpu", "ml.m5.2xlarge", 2)}})
				if err != nil {
					t.Fatalf("first UpdateCluster: %v", err)
				}
			}},
		{name: "cluster failed", groups: []smtypes.ClusterInstanceGroupSpecification{valid}, wantCode: "ValidationException",
			setup: func(f *fixture) {
				f.srv.FailNextUpdate("ml-hp", "capacity")
				_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
					InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("cpu", "ml.m5.2xlarge", 2)}})
				if err != nil {
					t.Fatalf("first UpdateCluster: %v", err)
				}
				f.advance(t, f.delay)
				opstest.Eventually(t, 5*time.Second, "Failed", func() bool {
					c, _ := f.srv.HyperPodCluster("ml-hp")
					return c.Status == StatusFailed
				})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 0)
			seedHyperPod(t, f.srv)
			if tt.setup != nil {
				tt.setup(f)
			}
			before, _ := f.srv.HyperPodCluster("ml-hp")
			cluster := "ml-hp"
			if tt.cluster != "" {
				cluster = tt.cluster
			}
			_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{
				ClusterName: aws.String(cluster), InstanceGroups: tt.groups, InstanceGroupsToDelete: tt.deletes,
			})
			if got := apiCode(err); got != tt.wantCode {
				t.Fatalf("err = %v (code %q), want %s", err, got, tt.wantCode)
			}
			switch tt.wantCode {
			case "ResourceNotFound":
				var nf *smtypes.ResourceNotFound
				if !errors.As(err, &nf) {
					t.Errorf("err is %T, want *types.ResourceNotFound", err)
				}
			case "ConflictException":
				var ce *smtypes.ConflictException
				if !errors.As(err, &ce) {
					t.Errorf("err is %T, want *types.ConflictException", err)
				}
			}
			after, _ := f.srv.HyperPodCluster("ml-hp")
			if after.Status != before.Status || after.InstanceGroups[0].Count != before.InstanceGroups[0].Count {
				t.Errorf("a refused update changed the cluster: %+v → %+v", before, after)
			}
		})
	}
}

func TestUpdateClusterAddsAndDeletesGroups(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{
		ClusterName:            aws.String("ml-hp"),
		InstanceGroups:         []smtypes.ClusterInstanceGroupSpecification{groupSpec("inf", "ml.g5.12xlarge", 2)},
		InstanceGroupsToDelete: []string{"cpu"},
	})
	if err != nil {
		t.Fatalf("UpdateCluster: %v", err)
	}
	if _, g := describeGroup(t, f, "inf"); g.Status != smtypes.InstanceGroupStatusCreating || aws.ToInt32(g.TargetCount) != 2 {
		t.Errorf("new group while updating: %+v", g)
	}
	f.advance(t, f.delay)
	opstest.Eventually(t, 5*time.Second, "InService", func() bool {
		c, _ := f.srv.HyperPodCluster("ml-hp")
		return c.Status == StatusInService
	})
	c, _ := f.srv.HyperPodCluster("ml-hp")
	var names []string
	for _, g := range c.InstanceGroups {
		names = append(names, g.Name)
	}
	if !slices.Equal(names, []string{"gpu", "inf"}) || c.InstanceGroups[1].CurrentCount != 2 {
		t.Errorf("groups after = %+v", c.InstanceGroups)
	}
}

func TestCreateCluster(t *testing.T) {
	f := newFixture(t, 0)
	if err := f.srv.AddEKSCluster(EKSCluster{Name: "ml-eks"}); err != nil {
		t.Fatal(err)
	}
	input := func(name, eksARN string) *sagemaker.CreateClusterInput {
		return &sagemaker.CreateClusterInput{
			ClusterName:    aws.String(name),
			Orchestrator:   &smtypes.ClusterOrchestrator{Eks: &smtypes.ClusterOrchestratorEksConfig{ClusterArn: aws.String(eksARN)}},
			InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 2)},
			VpcConfig:      testVpc(),
		}
	}
	out, err := f.c.sm.CreateCluster(ctxT(t), input("ml-hp", testEKSARN))
	if err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	status, g := describeGroup(t, f, "gpu")
	if status != smtypes.ClusterStatusCreating || aws.ToInt32(g.CurrentCount) != 0 || aws.ToInt32(g.TargetCount) != 2 {
		t.Fatalf("after create: %s current %d target %d", status, aws.ToInt32(g.CurrentCount), aws.ToInt32(g.TargetCount))
	}
	f.advance(t, f.delay)
	opstest.Eventually(t, 5*time.Second, "InService", func() bool {
		status, g = describeGroup(t, f, "gpu")
		return status == smtypes.ClusterStatusInservice
	})
	if aws.ToInt32(g.CurrentCount) != 2 {
		t.Errorf("current = %d, want 2", aws.ToInt32(g.CurrentCount))
	}
	if c, _ := f.srv.HyperPodCluster("ml-hp"); c.ARN != aws.ToString(out.ClusterArn) {
		t.Errorf("ARN %s, CreateCluster said %s", c.ARN, aws.ToString(out.ClusterArn))
	}

	_, err = f.c.sm.CreateCluster(ctxT(t), input("ml-hp", testEKSARN))
	var inUse *smtypes.ResourceInUse
	if !errors.As(err, &inUse) {
		t.Errorf("second create: err = %v, want *types.ResourceInUse", err)
	}
	_, err = f.c.sm.CreateCluster(ctxT(t), input("ml-hp2", "arn:aws:eks:us-west-2:123456789012:cluster/missing"))
	if apiCode(err) != "ValidationException" {
		t.Errorf("unknown EKS cluster: err = %v, want ValidationException", err)
	}
	_, err = f.c.sm.CreateCluster(ctxT(t), input("ml_hp", testEKSARN))
	if apiCode(err) != "ValidationException" {
		t.Errorf("bad name: err = %v, want ValidationException", err)
	}
}

func TestFailNextUpdate(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	f.srv.FailNextUpdate("ml-hp", "Insufficient capacity for ml.p5.48xlarge")
	_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{
		ClusterName:    aws.String("ml-hp"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 4)},
	})
	if err != nil {
		t.Fatalf("UpdateCluster: %v", err)
	}
	f.advance(t, f.delay)
	var out *sagemaker.DescribeClusterOutput
	opstest.Eventually(t, 5*time.Second, "Failed", func() bool {
		out, err = f.c.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
		return err == nil && out.ClusterStatus == smtypes.ClusterStatusFailed
	})
	if got := aws.ToString(out.FailureMessage); got != "Insufficient capacity for ml.p5.48xlarge" {
		t.Errorf("FailureMessage = %q", got)
	}
	if g := out.InstanceGroups[0]; aws.ToInt32(g.CurrentCount) != 2 || g.Status != smtypes.InstanceGroupStatusFailed {
		t.Errorf("failed group = %+v", g)
	}
	if len(listNodes(t, f, "gpu")) != 2 {
		t.Errorf("instances that never launched are still listed")
	}
}

func TestDeleteCluster(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	seeded := len(f.hooks.All())
	if _, err := f.c.sm.DeleteCluster(ctxT(t), &sagemaker.DeleteClusterInput{ClusterName: aws.String("ml-hp")}); err != nil {
		t.Fatalf("DeleteCluster: %v", err)
	}
	if status, _ := describeGroup(t, f, "gpu"); status != smtypes.ClusterStatusDeleting {
		t.Errorf("status = %s, want Deleting", status)
	}
	f.advance(t, f.delay)
	opstest.Eventually(t, 5*time.Second, "gone", func() bool {
		_, ok := f.srv.HyperPodCluster("ml-hp")
		return !ok
	})
	removed := 0
	for _, ch := range f.hooks.All()[seeded:] {
		removed += len(ch.Removed)
	}
	if removed != 3 {
		t.Errorf("hook removed %d nodes, want 3", removed)
	}
}

func TestListClusterNodesPagination(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv, InstanceGroup{Name: "gpu", Type: "ml.p5.48xlarge", Count: 25, LifecycleS3URI: testS3URI,
		ExecutionRole: testRole})

	seen := map[string]bool{}
	pages := 0
	p := sagemaker.NewListClusterNodesPaginator(f.c.sm, &sagemaker.ListClusterNodesInput{
		ClusterName: aws.String("ml-hp"), MaxResults: aws.Int32(10),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if len(page.ClusterNodeSummaries) > 10 {
			t.Errorf("page of %d > MaxResults", len(page.ClusterNodeSummaries))
		}
		for _, n := range page.ClusterNodeSummaries {
			if seen[aws.ToString(n.InstanceId)] {
				t.Errorf("node %s on two pages", aws.ToString(n.InstanceId))
			}
			seen[aws.ToString(n.InstanceId)] = true
		}
	}
	if pages != 3 || len(seen) != 25 {
		t.Errorf("%d pages, %d nodes; want 3 pages, 25 nodes", pages, len(seen))
	}

	tests := []struct {
		name string
		in   sagemaker.ListClusterNodesInput
	}{
		{"bad token", sagemaker.ListClusterNodesInput{ClusterName: aws.String("ml-hp"), NextToken: aws.String("garbage")}},
		{"MaxResults too big", sagemaker.ListClusterNodesInput{ClusterName: aws.String("ml-hp"), MaxResults: aws.Int32(101)}},
		{"bad sort", sagemaker.ListClusterNodesInput{ClusterName: aws.String("ml-hp"), SortBy: "SIZE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.c.sm.ListClusterNodes(ctxT(t), &tt.in); apiCode(err) != "ValidationException" {
				t.Errorf("err = %v, want ValidationException", err)
			}
		})
	}
}
