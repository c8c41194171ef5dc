package aws

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/opstest"
)

// fullDetails is an instance group as DescribeCluster could describe it, with every field set.
func fullDetails() *smtypes.ClusterInstanceGroupDetails {
	next := time.Date(2025, 3, 10, 4, 0, 0, 0, time.UTC)
	deploy := &smtypes.DeploymentConfiguration{WaitIntervalInSeconds: awssdk.Int32(300)}
	return &smtypes.ClusterInstanceGroupDetails{
		InstanceGroupName: awssdk.String("gpu"), InstanceType: "ml.p5.48xlarge",
		CurrentCount: awssdk.Int32(4), TargetCount: awssdk.Int32(4), MinCount: awssdk.Int32(2),
		LifeCycleConfig: &smtypes.ClusterLifeCycleConfig{SourceS3Uri: awssdk.String(testS3), OnCreate: awssdk.String("on_create.sh")},
		ExecutionRole:   awssdk.String(testRoleARN), ThreadsPerCore: awssdk.Int32(2),
		InstanceStorageConfigs: []smtypes.ClusterInstanceStorageConfig{&smtypes.ClusterInstanceStorageConfigMemberEbsVolumeConfig{
			Value: smtypes.ClusterEbsVolumeConfig{VolumeSizeInGB: awssdk.Int32(500)}}},
		OnStartDeepHealthChecks: []smtypes.DeepHealthCheckType{smtypes.DeepHealthCheckTypeInstanceStress},
		OverrideVpcConfig:       &smtypes.VpcConfig{Subnets: []string{"subnet-0fedcba9"}, SecurityGroupIds: testSecurityGroups},
		TrainingPlanArn:         awssdk.String("arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5"),
		ScheduledUpdateConfig:   &smtypes.ScheduledUpdateConfig{ScheduleExpression: awssdk.String("cron(0 4 ? * SUN *)")},
		CapacityRequirements:    &smtypes.ClusterCapacityRequirements{},
		CurrentImageId:          awssdk.String("ami-0000000000000000a"), DesiredImageId: awssdk.String("ami-0000000000000000b"),
		CurrentImageReleaseVersion: awssdk.String("1.2.3"), DesiredImageReleaseVersion: awssdk.String("1.2.4"),
		KubernetesConfig: &smtypes.ClusterKubernetesConfigDetails{
			CurrentLabels: map[string]string{"team": "old"}, DesiredLabels: map[string]string{"team": "ml"},
			DesiredTaints: []smtypes.ClusterKubernetesTaint{{Key: awssdk.String("gpu"), Effect: smtypes.ClusterKubernetesTaintEffectNoSchedule}},
		},
		InstanceRequirements: &smtypes.ClusterInstanceRequirementDetails{
			CurrentInstanceTypes: []smtypes.ClusterInstanceType{"ml.p5.48xlarge"},
			DesiredInstanceTypes: []smtypes.ClusterInstanceType{"ml.p5.48xlarge", "ml.p4d.24xlarge"},
		},
		AutoPatchConfig: &smtypes.ClusterAutoPatchConfigDetails{
			PatchingStrategy: smtypes.ClusterPatchingStrategy("WhenIdle"), DeploymentConfig: deploy,
			IdleWaitWindowInSeconds: awssdk.Int32(7200),
			DrainPolicy:             &smtypes.ClusterDrainPolicy{},
			CurrentPatchSchedule:    &smtypes.ClusterPatchScheduleDetails{NextPatchDate: &next},
		},
		NetworkInterface: &smtypes.ClusterNetworkInterfaceDetails{InterfaceType: smtypes.ClusterInterfaceType("efa")},
		SlurmConfig:      &smtypes.ClusterSlurmConfigDetails{NodeType: smtypes.ClusterSlurmNodeType("Worker"), PartitionNames: []string{"p"}},
	}
}

// TestUpdateSpecCarriesEveryField fails when the SDK gains an instance group field a scale would drop: with
// every detail set, every specification field must be set, except the ones the spec leaves out on purpose.
func TestUpdateSpecCarriesEveryField(t *testing.T) {
	leftOut := map[string]string{
		"ImageReleaseVersion": "the AMI ID already pins it",
		"InstanceType":        "mutually exclusive with InstanceRequirements, which the group has",
	}
	spec := reflect.ValueOf(updateSpec(fullDetails(), 3))
	for i := range spec.NumField() {
		f := spec.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		_, skip := leftOut[f.Name]
		if zero := spec.Field(i).IsZero(); zero != skip {
			t.Errorf("field %s: zero=%v, want zero=%v (%s)", f.Name, zero, skip, leftOut[f.Name])
		}
	}
}

func TestUpdateSpec(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*smtypes.ClusterInstanceGroupDetails)
		count int
		check func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification)
	}{
		{"desired values go back, not current ones", nil, 3, func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification) {
			if s.KubernetesConfig == nil || s.InstanceRequirements == nil || s.AutoPatchConfig == nil {
				t.Fatalf("spec %s", jsonOf(s))
			}
			if awssdk.ToString(s.ImageId) != "ami-0000000000000000b" || s.KubernetesConfig.Labels["team"] != "ml" ||
				len(s.KubernetesConfig.Taints) != 1 || len(s.InstanceRequirements.InstanceTypes) != 2 ||
				s.AutoPatchConfig.PatchSchedule == nil || awssdk.ToInt32(s.InstanceCount) != 3 || awssdk.ToInt32(s.MinInstanceCount) != 2 {
				t.Errorf("spec %s", jsonOf(s))
			}
		}},
		{"current values when nothing is desired", func(d *smtypes.ClusterInstanceGroupDetails) {
			d.DesiredImageId, d.KubernetesConfig.DesiredLabels, d.KubernetesConfig.DesiredTaints = nil, nil, nil
			d.InstanceRequirements.DesiredInstanceTypes = nil
		}, 3, func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification) {
			if s.KubernetesConfig == nil || s.InstanceRequirements == nil {
				t.Fatalf("spec %s", jsonOf(s))
			}
			if awssdk.ToString(s.ImageId) != "ami-0000000000000000a" || s.KubernetesConfig.Labels["team"] != "old" ||
				s.KubernetesConfig.Taints != nil || len(s.InstanceRequirements.InstanceTypes) != 1 {
				t.Errorf("spec %s", jsonOf(s))
			}
		}},
		{"release version when the group has no AMI ID", func(d *smtypes.ClusterInstanceGroupDetails) {
			d.DesiredImageId, d.CurrentImageId = nil, nil
		}, 3, func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification) {
			if s.ImageId != nil || awssdk.ToString(s.ImageReleaseVersion) != "1.2.4" {
				t.Errorf("image %v release %v", s.ImageId, awssdk.ToString(s.ImageReleaseVersion))
			}
		}},
		{"instance type when the group has no requirements", func(d *smtypes.ClusterInstanceGroupDetails) {
			d.InstanceRequirements = nil
		}, 3, func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification) {
			if s.InstanceType != "ml.p5.48xlarge" || s.InstanceRequirements != nil {
				t.Errorf("type %q requirements %+v", s.InstanceType, s.InstanceRequirements)
			}
		}},
		{"minimum lowered when scaling below it", nil, 1, func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification) {
			if awssdk.ToInt32(s.MinInstanceCount) != 1 || awssdk.ToInt32(s.InstanceCount) != 1 {
				t.Errorf("min %d count %d", awssdk.ToInt32(s.MinInstanceCount), awssdk.ToInt32(s.InstanceCount))
			}
		}},
		{"no patching configuration without a strategy", func(d *smtypes.ClusterInstanceGroupDetails) {
			d.AutoPatchConfig.PatchingStrategy = ""
		}, 3, func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification) {
			if s.AutoPatchConfig != nil {
				t.Errorf("auto patch %+v", s.AutoPatchConfig)
			}
		}},
		{"a bare group stays bare", func(d *smtypes.ClusterInstanceGroupDetails) {
			*d = smtypes.ClusterInstanceGroupDetails{InstanceGroupName: d.InstanceGroupName, InstanceType: d.InstanceType,
				LifeCycleConfig: d.LifeCycleConfig, ExecutionRole: d.ExecutionRole}
		}, 0, func(t *testing.T, s smtypes.ClusterInstanceGroupSpecification) {
			want := smtypes.ClusterInstanceGroupSpecification{InstanceGroupName: awssdk.String("gpu"), InstanceType: "ml.p5.48xlarge",
				InstanceCount: awssdk.Int32(0), LifeCycleConfig: s.LifeCycleConfig, ExecutionRole: awssdk.String(testRoleARN)}
			if jsonOf(s) != jsonOf(want) {
				t.Errorf("spec %s, want %s", jsonOf(s), jsonOf(want))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := fullDetails()
			if tt.edit != nil {
				tt.edit(d)
			}
			tt.check(t, updateSpec(d, tt.count))
		})
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestScaleKeepsGroupConfiguration scales a group that carries labels, taints, an AMI, a minimum, an EBS
// volume, an overriding VPC and two threads per core: the fake replaces a group with what UpdateCluster sends,
// as AWS does, so anything the scale dropped would be gone afterwards.
func TestScaleKeepsGroupConfiguration(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	tg, err := f.clients.cluster(testCluster)
	must(t, err)
	tuned := smtypes.ClusterInstanceGroupSpecification{
		InstanceGroupName: awssdk.String("tuned"), InstanceType: "ml.m5.2xlarge", InstanceCount: awssdk.Int32(1),
		LifeCycleConfig: &smtypes.ClusterLifeCycleConfig{SourceS3Uri: awssdk.String(testS3), OnCreate: awssdk.String("on_create.sh")},
		ExecutionRole:   awssdk.String(testRoleARN), ThreadsPerCore: awssdk.Int32(2), MinInstanceCount: awssdk.Int32(1),
		ImageId: awssdk.String("ami-0123456789abcdef0"),
		KubernetesConfig: &smtypes.ClusterKubernetesConfig{Labels: map[string]string{"team": "ml"},
			Taints: []smtypes.ClusterKubernetesTaint{{Key: awssdk.String("gpu"), Value: awssdk.String("true"), Effect: smtypes.ClusterKubernetesTaintEffectNoSchedule}}},
		InstanceStorageConfigs: []smtypes.ClusterInstanceStorageConfig{&smtypes.ClusterInstanceStorageConfigMemberEbsVolumeConfig{
			Value: smtypes.ClusterEbsVolumeConfig{VolumeSizeInGB: awssdk.Int32(500)}}},
		OverrideVpcConfig:       &smtypes.VpcConfig{Subnets: []string{"subnet-0fedcba9"}, SecurityGroupIds: testSecurityGroups},
		OnStartDeepHealthChecks: []smtypes.DeepHealthCheckType{smtypes.DeepHealthCheckTypeInstanceStress},
		TrainingPlanArn:         awssdk.String("arn:aws:sagemaker:us-west-2:123456789012:training-plan/m5"),
		NetworkInterface:        &smtypes.ClusterNetworkInterface{InterfaceType: smtypes.ClusterInterfaceType("efa")},
	}
	_, err = tg.sm.UpdateCluster(ctxT(t), &sagemaker.UpdateClusterInput{ClusterName: awssdk.String("ml-hp"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{tuned}})
	must(t, err)
	describe := func() smtypes.ClusterInstanceGroupDetails {
		t.Helper()
		out, err := tg.sm.DescribeCluster(ctxT(t), &sagemaker.DescribeClusterInput{ClusterName: awssdk.String("ml-hp")})
		must(t, err)
		for _, g := range out.InstanceGroups {
			if awssdk.ToString(g.InstanceGroupName) == "tuned" && out.ClusterStatus == smtypes.ClusterStatusInservice {
				return g
			}
		}
		return smtypes.ClusterInstanceGroupDetails{}
	}
	var before smtypes.ClusterInstanceGroupDetails
	opstest.Eventually(t, 5*time.Second, "the tuned group InService", func() bool { before = describe(); return before.InstanceGroupName != nil })
	if awssdk.ToInt32(before.ThreadsPerCore) != 2 || before.KubernetesConfig == nil || before.OverrideVpcConfig == nil {
		t.Fatalf("the fake did not keep the group's configuration: %s", jsonOf(before))
	}

	rec, err := f.engine.Submit(ctxT(t), scaleRequest("scale-tuned", testCluster, "tuned", 3))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit: %v %+v", err, rec)
	}
	after := describe()
	if awssdk.ToInt32(after.TargetCount) != 3 || awssdk.ToInt32(after.CurrentCount) != 3 {
		t.Fatalf("after scaling: %s", jsonOf(after))
	}
	// Everything but the counts must be as it was.
	for _, d := range []*smtypes.ClusterInstanceGroupDetails{&before, &after} {
		d.CurrentCount, d.TargetCount, d.Status = nil, nil, ""
	}
	if jsonOf(before) != jsonOf(after) {
		t.Errorf("the scale changed the group's configuration:\nbefore %s\nafter  %s", jsonOf(before), jsonOf(after))
	}
}
