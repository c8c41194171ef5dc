package aws

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
)

func bootstrapRequest(id string, params ops.Params) ops.Request {
	return ops.Request{ID: id, Operation: OpBootstrapCluster, Target: ops.Target{Cluster: testDevCluster},
		Params: params, Initiator: human("U0ALICE")}
}

func TestBootstrapCreatesHyperPodOnEKS(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	rec, err := f.engine.Submit(ctxT(t), bootstrapRequest("boot-1", ops.Params{"template": "gpu-small"}))
	if err != nil || rec.Phase != ops.PhaseSucceeded {
		t.Fatalf("Submit: %v %+v", err, rec)
	}
	hp, ok := f.srv.HyperPodCluster("dev-hp")
	if !ok || hp.Status != fakeaws.StatusInService {
		t.Fatalf("dev-hp: %+v", hp)
	}
	if hp.EKSClusterARN != eksARN(t, f.srv, "dev-eks") {
		t.Errorf("orchestrator %q", hp.EKSClusterARN)
	}
	if hp.VPC == nil || !slices.Equal(hp.VPC.Subnets, testSubnets) || !slices.Equal(hp.VPC.SecurityGroupIDs, testSecurityGroups) {
		t.Errorf("VpcConfig %+v, want the template's subnets %v and security groups %v", hp.VPC, testSubnets, testSecurityGroups)
	}
	want := map[string]struct {
		typ   string
		count int
	}{"controller": {"ml.m5.2xlarge", 1}, "workers": {"ml.g5.12xlarge", 2}}
	for _, g := range hp.InstanceGroups {
		w := want[g.Name]
		if g.Type != w.typ || g.Count != w.count || g.CurrentCount != w.count || g.ExecutionRole != testRoleARN ||
			g.LifecycleS3URI != testS3 || g.OnCreate != "on_create.sh" {
			t.Errorf("group %+v, want %+v with the role from aws.roles", g, w)
		}
	}
	if len(hp.InstanceGroups) != 2 {
		t.Errorf("groups %+v", hp.InstanceGroups)
	}

	p := rec.Plan
	// 1 × 0.461 (ml.m5.2xlarge) + 2 × 7.09 (ml.g5.12xlarge) = 14.641 $/h.
	if !near(p.Cost.HourlyDelta, 14.641) || !near(p.Cost.MonthlyDelta, 14.641*720) || len(p.Cost.Lines) != 2 {
		t.Errorf("cost %+v", p.Cost)
	}
	if p.Cost.Lines[0].Item != "controller: ml.m5.2xlarge × +1" || p.Cost.Lines[1].Item != "workers: ml.g5.12xlarge × +2" {
		t.Errorf("cost lines %+v", p.Cost.Lines)
	}
	if p.Risk.Level != ops.RiskHigh || !hasReason(p.Risk, "bootstrap-cluster is high risk") {
		t.Errorf("risk %+v", p.Risk)
	}
	kinds := map[string]int{}
	for _, c := range p.Changes {
		if c.Action != ops.ActionCreate {
			t.Errorf("change %+v", c)
		}
		kinds[c.Kind]++
	}
	if kinds[KindHyperPodCluster] != 1 || kinds[KindHyperPodGroup] != 2 {
		t.Errorf("changes %+v", p.Changes)
	}
	shown := map[string]string{}
	for _, fc := range p.Changes[0].Fields {
		shown[fc.Path] = fc.To
	}
	if shown["VpcConfig.Subnets"] != "subnet-0a1b2c3d4e5f60718, subnet-0f1e2d3c4b5a69788" ||
		shown["VpcConfig.SecurityGroupIds"] != "sg-0123456789abcdef0" {
		t.Errorf("the plan does not show the VPC: %+v", p.Changes[0].Fields)
	}
	if !strings.Contains(p.Manifest, testRoleARN) || !strings.Contains(p.Manifest, "VolumeSizeInGB") ||
		!strings.Contains(p.Manifest, `"VpcConfig"`) || !strings.Contains(p.Manifest, testSubnets[1]) {
		t.Errorf("manifest %s", p.Manifest)
	}
	if !f.progress.has("CreateCluster accepted: dev-hp") || !f.progress.has("InService: 3/3 instances running") {
		t.Errorf("progress %q", f.progress.All())
	}
	var res BootstrapResult
	must(t, json.Unmarshal(rec.Result.Data, &res))
	if res.Status != "InService" || res.Instances["workers"] != 2 || res.ARN != hp.ARN {
		t.Errorf("result %+v", res)
	}
	if k := f.nodes.count(testDevCluster, "workers"); k != 2 {
		t.Errorf("Kubernetes sees %d worker nodes", k)
	}

	// Bootstrapping again finds the cluster and plans nothing.
	again, err := f.engine.Submit(ctxT(t), bootstrapRequest("boot-2", ops.Params{"template": "gpu-small"}))
	if err != nil || again.Plan.Changes[0].Action != ops.ActionNoop {
		t.Errorf("second bootstrap: %v %+v", err, again.Plan)
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerCreateCluster); n != 1 {
		t.Errorf("CreateCluster called %d times", n)
	}
}

func TestBootstrapFailureMessage(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.srv.FailNextUpdate("dev-hp", "Lifecycle script on_create.sh failed on 1 instance")
	rec, err := f.engine.Submit(ctxT(t), bootstrapRequest("boot-fail", ops.Params{"template": "gpu-small"}))
	ue := asOpsError(t, err)
	if ue.Code != ops.CodeAWSError || !strings.Contains(ue.Message, "Lifecycle script on_create.sh failed") || rec.Phase != ops.PhaseFailed {
		t.Errorf("error %+v phase %s", ue, rec.Phase)
	}
}

func TestBootstrapRefusals(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(f *fixture)
		param ops.Params
		code  ops.Code
		words string
	}{
		{"unknown template", nil, ops.Params{"template": "gpu-smal"}, ops.CodeInvalidArgument, `no HyperPod template "gpu-smal"`},
		{"role not registered", func(f *fixture) { delete(f.cfg.AWS.Roles, "hyperpod-exec") }, ops.Params{"template": "gpu-small"},
			ops.CodeInvalidArgument, `execution role "hyperpod-exec", which is not in aws.roles`},
		{"type not allowed", func(f *fixture) { f.cfg.Clusters[1].InstanceTypes = []string{"ml.m5.2xlarge"} },
			ops.Params{"template": "gpu-small"}, ops.CodeInstanceTypeNotAllow, "ml.g5.12xlarge, which is not in instanceTypes"},
		{"count above cap", func(f *fixture) { f.cfg.Clusters[1].Limits.MaxNodesPerGroup = 1 },
			ops.Params{"template": "gpu-small"}, ops.CodeQuotaExceeded, "limits.maxNodesPerGroup=1"},
		{"template missing", nil, ops.Params{}, ops.CodeInvalidArgument, "template is required"},
		{"no VPC subnets", func(f *fixture) { setDevTemplate(f, func(t *config.Template) { t.VPC.Subnets = nil }) },
			ops.Params{"template": "gpu-small"}, ops.CodeInvalidArgument, "template gpu-small has no VPC subnets or security groups"},
		{"no VPC security groups", func(f *fixture) { setDevTemplate(f, func(t *config.Template) { t.VPC.SecurityGroups = nil }) },
			ops.Params{"template": "gpu-small"}, ops.CodeInvalidArgument, "template gpu-small has no VPC subnets or security groups"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			if tc.edit != nil {
				tc.edit(f)
			}
			_, err := f.engine.Submit(ctxT(t), bootstrapRequest("boot-refused", tc.param))
			if codeOf(err) != tc.code || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("error %v, want %s with %q", err, tc.code, tc.words)
			}
			if n := f.srv.Calls(fakeaws.OpSageMakerCreateCluster); n != 0 {
				t.Errorf("CreateCluster called %d times", n)
			}
		})
	}
}

// setDevTemplate edits the dev cluster's gpu-small template in the fixture's config.
func setDevTemplate(f *fixture, edit func(*config.Template)) {
	tpl := f.cfg.Clusters[1].HyperPod.Templates["gpu-small"]
	edit(&tpl)
	f.cfg.Clusters[1].HyperPod.Templates["gpu-small"] = tpl
}

// No request can choose an IAM role: no parameter of these operations takes one, so a request naming one is
// refused before anything is stored or called, and bootstrap's role comes only from aws.roles in config. (The
// agent contract's E_FORBIDDEN_FIELD for such fields is decided in handlers, before a request gets here.)
func TestNoRequestFieldChoosesARole(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	roleFields := []string{"role", "roleArn", "iamRole", "executionRole", "ExecutionRole", "clusterRole", "serviceAccount"}
	for _, spec := range f.catalog.Specs() {
		for _, field := range roleFields {
			_, err := ops.Normalize(spec.Params, map[string]any{field: "arn:aws:iam::999999999999:role/Admin"})
			if codeOf(err) != ops.CodeInvalidArgument || !strings.Contains(err.Error(), `unknown argument "`+field+`"`) {
				t.Errorf("%s accepts %s: %v", spec.Name, field, err)
			}
		}
	}
	for _, field := range roleFields {
		rec, err := f.engine.Submit(ctxT(t), bootstrapRequest("boot-role-"+strings.ToLower(field),
			ops.Params{"template": "gpu-small", field: "arn:aws:iam::999999999999:role/Admin"}))
		if codeOf(err) != ops.CodeInvalidArgument || rec != nil {
			t.Errorf("bootstrap with %s: %v %+v", field, err, rec)
		}
	}
	if n := f.srv.Calls(fakeaws.OpSageMakerCreateCluster); n != 0 {
		t.Fatalf("CreateCluster called %d times", n)
	}
	rec, err := f.engine.Submit(ctxT(t), bootstrapRequest("boot-ok", ops.Params{"template": "gpu-small"}))
	if err != nil {
		t.Fatal(err)
	}
	hp, _ := f.srv.HyperPodCluster("dev-hp")
	for _, g := range hp.InstanceGroups {
		if g.ExecutionRole != testRoleARN {
			t.Errorf("group %s runs as %s, want %s from aws.roles", g.Name, g.ExecutionRole, testRoleARN)
		}
	}
	if rec.Phase != ops.PhaseSucceeded {
		t.Errorf("phase %s", rec.Phase)
	}
}
