package fakeaws

import (
	"github.com/hyperops/hyperops/ops/opstest"
	"time"

	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

func seedEKS(t *testing.T, srv *Server) {
	t.Helper()
	if err := srv.AddEKSCluster(EKSCluster{Name: "ml-eks", Version: "1.31"}); err != nil {
		t.Fatal(err)
	}
	for _, ng := range []Nodegroup{
		{Cluster: "ml-eks", Name: "gpu-ng", InstanceTypes: []string{"g5.12xlarge"}, MinSize: 1, MaxSize: 8, DesiredSize: 2,
			Labels: map[string]string{"workload": "training"}},
		{Cluster: "ml-eks", Name: "system", InstanceTypes: []string{"m5.large"}, MinSize: 2, MaxSize: 4, DesiredSize: 2},
	} {
		if err := srv.AddNodegroup(ng); err != nil {
			t.Fatal(err)
		}
	}
}

func scaleInput(min, max, desired *int32) *eks.UpdateNodegroupConfigInput {
	return &eks.UpdateNodegroupConfigInput{
		ClusterName: aws.String("ml-eks"), NodegroupName: aws.String("gpu-ng"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: min, MaxSize: max, DesiredSize: desired},
	}
}

func TestDescribeEKS(t *testing.T) {
	f := newFixture(t, 0)
	seedEKS(t, f.srv)

	cl, err := f.c.eks.DescribeCluster(ctxT(t), &eks.DescribeClusterInput{Name: aws.String("ml-eks")})
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	if cl.Cluster.Status != ekstypes.ClusterStatusActive || aws.ToString(cl.Cluster.Arn) != testEKSARN ||
		aws.ToString(cl.Cluster.Version) != "1.31" {
		t.Errorf("cluster = %+v", cl.Cluster)
	}

	var names []string
	p := eks.NewListNodegroupsPaginator(f.c.eks, &eks.ListNodegroupsInput{ClusterName: aws.String("ml-eks"), MaxResults: aws.Int32(1)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatalf("ListNodegroups: %v", err)
		}
		names = append(names, page.Nodegroups...)
	}
	if len(names) != 2 || names[0] != "gpu-ng" || names[1] != "system" {
		t.Errorf("node groups = %v", names)
	}

	ng, err := f.c.eks.DescribeNodegroup(ctxT(t), &eks.DescribeNodegroupInput{
		ClusterName: aws.String("ml-eks"), NodegroupName: aws.String("gpu-ng"),
	})
	if err != nil {
		t.Fatalf("DescribeNodegroup: %v", err)
	}
	sc := ng.Nodegroup.ScalingConfig
	if ng.Nodegroup.Status != ekstypes.NodegroupStatusActive || aws.ToInt32(sc.MinSize) != 1 || aws.ToInt32(sc.MaxSize) != 8 ||
		aws.ToInt32(sc.DesiredSize) != 2 || ng.Nodegroup.InstanceTypes[0] != "g5.12xlarge" ||
		ng.Nodegroup.Labels["workload"] != "training" {
		t.Errorf("node group = %+v, scaling %+v", ng.Nodegroup, sc)
	}

	tests := []struct {
		name string
		call func() error
	}{
		{"cluster", func() error {
			_, err := f.c.eks.DescribeCluster(ctxT(t), &eks.DescribeClusterInput{Name: aws.String("nope")})
			return err
		}},
		{"node group", func() error {
			_, err := f.c.eks.DescribeNodegroup(ctxT(t), &eks.DescribeNodegroupInput{
				ClusterName: aws.String("ml-eks"), NodegroupName: aws.String("nope")})
			return err
		}},
		{"update", func() error {
			_, err := f.c.eks.DescribeUpdate(ctxT(t), &eks.DescribeUpdateInput{
				Name: aws.String("ml-eks"), UpdateId: aws.String("0000"), NodegroupName: aws.String("gpu-ng")})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run("missing "+tt.name, func(t *testing.T) {
			var nf *ekstypes.ResourceNotFoundException
			if err := tt.call(); !errors.As(err, &nf) {
				t.Errorf("err = %v, want *types.ResourceNotFoundException", err)
			}
		})
	}
}

func TestScaleNodegroup(t *testing.T) {
	tests := []struct {
		name               string
		desired            int32
		wantAdd, wantRemov int
	}{
		{"up", 5, 3, 0},
		{"down", 1, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 0)
			seedEKS(t, f.srv)
			seeded := len(f.hooks.All())

			up, err := f.c.eks.UpdateNodegroupConfig(ctxT(t), scaleInput(nil, nil, aws.Int32(tt.desired)))
			if err != nil {
				t.Fatalf("UpdateNodegroupConfig: %v", err)
			}
			u := up.Update
			if u.Status != ekstypes.UpdateStatusInProgress || u.Type != ekstypes.UpdateTypeConfigUpdate || aws.ToString(u.Id) == "" ||
				len(u.Params) != 1 || u.Params[0].Type != ekstypes.UpdateParamTypeDesiredSize {
				t.Fatalf("update = %+v", u)
			}
			describe := func() *eks.DescribeUpdateOutput {
				out, err := f.c.eks.DescribeUpdate(ctxT(t), &eks.DescribeUpdateInput{
					Name: aws.String("ml-eks"), UpdateId: u.Id, NodegroupName: aws.String("gpu-ng")})
				if err != nil {
					t.Fatalf("DescribeUpdate: %v", err)
				}
				return out
			}
			if got := describe().Update.Status; got != ekstypes.UpdateStatusInProgress {
				t.Fatalf("before the delay: %s", got)
			}
			ng, _ := f.srv.Nodegroup("ml-eks", "gpu-ng")
			if ng.Status != "UPDATING" || ng.DesiredSize != int(tt.desired) {
				t.Errorf("node group while updating: %+v", ng)
			}

			f.advance(t, f.delay)
			opstest.Eventually(t, 5*time.Second, "Successful", func() bool { return describe().Update.Status == ekstypes.UpdateStatusSuccessful })
			out, err := f.c.eks.DescribeNodegroup(ctxT(t), &eks.DescribeNodegroupInput{
				ClusterName: aws.String("ml-eks"), NodegroupName: aws.String("gpu-ng")})
			if err != nil {
				t.Fatal(err)
			}
			if out.Nodegroup.Status != ekstypes.NodegroupStatusActive || aws.ToInt32(out.Nodegroup.ScalingConfig.DesiredSize) != tt.desired {
				t.Errorf("after: %s desired %d", out.Nodegroup.Status, aws.ToInt32(out.Nodegroup.ScalingConfig.DesiredSize))
			}
			added, removed := 0, 0
			for _, ch := range f.hooks.All()[seeded:] {
				if ch.Service != ServiceEKS || ch.Cluster != "ml-eks" || ch.InstanceGroup != "gpu-ng" ||
					ch.Labels["eks.amazonaws.com/nodegroup"] != "gpu-ng" || ch.Labels["workload"] != "training" {
					t.Errorf("change %+v", ch)
				}
				added += len(ch.Added)
				removed += len(ch.Removed)
			}
			ng, _ = f.srv.Nodegroup("ml-eks", "gpu-ng")
			if added != tt.wantAdd || removed != tt.wantRemov || len(ng.Nodes) != int(tt.desired) {
				t.Errorf("hook +%d -%d, nodes %d", added, removed, len(ng.Nodes))
			}
		})
	}
}

func TestUpdateNodegroupConfigValidation(t *testing.T) {
	tests := []struct {
		name     string
		in       *eks.UpdateNodegroupConfigInput
		busy     bool
		wantCode string
	}{
		{"desired above max", scaleInput(nil, nil, aws.Int32(9)), false, "InvalidParameterException"},
		{"min above desired", scaleInput(aws.Int32(3), nil, nil), false, "InvalidParameterException"},
		{"min above max", scaleInput(aws.Int32(5), aws.Int32(4), aws.Int32(4)), false, "InvalidParameterException"},
		{"no change", scaleInput(nil, nil, aws.Int32(2)), false, "InvalidParameterException"},
		{"update in progress", scaleInput(nil, nil, aws.Int32(4)), true, "ResourceInUseException"},
		{"unknown node group", &eks.UpdateNodegroupConfigInput{ClusterName: aws.String("ml-eks"), NodegroupName: aws.String("x"),
			ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(1)}}, false, "ResourceNotFoundException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 0)
			seedEKS(t, f.srv)
			if tt.busy {
				if _, err := f.c.eks.UpdateNodegroupConfig(ctxT(t), scaleInput(nil, nil, aws.Int32(3))); err != nil {
					t.Fatal(err)
				}
			}
			_, err := f.c.eks.UpdateNodegroupConfig(ctxT(t), tt.in)
			if apiCode(err) != tt.wantCode {
				t.Fatalf("err = %v, want %s", err, tt.wantCode)
			}
			if tt.wantCode == "InvalidParameterException" {
				var ipe *ekstypes.InvalidParameterException
				if !errors.As(err, &ipe) || aws.ToString(ipe.NodegroupName) != "gpu-ng" {
					t.Errorf("err %T %+v, want *types.InvalidParameterException naming the node group", err, ipe)
				}
			}
		})
	}
}

func TestUpdateNodegroupConfigIsIdempotentPerToken(t *testing.T) {
	f := newFixture(t, 0)
	seedEKS(t, f.srv)
	in := scaleInput(nil, nil, aws.Int32(4))
	in.ClientRequestToken = aws.String("req-1")
	first, err := f.c.eks.UpdateNodegroupConfig(ctxT(t), in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.c.eks.UpdateNodegroupConfig(ctxT(t), in)
	if err != nil {
		t.Fatalf("retry with the same token: %v", err)
	}
	if aws.ToString(first.Update.Id) != aws.ToString(again.Update.Id) {
		t.Errorf("same token gave updates %s and %s", aws.ToString(first.Update.Id), aws.ToString(again.Update.Id))
	}
}

func TestFailNextNodegroupUpdate(t *testing.T) {
	f := newFixture(t, 0)
	seedEKS(t, f.srv)
	if err := f.srv.FailNextNodegroupUpdate("ml-eks", "gpu-ng", "Could not launch On-Demand Instances"); err != nil {
		t.Fatal(err)
	}
	up, err := f.c.eks.UpdateNodegroupConfig(ctxT(t), scaleInput(nil, nil, aws.Int32(6)))
	if err != nil {
		t.Fatal(err)
	}
	f.advance(t, f.delay)
	var out *eks.DescribeUpdateOutput
	opstest.Eventually(t, 5*time.Second, "Failed", func() bool {
		out, err = f.c.eks.DescribeUpdate(ctxT(t), &eks.DescribeUpdateInput{
			Name: aws.String("ml-eks"), UpdateId: up.Update.Id, NodegroupName: aws.String("gpu-ng")})
		return err == nil && out.Update.Status == ekstypes.UpdateStatusFailed
	})
	if len(out.Update.Errors) != 1 || out.Update.Errors[0].ErrorCode != ekstypes.ErrorCodeNodeCreationFailure {
		t.Errorf("errors = %+v", out.Update.Errors)
	}
	if ng, _ := f.srv.Nodegroup("ml-eks", "gpu-ng"); ng.Status != "ACTIVE" || len(ng.Nodes) != 2 {
		t.Errorf("node group after failure: %+v", ng)
	}
}
