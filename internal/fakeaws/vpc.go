package fakeaws

import (
	"fmt"
	"regexp"
	"strings"
)

// Constraints on VpcConfig from the SageMaker API model: 1 to 16 subnets and 1 to 5 security groups, each ID at
// most 32 characters of [-0-9a-zA-Z].
const (
	maxVpcSubnets        = 16
	maxVpcSecurityGroups = 5
	maxVpcIDLength       = 32
)

var (
	vpcIDRE = regexp.MustCompile(`^[-0-9a-zA-Z]+$`)
	// SageMaker looks the IDs up in EC2, whose IDs are the prefix and 8 or 17 lower-case hex digits.
	subnetIDRE        = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	securityGroupIDRE = regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

// smVpcConfig is SageMaker's VpcConfig: CreateCluster's, and an instance group's OverrideVpcConfig.
type smVpcConfig struct {
	SecurityGroupIds []string
	Subnets          []string
}

// vpcConfig checks c against the API model's constraints, reporting at path (e.g. "vpcConfig").
func (v *violations) vpcConfig(path string, c *smVpcConfig) {
	for _, f := range []struct {
		key  string
		ids  []string
		most int
	}{
		{"securityGroupIds", c.SecurityGroupIds, maxVpcSecurityGroups},
		{"subnets", c.Subnets, maxVpcSubnets},
	} {
		p := path + "." + f.key
		if !v.required(p, f.ids != nil) {
			continue
		}
		v.listLength(p, f.ids, 1, f.most)
		for i, id := range f.ids {
			member := fmt.Sprintf("%s.%d.member", p, i+1)
			v.length(member, id, 0, maxVpcIDLength)
			v.pattern(member, id, vpcIDRE)
		}
	}
}

// listLength reports a list with fewer than minLen or more than maxLen members, one message per bound as AWS's
// validation words them.
func (v *violations) listLength(path string, items []string, minLen, maxLen int) {
	value := "[" + strings.Join(items, ", ") + "]"
	if len(items) < minLen {
		v.add("Value '%s' at '%s' failed to satisfy constraint: Member must have length greater than or equal to %d",
			value, path, minLen)
	}
	if len(items) > maxLen {
		v.add("Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to %d",
			value, path, maxLen)
	}
}

// checkVpcIDs refuses IDs that pass the model's pattern but cannot name a subnet or security group, which
// SageMaker finds when it resolves them in EC2.
func checkVpcIDs(field string, c *smVpcConfig) *apiError {
	for _, id := range c.Subnets {
		if !subnetIDRE.MatchString(id) {
			return validationError("%s: invalid subnet ID '%s'; a subnet ID looks like subnet-0123456789abcdef0.", field, id)
		}
	}
	for _, id := range c.SecurityGroupIds {
		if !securityGroupIDRE.MatchString(id) {
			return validationError("%s: invalid security group ID '%s'; a security group ID looks like sg-0123456789abcdef0.",
				field, id)
		}
	}
	return nil
}

func (c *smVpcConfig) clone() *smVpcConfig {
	if c == nil {
		return nil
	}
	return &smVpcConfig{SecurityGroupIds: append([]string(nil), c.SecurityGroupIds...), Subnets: append([]string(nil), c.Subnets...)}
}

// VPC is a HyperPod cluster's VpcConfig (or an instance group's OverrideVpcConfig).
type VPC struct {
	Subnets          []string
	SecurityGroupIDs []string
}

func (c *smVpcConfig) snapshot() *VPC {
	if c == nil {
		return nil
	}
	return &VPC{Subnets: append([]string(nil), c.Subnets...), SecurityGroupIDs: append([]string(nil), c.SecurityGroupIds...)}
}

func (v *VPC) wire() *smVpcConfig {
	if v == nil {
		return nil
	}
	return &smVpcConfig{SecurityGroupIds: append([]string(nil), v.SecurityGroupIDs...), Subnets: append([]string(nil), v.Subnets...)}
}
