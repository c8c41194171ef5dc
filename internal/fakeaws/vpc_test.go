package fakeaws

import (
	"github.com/hyperops/hyperops/ops/opstest"
	"time"

	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

var (
	testSubnets        = []string{"subnet-0a1b2c3d4e5f60718", "subnet-89abcdef"}
	testSecurityGroups = []string{"sg-0123456789abcdef0"}
)

func testVpc() *smtypes.VpcConfig {
	return &smtypes.VpcConfig{Subnets: slices.Clone(testSubnets), SecurityGroupIds: slices.Clone(testSecurityGroups)}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%08x", prefix, i)
	}
	return out
}

func TestCreateClusterVpcConfig(t *testing.T) {
	tests := []struct {
		name    string
		vpc     *smtypes.VpcConfig
		slurm   bool   // no orchestrator: a Slurm cluster
		wantErr string // "" = accepted; else a fragment of the ValidationException's message
	}{
		{name: "EKS with a VPC", vpc: testVpc()},
		{name: "EKS without a VPC", wantErr: "VpcConfig is required for a cluster orchestrated by Amazon EKS"},
		{name: "Slurm without a VPC", slurm: true},
		{name: "no subnets", vpc: &smtypes.VpcConfig{Subnets: []string{}, SecurityGroupIds: testSecurityGroups},
			wantErr: "at 'vpcConfig.subnets' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{name: "17 subnets", vpc: &smtypes.VpcConfig{Subnets: ids("subnet", 17), SecurityGroupIds: testSecurityGroups},
			wantErr: "at 'vpcConfig.subnets' failed to satisfy constraint: Member must have length less than or equal to 16"},
		{name: "16 subnets", vpc: &smtypes.VpcConfig{Subnets: ids("subnet", 16), SecurityGroupIds: testSecurityGroups}},
		{name: "6 security groups", vpc: &smtypes.VpcConfig{Subnets: testSubnets, SecurityGroupIds: ids("sg", 6)},
			wantErr: "at 'vpcConfig.securityGroupIds' failed to satisfy constraint: Member must have length less than or equal to 5"},
		{name: "subnet ID outside the model's pattern", vpc: &smtypes.VpcConfig{Subnets: []string{"subnet_0a1b2c3d"}, SecurityGroupIds: testSecurityGroups},
			wantErr: "Value 'subnet_0a1b2c3d' at 'vpcConfig.subnets.1.member' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{name: "security group ID too long", vpc: &smtypes.VpcConfig{Subnets: testSubnets, SecurityGroupIds: []string{"sg-" + strings.Repeat("0", 30)}},
			wantErr: "at 'vpcConfig.securityGroupIds.1.member' failed to satisfy constraint: Member must have length between 0 and 32"},
		{name: "not a subnet ID", vpc: &smtypes.VpcConfig{Subnets: []string{"subnet-0a1b2c3d", "sg-0123abcd"}, SecurityGroupIds: testSecurityGroups},
			wantErr: "invalid subnet ID 'sg-0123abcd'"},
		{name: "not a security group ID", vpc: &smtypes.VpcConfig{Subnets: testSubnets, SecurityGroupIds: []string{"sg-XYZ"}},
			wantErr: "invalid security group ID 'sg-XYZ'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 0)
			if err := f.srv.AddEKSCluster(EKSCluster{Name: "ml-eks"}); err != nil {
				t.Fatal(err)
			}
			in := &sagemaker.CreateClusterInput{
				ClusterName:    aws.String("ml-hp"),
				Orchestrator:   &smtypes.ClusterOrchestrator{Eks: &smtypes.ClusterOrchestratorEksConfig{ClusterArn: aws.String(testEKSARN)}},
				InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{groupSpec("gpu", "ml.p5.48xlarge", 1)},
				VpcConfig:      tt.vpc,
			}
			if tt.slurm {
				in.Orchestrator = nil
			}
			_, err := f.c.sm.CreateCluster(ctxT(t), in)
			c, exists := f.srv.HyperPodCluster("ml-hp")
			if tt.wantErr != "" {
				if apiCode(err) != "ValidationException" || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want a ValidationException containing %q", err, tt.wantErr)
				}
				if exists {
					t.Errorf("a refused CreateCluster created %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateCluster: %v", err)
			}
			out, err := f.c.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: aws.String("ml-hp")})
			if err != nil {
				t.Fatalf("DescribeCluster: %v", err)
			}
			if tt.vpc == nil {
				if out.VpcConfig != nil || c.VPC != nil {
					t.Errorf("VPC described as %+v, snapshot %+v; none was sent", out.VpcConfig, c.VPC)
				}
				return
			}
			if out.VpcConfig == nil || !slices.Equal(out.VpcConfig.Subnets, tt.vpc.Subnets) ||
				!slices.Equal(out.VpcConfig.SecurityGroupIds, tt.vpc.SecurityGroupIds) {
				t.Errorf("DescribeCluster VpcConfig = %+v, sent %+v", out.VpcConfig, tt.vpc)
			}
			if c.VPC == nil || !slices.Equal(c.VPC.Subnets, tt.vpc.Subnets) || !slices.Equal(c.VPC.SecurityGroupIDs, tt.vpc.SecurityGroupIds) {
				t.Errorf("snapshot VPC = %+v", c.VPC)
			}
		})
	}
}

// tunedSpec is an instance group spec with every optional field the fake keeps.
func tunedSpec(count int32) smtypes.ClusterInstanceGroupSpecification {
	g := groupSpec("gpu", "ml.p5.48xlarge", count)
	g.ThreadsPerCore = aws.Int32(2)
	g.MinInstanceCount = aws.Int32(1)
	g.ImageId = aws.String("ami-0123456789abcdef0")
	g.ImageReleaseVersion = aws.String("1.2.3")
	g.KubernetesConfig = &smtypes.ClusterKubernetesConfig{
		Labels: map[string]string{"team": "ml"},
		Taints: []smtypes.ClusterKubernetesTaint{{Key: aws.String("gpu"), Value: aws.String("true"), Effect: smtypes.ClusterKubernetesTaintEffectNoSchedule}},
	}
	g.InstanceStorageConfigs = []smtypes.ClusterInstanceStorageConfig{&smtypes.ClusterInstanceStorageConfigMemberEbsVolumeConfig{
		Value: smtypes.ClusterEbsVolumeConfig{VolumeSizeInGB: aws.Int32(500)}}}
	g.OverrideVpcConfig = &smtypes.VpcConfig{Subnets: []string{"subnet-0fedcba9"}, SecurityGroupIds: testSecurityGroups}
	g.OnStartDeepHealthChecks = []smtypes.DeepHealthCheckType{smtypes.DeepHealthCheckTypeInstanceStress}
	g.TrainingPlanArn = aws.String("arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-plan")
	g.NetworkInterface = &smtypes.ClusterNetworkInterface{InterfaceType: smtypes.ClusterInterfaceType("efa")}
	return g
}

// TestUpdateClusterReplacesGroupConfiguration: DescribeCluster reports what UpdateCluster last sent for a
// group, and a field left out of the next UpdateCluster is cleared, as a replacing update does.
func TestUpdateClusterReplacesGroupConfiguration(t *testing.T) {
	f := newFixture(t, 0)
	seedHyperPod(t, f.srv)
	update := func(spec smtypes.ClusterInstanceGroupSpecification) {
		t.Helper()
		_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
			InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{spec}})
		if err != nil {
			t.Fatalf("UpdateCluster: %v", err)
		}
		f.advance(t, f.delay)
		opstest.Eventually(t, 5*time.Second, "InService", func() bool {
			status, _ := describeGroup(t, f, "gpu")
			return status == smtypes.ClusterStatusInservice
		})
	}

	update(tunedSpec(3))
	_, g := describeGroup(t, f, "gpu")
	checks := []struct {
		what string
		ok   bool
	}{
		{"ThreadsPerCore", aws.ToInt32(g.ThreadsPerCore) == 2},
		{"MinCount", aws.ToInt32(g.MinCount) == 1},
		{"image", aws.ToString(g.CurrentImageId) == "ami-0123456789abcdef0" && aws.ToString(g.DesiredImageId) == "ami-0123456789abcdef0"},
		{"image release", aws.ToString(g.DesiredImageReleaseVersion) == "1.2.3"},
		{"labels", g.KubernetesConfig != nil && maps.Equal(g.KubernetesConfig.DesiredLabels, map[string]string{"team": "ml"}) &&
			maps.Equal(g.KubernetesConfig.CurrentLabels, map[string]string{"team": "ml"})},
		{"taints", g.KubernetesConfig != nil && len(g.KubernetesConfig.DesiredTaints) == 1 &&
			aws.ToString(g.KubernetesConfig.DesiredTaints[0].Key) == "gpu" && g.KubernetesConfig.DesiredTaints[0].Effect == "NoSchedule"},
		{"storage", len(g.InstanceStorageConfigs) == 1 && ebsSize(g.InstanceStorageConfigs[0]) == 500},
		{"override VPC", g.OverrideVpcConfig != nil && slices.Equal(g.OverrideVpcConfig.Subnets, []string{"subnet-0fedcba9"})},
		{"deep health checks", slices.Equal(g.OnStartDeepHealthChecks, []smtypes.DeepHealthCheckType{"InstanceStress"})},
		{"training plan", strings.HasSuffix(aws.ToString(g.TrainingPlanArn), "training-plan/p5-plan")},
		{"network interface", g.NetworkInterface != nil && g.NetworkInterface.InterfaceType == "efa"},
	}
	for _, c := range checks {
		if !c.ok {
			b, _ := json.Marshal(g)
			t.Errorf("%s not described as sent: %s", c.what, b)
		}
	}

	update(groupSpec("gpu", "ml.p5.48xlarge", 3))
	_, g = describeGroup(t, f, "gpu")
	if aws.ToInt32(g.ThreadsPerCore) != 1 || g.MinCount != nil || g.DesiredImageId != nil || g.KubernetesConfig != nil ||
		g.InstanceStorageConfigs != nil || g.OverrideVpcConfig != nil || g.TrainingPlanArn != nil {
		b, _ := json.Marshal(g)
		t.Errorf("fields left out of UpdateCluster were kept: %s", b)
	}
}

func ebsSize(c smtypes.ClusterInstanceStorageConfig) int32 {
	if ebs, ok := c.(*smtypes.ClusterInstanceStorageConfigMemberEbsVolumeConfig); ok {
		return aws.ToInt32(ebs.Value.VolumeSizeInGB)
	}
	return 0
}

func TestUpdateClusterGroupConfigurationValidation(t *testing.T) {
	tests := []struct {
		name    string
		mut     func(*smtypes.ClusterInstanceGroupSpecification)
		wantErr string
	}{
		{"min count above count", func(g *smtypes.ClusterInstanceGroupSpecification) { g.MinInstanceCount = aws.Int32(4) },
			"MinInstanceCount (4) of instance group gpu must be less than or equal to its InstanceCount (3)"},
		{"override VPC with 6 security groups", func(g *smtypes.ClusterInstanceGroupSpecification) {
			g.OverrideVpcConfig.SecurityGroupIds = ids("sg", 6)
		}, "at 'instanceGroups.1.member.overrideVpcConfig.securityGroupIds' failed to satisfy constraint: Member must have length less than or equal to 5"},
		{"override VPC with a malformed subnet", func(g *smtypes.ClusterInstanceGroupSpecification) {
			g.OverrideVpcConfig.Subnets = []string{"subnet-nothex00"}
		}, "OverrideVpcConfig of instance group gpu: invalid subnet ID 'subnet-nothex00'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 0)
			seedHyperPod(t, f.srv)
			spec := tunedSpec(3)
			tt.mut(&spec)
			_, err := f.c.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: aws.String("ml-hp"),
				InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{spec}})
			if apiCode(err) != "ValidationException" || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want a ValidationException containing %q", err, tt.wantErr)
			}
			if c, _ := f.srv.HyperPodCluster("ml-hp"); c.Status != StatusInService || c.InstanceGroups[0].Count != 2 {
				t.Errorf("a refused update changed the cluster: %+v", c)
			}
		})
	}
}
