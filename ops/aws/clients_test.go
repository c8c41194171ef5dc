package aws

import (
	"testing"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
)

// New takes credentials and the region from the SDK's default chain (here the environment, as IRSA's web
// identity would in a pod) and sends each service to its endpoint override.
func TestNewUsesDefaultChainAndEndpointOverrides(t *testing.T) {
	srv := fakeaws.New(fakeaws.Options{Region: "eu-west-1", SecretKeys: map[string]string{"AKIDENV": "env-secret"}})
	t.Cleanup(srv.Close)
	must(t, srv.AddEKSCluster(fakeaws.EKSCluster{Name: "ml-eks"}))
	must(t, srv.AddNodegroup(fakeaws.Nodegroup{Cluster: "ml-eks", Name: "cpu", InstanceTypes: []string{"g5.12xlarge"},
		MinSize: 0, MaxSize: 2, DesiredSize: 1}))
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_REGION": "eu-west-1",
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_PROFILE": "", "AWS_SESSION_TOKEN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
	} {
		t.Setenv(k, v)
	}
	cfg := testConfig(srv.URL())
	cfg.Clusters = cfg.Clusters[:1]
	cfg.Clusters[0].Region = "" // the default chain's region
	cfg.Clusters[0].HyperPod.ClusterName = ""
	c, err := New(ctxT(t), cfg)
	must(t, err)
	got, err := c.Capacity(ctxT(t), "", nil, nil) // no cluster named: the first registered one
	must(t, err)
	if got.Region != "eu-west-1" || got.EKS == nil || len(got.EKS.Nodegroups) != 1 || got.EKS.Nodegroups[0].Target != 1 {
		t.Errorf("capacity %+v", got)
	}

	cfg.AWS.Endpoints.EKS = "http://127.0.0.1:1" // nothing listens there: the override is really used
	c, err = New(ctxT(t), cfg)
	must(t, err)
	_, err = c.Capacity(ctxT(t), testCluster, nil, nil)
	if codeOf(err) != ops.CodeAWSError {
		t.Errorf("with a dead EKS endpoint: %v", err)
	}
}
