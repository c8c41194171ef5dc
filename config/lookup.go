package config

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Cluster returns the registered cluster called name.
func (c *Config) Cluster(name string) (*Cluster, bool) {
	for i := range c.Clusters {
		if c.Clusters[i].Name == name {
			return &c.Clusters[i], true
		}
	}
	return nil, false
}

// DefaultCluster returns the first registered cluster, used when a request names none; nil when there is none.
func (c *Config) DefaultCluster() *Cluster {
	if len(c.Clusters) == 0 {
		return nil
	}
	return &c.Clusters[0]
}

// Agent returns the agent whose requests carry the initiator id: its Slack user or bot ID, or "agent:<name>" for
// an agent without one (Agent.InitiatorID), so DM and MCP requests find the same agent.
func (c *Config) Agent(initiatorID string) (*Agent, bool) {
	for i := range c.Agents {
		if c.Agents[i].InitiatorID() == initiatorID {
			return &c.Agents[i], true
		}
	}
	return nil, false
}

// Allows reports whether the agent may request operation: some pattern of its Operations matches it (path.Match).
func (a *Agent) Allows(operation string) bool {
	return matchAny(a.Operations, operation)
}

// IsZero reports a scope that narrows nothing.
func (s AgentScope) IsZero() bool {
	return len(s.Clusters) == 0 && len(s.Namespaces) == 0 && (s.MaxRisk == "" || s.MaxRisk == RiskCritical) && !s.ReadOnly
}

// Risk is the highest risk the scope allows: MaxRisk, or critical when it is empty.
func (s AgentScope) Risk() string {
	if s.MaxRisk == "" {
		return RiskCritical
	}
	return s.MaxRisk
}

// String says the scope in one line, as validate-config's summary shows it: "read-only" or "may change", the
// clusters and namespaces ("all" when not narrowed), and the highest risk.
func (s AgentScope) String() string {
	access := "may change"
	if s.ReadOnly {
		access = "read-only"
	}
	all := func(names []string) string {
		if len(names) == 0 {
			return "all"
		}
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s; clusters: %s; namespaces: %s; max risk: %s", access, all(s.Clusters), all(s.Namespaces), s.Risk())
}

// AllowsCluster reports whether the scope lets the agent target cluster.
func (s AgentScope) AllowsCluster(cluster string) bool {
	return len(s.Clusters) == 0 || slices.Contains(s.Clusters, cluster)
}

// AllowsNamespace reports whether the scope lets the agent target namespace.
func (s AgentScope) AllowsNamespace(namespace string) bool {
	return len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, namespace)
}

// AllowsNamespace reports whether ns is one of the cluster's namespaces.
func (cl *Cluster) AllowsNamespace(ns string) bool {
	return ns != "" && slices.Contains(cl.Namespaces, ns)
}

// AllowsImage reports whether image matches one of the cluster's image globs (path.Match: '*' stops at '/').
// No globs means no image is allowed.
func (cl *Cluster) AllowsImage(image string) bool {
	return image != "" && matchAny(cl.Images, image)
}

// VerifyImage returns the image of the smoke-test Job: Verify.Image, or DefaultVerifyImage when that is empty.
// It is not checked against Images here; verify-cluster checks it like any other image.
func (cl *Cluster) VerifyImage() string {
	if cl.Verify.Image != "" {
		return cl.Verify.Image
	}
	return DefaultVerifyImage
}

// AllowsInstanceType reports whether instanceType is one of the cluster's instance types.
func (cl *Cluster) AllowsInstanceType(instanceType string) bool {
	return instanceType != "" && slices.Contains(cl.InstanceTypes, instanceType)
}

// AllowsStorageClass reports whether create-storage may use storageClass; no StorageClasses means any.
func (cl *Cluster) AllowsStorageClass(storageClass string) bool {
	return len(cl.StorageClasses) == 0 || slices.Contains(cl.StorageClasses, storageClass)
}

// Profile returns the execution profile registered under name.
func (cl *Cluster) Profile(name string) (Profile, bool) {
	p, ok := cl.Profiles[name]
	return p, ok
}

// AllowsHumans reports whether people may use the profile (Humans, default true).
func (p Profile) AllowsHumans() bool { return p.Humans == nil || *p.Humans }

// AllowsAgent reports whether the agent called agent may use the profile registered as name: one of its Agents,
// or any agent for the profile named default when it lists none.
func (p Profile) AllowsAgent(name, agent string) bool {
	if len(p.Agents) == 0 {
		return name == DefaultProfile
	}
	return slices.Contains(p.Agents, agent)
}

// Template returns the HyperPod template registered under name.
func (cl *Cluster) Template(name string) (Template, bool) {
	t, ok := cl.HyperPod.Templates[name]
	return t, ok
}

// IsProduction reports whether the cluster's environment raises risk.
func (cl *Cluster) IsProduction() bool { return cl.Environment == EnvProduction }

// EnvironmentOf is the environment of namespace on the cluster: its entry in NamespaceEnvironments, else the
// cluster's Environment. The empty namespace is the cluster as a whole.
func (cl *Cluster) EnvironmentOf(namespace string) Environment {
	if env, ok := cl.NamespaceEnvironments[namespace]; ok && namespace != "" {
		return env
	}
	return cl.Environment
}

// RoleARN returns the ARN of the role registered under name in aws.roles.
func (c *Config) RoleARN(name string) (string, bool) {
	arn, ok := c.AWS.Roles[name]
	return arn, ok && name != ""
}

// Matches reports whether the rule applies to a request; an empty matcher list matches anything. Operation and
// profile patterns are globs (path.Match); initiator is InitiatorHuman or InitiatorAgent; profile is the request's
// execution profile (DefaultProfile when it names none).
func (r *ApprovalRule) Matches(risk, operation, cluster, namespace, initiator, profile string) bool {
	return (len(r.Profile) == 0 || matchAny(r.Profile, profile)) &&
		(len(r.Risk) == 0 || slices.Contains(r.Risk, risk)) &&
		(len(r.Operation) == 0 || matchAny(r.Operation, operation)) &&
		(len(r.Cluster) == 0 || slices.Contains(r.Cluster, cluster)) &&
		(len(r.Namespace) == 0 || slices.Contains(r.Namespace, namespace)) &&
		(r.Initiator == "" || r.Initiator == initiator)
}

// matchAny reports whether some glob in patterns matches name. Patterns are validated on load, so a malformed one
// (possible only in a Config built in code) simply does not match.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}
