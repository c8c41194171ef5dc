package fakeaws

import (
	"encoding/json"
	"maps"
	"slices"
)

// smGroupExtras are instance group fields the fake keeps as they were last sent and describes back unchanged,
// without acting on them. DescribeCluster spells them as CreateCluster and UpdateCluster do.
type smGroupExtras struct {
	InstanceStorageConfigs  json.RawMessage `json:",omitempty"`
	OnStartDeepHealthChecks []string        `json:",omitempty"`
	OverrideVpcConfig       *smVpcConfig    `json:",omitempty"`
	TrainingPlanArn         *string         `json:",omitempty"`
	ScheduledUpdateConfig   json.RawMessage `json:",omitempty"`
	CapacityRequirements    json.RawMessage `json:",omitempty"`
	NetworkInterface        json.RawMessage `json:",omitempty"`
	SlurmConfig             json.RawMessage `json:",omitempty"`
}

func (e smGroupExtras) clone() smGroupExtras {
	e.InstanceStorageConfigs = slices.Clone(e.InstanceStorageConfigs)
	e.OnStartDeepHealthChecks = slices.Clone(e.OnStartDeepHealthChecks)
	e.OverrideVpcConfig = e.OverrideVpcConfig.clone()
	e.ScheduledUpdateConfig = slices.Clone(e.ScheduledUpdateConfig)
	e.CapacityRequirements = slices.Clone(e.CapacityRequirements)
	e.NetworkInterface = slices.Clone(e.NetworkInterface)
	e.SlurmConfig = slices.Clone(e.SlurmConfig)
	return e
}

// smKubernetesConfig is an instance group's KubernetesConfig as CreateCluster and UpdateCluster take it.
type smKubernetesConfig struct {
	Labels map[string]string `json:",omitempty"`
	Taints json.RawMessage   `json:",omitempty"`
}

// smKubernetesConfigDetails is how DescribeCluster reports it: the fake applies labels and taints at once, so
// current and desired are the same.
type smKubernetesConfigDetails struct {
	CurrentLabels map[string]string `json:",omitempty"`
	DesiredLabels map[string]string `json:",omitempty"`
	CurrentTaints json.RawMessage   `json:",omitempty"`
	DesiredTaints json.RawMessage   `json:",omitempty"`
}

// groupConfig is what an instance group was last given beyond name, type, count, lifecycle, role and threads.
type groupConfig struct {
	extras       smGroupExtras
	kubernetes   *smKubernetesConfig
	imageID      *string
	imageRelease *string
	minCount     *int
}

func configFromSpec(spec smGroupSpec) groupConfig {
	gc := groupConfig{extras: spec.smGroupExtras.clone(), imageID: spec.ImageId, imageRelease: spec.ImageReleaseVersion,
		minCount: spec.MinInstanceCount}
	if k := spec.KubernetesConfig; k != nil {
		gc.kubernetes = &smKubernetesConfig{Labels: maps.Clone(k.Labels), Taints: slices.Clone(k.Taints)}
	}
	return gc
}

// describe fills the DescribeCluster fields of the group's configuration.
func (gc groupConfig) describe(d *smGroupDetails) {
	d.smGroupExtras = gc.extras.clone()
	if k := gc.kubernetes; k != nil {
		d.KubernetesConfig = &smKubernetesConfigDetails{
			CurrentLabels: maps.Clone(k.Labels), DesiredLabels: maps.Clone(k.Labels),
			CurrentTaints: slices.Clone(k.Taints), DesiredTaints: slices.Clone(k.Taints),
		}
	}
	d.CurrentImageId, d.DesiredImageId = gc.imageID, gc.imageID
	d.CurrentImageReleaseVersion, d.DesiredImageReleaseVersion = gc.imageRelease, gc.imageRelease
	d.MinCount = gc.minCount
}
