package aws

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// updateSpec is the instance group as DescribeCluster returned it, with only the count changed: UpdateCluster
// replaces a group with what it is sent, so every field ClusterInstanceGroupDetails and
// ClusterInstanceGroupSpecification share goes back, and where DescribeCluster reports a current and a desired
// value (image, labels and taints, instance types, patch schedule) the desired one goes back, so an update
// AWS is still rolling out is neither undone nor restarted.
func updateSpec(d *smtypes.ClusterInstanceGroupDetails, count int) smtypes.ClusterInstanceGroupSpecification {
	spec := smtypes.ClusterInstanceGroupSpecification{
		InstanceGroupName:       d.InstanceGroupName,
		InstanceType:            d.InstanceType,
		InstanceCount:           awssdk.Int32(int32(count)),
		LifeCycleConfig:         d.LifeCycleConfig,
		ExecutionRole:           d.ExecutionRole,
		ThreadsPerCore:          d.ThreadsPerCore,
		InstanceStorageConfigs:  d.InstanceStorageConfigs,
		OnStartDeepHealthChecks: d.OnStartDeepHealthChecks,
		OverrideVpcConfig:       d.OverrideVpcConfig,
		TrainingPlanArn:         d.TrainingPlanArn,
		ScheduledUpdateConfig:   d.ScheduledUpdateConfig,
		CapacityRequirements:    d.CapacityRequirements,
		MinInstanceCount:        minInstanceCount(d.MinCount, count),
		KubernetesConfig:        kubernetesConfig(d.KubernetesConfig),
		InstanceRequirements:    instanceRequirements(d.InstanceRequirements),
		AutoPatchConfig:         autoPatchConfig(d.AutoPatchConfig),
	}
	spec.ImageId = desired(d.DesiredImageId, d.CurrentImageId)
	if spec.ImageId == nil {
		// An AMI ID already pins the release; a release version goes back only for groups described without one.
		spec.ImageReleaseVersion = desired(d.DesiredImageReleaseVersion, d.CurrentImageReleaseVersion)
	}
	if spec.InstanceRequirements != nil {
		spec.InstanceType = "" // the two are mutually exclusive; a flexible group is described by its requirements
	}
	if n := d.NetworkInterface; n != nil {
		spec.NetworkInterface = &smtypes.ClusterNetworkInterface{InterfaceType: n.InterfaceType}
	}
	if sl := d.SlurmConfig; sl != nil {
		spec.SlurmConfig = &smtypes.ClusterSlurmConfig{NodeType: sl.NodeType, PartitionNames: sl.PartitionNames}
	}
	return spec
}

// desired is the desired value when DescribeCluster reports one, else the current one.
func desired[T any](want, now *T) *T {
	if want != nil {
		return want
	}
	return now
}

// minInstanceCount carries MinCount over, lowered to the new count when scaling below it: the minimum only
// gates a group's first transition to InService, which is behind it, and AWS refuses a minimum above the count.
func minInstanceCount(minCount *int32, count int) *int32 {
	if minCount == nil {
		return nil
	}
	return awssdk.Int32(min(*minCount, int32(count)))
}

func kubernetesConfig(k *smtypes.ClusterKubernetesConfigDetails) *smtypes.ClusterKubernetesConfig {
	if k == nil {
		return nil
	}
	labels, taints := k.DesiredLabels, k.DesiredTaints
	if labels == nil {
		labels = k.CurrentLabels
	}
	if taints == nil {
		taints = k.CurrentTaints
	}
	if labels == nil && taints == nil {
		return nil
	}
	return &smtypes.ClusterKubernetesConfig{Labels: maps.Clone(labels), Taints: slices.Clone(taints)}
}

func instanceRequirements(r *smtypes.ClusterInstanceRequirementDetails) *smtypes.ClusterInstanceRequirements {
	if r == nil {
		return nil
	}
	types := r.DesiredInstanceTypes
	if len(types) == 0 {
		types = r.CurrentInstanceTypes
	}
	if len(types) == 0 {
		return nil
	}
	return &smtypes.ClusterInstanceRequirements{InstanceTypes: slices.Clone(types)}
}

func autoPatchConfig(a *smtypes.ClusterAutoPatchConfigDetails) *smtypes.ClusterAutoPatchConfig {
	if a == nil || a.PatchingStrategy == "" {
		return nil // PatchingStrategy is required in a spec: without it there is no configuration to keep
	}
	out := &smtypes.ClusterAutoPatchConfig{
		PatchingStrategy: a.PatchingStrategy, DeploymentConfig: a.DeploymentConfig, DrainPolicy: a.DrainPolicy,
		IdleWaitWindowInSeconds: a.IdleWaitWindowInSeconds,
	}
	if s := desired(a.DesiredPatchSchedule, a.CurrentPatchSchedule); s != nil {
		out.PatchSchedule = &smtypes.ClusterPatchSchedule{NextPatchDate: s.NextPatchDate}
	}
	return out
}

// groupSpec is an UpdateCluster instance group as a plan carries it (Plan.Actions). The SDK's storage configs are a
// union (an interface), which encoding/json cannot decode, so they travel as tagged members.
type groupSpec struct {
	smtypes.ClusterInstanceGroupSpecification
}

type groupSpecJSON struct {
	Spec    smtypes.ClusterInstanceGroupSpecification `json:"spec"`
	Storage []storageJSON                             `json:"storage,omitempty"`
}

type storageJSON struct {
	EBS        *smtypes.ClusterEbsVolumeConfig  `json:"ebs,omitempty"`
	FsxLustre  *smtypes.ClusterFsxLustreConfig  `json:"fsxLustre,omitempty"`
	FsxOpenZfs *smtypes.ClusterFsxOpenZfsConfig `json:"fsxOpenZfs,omitempty"`
}

func (g groupSpec) MarshalJSON() ([]byte, error) {
	out := groupSpecJSON{Spec: g.ClusterInstanceGroupSpecification}
	out.Spec.InstanceStorageConfigs = nil
	for _, c := range g.InstanceStorageConfigs {
		switch m := c.(type) {
		case *smtypes.ClusterInstanceStorageConfigMemberEbsVolumeConfig:
			out.Storage = append(out.Storage, storageJSON{EBS: &m.Value})
		case *smtypes.ClusterInstanceStorageConfigMemberFsxLustreConfig:
			out.Storage = append(out.Storage, storageJSON{FsxLustre: &m.Value})
		case *smtypes.ClusterInstanceStorageConfigMemberFsxOpenZfsConfig:
			out.Storage = append(out.Storage, storageJSON{FsxOpenZfs: &m.Value})
		default:
			return nil, fmt.Errorf("instance group %s: storage config %T is not known to HyperOps", awssdk.ToString(g.InstanceGroupName), c)
		}
	}
	return json.Marshal(out)
}

func (g *groupSpec) UnmarshalJSON(b []byte) error {
	var in groupSpecJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	g.ClusterInstanceGroupSpecification = in.Spec
	for i, s := range in.Storage {
		switch {
		case s.EBS != nil:
			g.InstanceStorageConfigs = append(g.InstanceStorageConfigs, &smtypes.ClusterInstanceStorageConfigMemberEbsVolumeConfig{Value: *s.EBS})
		case s.FsxLustre != nil:
			g.InstanceStorageConfigs = append(g.InstanceStorageConfigs, &smtypes.ClusterInstanceStorageConfigMemberFsxLustreConfig{Value: *s.FsxLustre})
		case s.FsxOpenZfs != nil:
			g.InstanceStorageConfigs = append(g.InstanceStorageConfigs, &smtypes.ClusterInstanceStorageConfigMemberFsxOpenZfsConfig{Value: *s.FsxOpenZfs})
		default:
			return fmt.Errorf("storage config %d names no member", i)
		}
	}
	return nil
}
