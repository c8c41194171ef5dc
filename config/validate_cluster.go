package config

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

var (
	awsRegion    = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	eksName      = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)
	hyperpodName = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	s3Prefix     = regexp.MustCompile(`^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$`)
	// EC2 resource IDs: the prefix, then 8 (older) or 17 lower-case hex digits.
	subnetID        = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	securityGroupID = regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

func (c *Config) validateClusters(l *problemList) {
	if len(c.Clusters) == 0 {
		l.add("clusters", "must register at least one cluster")
	}
	names := make([]string, len(c.Clusters))
	agents := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		agents[i] = a.Name
	}
	for i := range c.Clusters {
		names[i] = c.Clusters[i].Name
		c.Clusters[i].validate(l, indexPath("clusters", i), c.AWS.Roles, agents)
	}
	checkUnique(l, "clusters", "cluster name", names)
}

func (cl *Cluster) validate(l *problemList, at string, roles map[string]string, agents []string) {
	checkDNSLabel(l, at+".name", "a cluster name", cl.Name)
	if cl.Region != "" && !awsRegion.MatchString(cl.Region) {
		l.add(at+".region", "must be an AWS region such as us-west-2 (empty = the AWS SDK's default), got %q", cl.Region)
	}
	if !cl.Environment.known() {
		l.add(at+".environment", "must be %s, %s or %s, got %q", EnvProduction, EnvStaging, EnvDevelopment, cl.Environment)
	}
	if cl.EKS.ClusterName != "" && !eksName.MatchString(cl.EKS.ClusterName) {
		l.add(at+".eks.clusterName", "must be an EKS cluster name (letters, digits, '-', '_', at most 100), got %q", cl.EKS.ClusterName)
	}
	cl.validateNamespaces(l, at)
	cl.validateNamespaceEnvironments(l, at)
	for i, it := range cl.InstanceTypes {
		checkInstanceType(l, indexPath(at+".instanceTypes", i), it)
	}
	checkUnique(l, at+".instanceTypes", "instance type", cl.InstanceTypes)
	for i, img := range cl.Images {
		checkGlob(l, indexPath(at+".images", i), img)
	}
	cl.Limits.validate(l, at+".limits")
	cl.GPUNodes.validate(l, at+".gpuNodes")
	if cl.Kueue.Queue != "" {
		checkDNSSubdomain(l, at+".kueue.queue", "a Kueue LocalQueue name", cl.Kueue.Queue)
	}
	for _, name := range sortedKeys(cl.Profiles) {
		p := childPath(at+".profiles", name)
		checkDNSLabel(l, p, "a profile name", name)
		checkDNSSubdomain(l, p+".serviceAccount", "a service account name", cl.Profiles[name].ServiceAccount)
		for i, agent := range cl.Profiles[name].Agents {
			if !slices.Contains(agents, agent) {
				l.add(indexPath(p+".agents", i), "must name an agent of agents[] (%s), got %q", quoteList(agents), agent)
			}
		}
	}
	checkLabels(l, at+".requiredLabels", cl.RequiredLabels)
	for i, sc := range cl.StorageClasses {
		checkDNSSubdomain(l, indexPath(at+".storageClasses", i), "a storage class name", sc)
	}
	cl.validateHyperPod(l, at+".hyperpod", roles)
	cl.validateVerify(l, at+".verify")
	if cl.RequestTimeout < Duration(time.Second) {
		l.add(at+".requestTimeout", "must be at least 1s (0 means the default %s), got %s", time.Duration(DefaultRequestTimeout), time.Duration(cl.RequestTimeout))
	}
}

// validateNamespaceEnvironments refuses an environment for a namespace the cluster does not allow (a misspelt name
// would leave the namespace meant with the cluster's environment, silently) and an environment that does not exist.
func (cl *Cluster) validateNamespaceEnvironments(l *problemList, at string) {
	for _, ns := range sortedKeys(cl.NamespaceEnvironments) {
		p := childPath(at+".namespaceEnvironments", ns)
		if len(cl.Namespaces) > 0 && !slices.Contains(cl.Namespaces, ns) {
			l.add(p, "must name one of the cluster's namespaces (%s), got %q: add it to %s.namespaces, or remove it here",
				quoteList(cl.Namespaces), ns, at)
		}
		if env := cl.NamespaceEnvironments[ns]; !env.known() {
			l.add(p, "must be %s, %s or %s, got %q; leave %s out to give it the cluster's environment (%s)",
				EnvProduction, EnvStaging, EnvDevelopment, env, ns, cl.Environment)
		}
	}
}

// known reports whether e is one of the environments.
func (e Environment) known() bool {
	return e == EnvProduction || e == EnvStaging || e == EnvDevelopment
}

// validateVerify checks only an image set explicitly: the default may be disallowed by Images, which makes
// verify-cluster refuse but leaves the rest of the cluster usable.
func (cl *Cluster) validateVerify(l *problemList, at string) {
	img := cl.Verify.Image
	if img == "" || cl.AllowsImage(img) {
		return
	}
	allowed := "none are configured, so no image is allowed"
	if len(cl.Images) > 0 {
		allowed = quoteList(cl.Images)
	}
	l.add(at+".image", "must match one of the cluster's images globs (%s), got %q", allowed, img)
}

func (cl *Cluster) validateNamespaces(l *problemList, at string) {
	if len(cl.Namespaces) == 0 {
		l.add(at+".namespaces", "must list at least one namespace operations may touch")
	}
	for i, ns := range cl.Namespaces {
		checkDNSLabel(l, indexPath(at+".namespaces", i), "a namespace", ns)
	}
	checkUnique(l, at+".namespaces", "namespace", cl.Namespaces)
	if cl.DefaultNamespace == "" {
		return // no namespaces: already reported
	}
	checkDNSLabel(l, at+".defaultNamespace", "the default namespace", cl.DefaultNamespace)
	if len(cl.Namespaces) > 0 && !slices.Contains(cl.Namespaces, cl.DefaultNamespace) {
		l.add(at+".defaultNamespace", "must be one of the cluster's namespaces (%s), got %q",
			quoteList(cl.Namespaces), cl.DefaultNamespace)
	}
}

// maxLimit caps every limit: counts end in int32 fields of Kubernetes and AWS.
const maxLimit = math.MaxInt32

func (lim Limits) validate(l *problemList, at string) {
	for _, f := range []struct {
		key   string
		value int
	}{
		{"maxNodesPerGroup", lim.MaxNodesPerGroup},
		{"maxTrainingReplicas", lim.MaxTrainingReplicas},
		{"maxGPUsPerJob", lim.MaxGPUsPerJob},
		{"maxTrainingHours", lim.MaxTrainingHours},
		{"maxInferenceReplicas", lim.MaxInferenceReplicas},
	} {
		switch {
		case f.value < 0:
			l.add(at+"."+f.key, "a limit must be ≥ 0 (0 forbids what it caps), got %d", f.value)
		case f.value > maxLimit:
			l.add(at+"."+f.key, "a limit must be ≤ %d, the largest count Kubernetes and AWS take, got %d", maxLimit, f.value)
		}
	}
}

func (g *GPUNodes) validate(l *problemList, at string) {
	checkLabels(l, at+".nodeSelector", g.NodeSelector)
	for i, t := range g.Tolerations {
		t.validate(l, indexPath(at+".tolerations", i))
	}
	if g.GPUsPerNode < 0 {
		l.add(at+".gpusPerNode", "must be ≥ 0 (0 = read from the nodes), got %d", g.GPUsPerNode)
	}
}

func (t Toleration) validate(l *problemList, at string) {
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			l.add(at+".key", "may be empty only with operator Exists")
		}
		if errs := content.IsLabelValue(t.Value); len(errs) > 0 {
			l.add(at+".value", "must be a valid label value, got %q: %s", t.Value, strings.Join(errs, "; "))
		}
	case "Exists":
		if t.Value != "" {
			l.add(at+".value", "must be empty with operator Exists, got %q", t.Value)
		}
	default:
		l.add(at+".operator", "must be Equal or Exists, got %q", t.Operator)
	}
	if t.Key != "" {
		if errs := content.IsLabelKey(t.Key); len(errs) > 0 {
			l.add(at+".key", "must be a valid label key, got %q: %s", t.Key, strings.Join(errs, "; "))
		}
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		l.add(at+".effect", "must be NoSchedule, PreferNoSchedule, NoExecute or empty (all), got %q", t.Effect)
	}
}

func checkLabels(l *problemList, at string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		p := childPath(at, k)
		if errs := content.IsLabelKey(k); len(errs) > 0 {
			l.add(p, "must be a valid label key, got %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := content.IsLabelValue(labels[k]); len(errs) > 0 {
			l.add(p, "must have a valid label value, got %q: %s", labels[k], strings.Join(errs, "; "))
		}
	}
}

func (cl *Cluster) validateHyperPod(l *problemList, at string, roles map[string]string) {
	hp := cl.HyperPod
	if hp.ClusterName != "" && !hyperpodName.MatchString(hp.ClusterName) {
		l.add(at+".clusterName", "must be a HyperPod cluster name (letters, digits and '-', at most 63), got %q", hp.ClusterName)
	}
	if len(hp.Templates) > 0 && hp.ClusterName == "" {
		l.add(at+".clusterName", "must be set when templates are registered: it names the cluster bootstrap creates")
	}
	for _, name := range sortedKeys(hp.Templates) {
		p := childPath(at+".templates", name)
		checkDNSLabel(l, p, "a template name", name)
		cl.validateTemplate(l, p, hp.Templates[name], roles)
	}
}

func (cl *Cluster) validateTemplate(l *problemList, at string, t Template, roles map[string]string) {
	if len(t.InstanceGroups) == 0 {
		l.add(at+".instanceGroups", "must list at least one instance group")
	}
	names := make([]string, len(t.InstanceGroups))
	for i, g := range t.InstanceGroups {
		names[i] = g.Name
		cl.validateInstanceGroup(l, indexPath(at+".instanceGroups", i), g)
	}
	checkUnique(l, at+".instanceGroups", "instance group name", names)
	if !s3Prefix.MatchString(t.LifecycleScript) {
		l.add(at+".lifecycleScript", "must be an S3 prefix such as \"s3://bucket/prefix/\", got %q", t.LifecycleScript)
	}
	if strings.TrimSpace(t.OnCreate) == "" || strings.HasPrefix(t.OnCreate, "/") {
		l.add(at+".onCreate", "must name a script under lifecycleScript such as %q, got %q", DefaultOnCreate, t.OnCreate)
	}
	switch _, ok := roles[t.ExecutionRole]; {
	case t.ExecutionRole == "":
		l.add(at+".executionRole", "must name a role in aws.roles")
	case !ok:
		l.add(at+".executionRole", "must name a role in aws.roles (%s), got %q", roleNames(roles), t.ExecutionRole)
	}
	t.VPC.validate(l, at+".vpc")
}

// SageMaker's VpcConfig limits: 1 to 16 subnets, 1 to 5 security groups.
const (
	maxVPCSubnets        = 16
	maxVPCSecurityGroups = 5
)

func (v VPC) validate(l *problemList, at string) {
	for _, f := range []struct {
		key, what, example string
		ids                []string
		max                int
		re                 *regexp.Regexp
	}{
		{"subnets", "subnet ID", "subnet-0123456789abcdef0", v.Subnets, maxVPCSubnets, subnetID},
		{"securityGroups", "security group ID", "sg-0123456789abcdef0", v.SecurityGroups, maxVPCSecurityGroups, securityGroupID},
	} {
		p := at + "." + f.key
		switch {
		case len(f.ids) == 0:
			l.add(p, "must list 1 to %d %ss (such as %s): an EKS-orchestrated HyperPod cluster needs a VPC", f.max, f.what, f.example)
		case len(f.ids) > f.max:
			l.add(p, "must list at most %d %ss (SageMaker's limit), got %d", f.max, f.what, len(f.ids))
		}
		for i, id := range f.ids {
			if !f.re.MatchString(id) {
				l.add(indexPath(p, i), "must be a %s such as %s, got %q", f.what, f.example, id)
			}
		}
		checkUnique(l, p, f.what, f.ids)
	}
}

func (cl *Cluster) validateInstanceGroup(l *problemList, at string, g InstanceGroup) {
	if !hyperpodName.MatchString(g.Name) {
		l.add(at+".name", "must be an instance group name (letters, digits and '-', at most 63), got %q", g.Name)
	}
	checkInstanceType(l, at+".instanceType", g.InstanceType)
	if g.InstanceType != "" && !cl.AllowsInstanceType(g.InstanceType) {
		l.add(at+".instanceType", "must be one of the cluster's instanceTypes (%s), got %q", quoteList(cl.InstanceTypes), g.InstanceType)
	}
	switch {
	case g.InstanceCount < 0:
		l.add(at+".instanceCount", "must be ≥ 0, got %d", g.InstanceCount)
	case g.InstanceCount > cl.Limits.MaxNodesPerGroup:
		l.add(at+".instanceCount", "must be ≤ limits.maxNodesPerGroup (%d), got %d", cl.Limits.MaxNodesPerGroup, g.InstanceCount)
	}
	if g.ThreadsPerCore != 0 && g.ThreadsPerCore != 1 && g.ThreadsPerCore != 2 {
		l.add(at+".threadsPerCore", "must be 1 or 2 (or omitted for the instance type's default), got %d", g.ThreadsPerCore)
	}
	if g.VolumeSizeGB < 0 || g.VolumeSizeGB > 16384 {
		l.add(at+".volumeSizeGB", "must be from 0 (none) to 16384, got %d", g.VolumeSizeGB)
	}
}

func roleNames(roles map[string]string) string {
	if len(roles) == 0 {
		return "none defined"
	}
	return fmt.Sprintf("defined: %s", quoteList(sortedKeys(roles)))
}
