package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/ops"
)

// kubelet plays scheduler and kubelet for the smoke-test Job: it creates the Job's pod, schedules it, runs it to
// the given phase and leaves log as its output.
func kubelet(t *testing.T, e *env, phase corev1.PodPhase, log string) (stop func()) {
	return playOnce(func() bool {
		jobs, err := e.kube.BatchV1().Jobs(testNS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(jobs.Items) == 0 {
			return false
		}
		j := jobs.Items[0]
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x1", Namespace: testNS, Labels: j.Spec.Template.Labels},
			Spec: *j.Spec.Template.Spec.DeepCopy(), Status: corev1.PodStatus{Phase: phase}}
		pod.Spec.NodeName = "gpu-1"
		e.logs.set(pod.Name, log)
		if _, err := e.kube.CoreV1().Pods(testNS).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Errorf("create pod: %v", err)
		}
		return true
	})
}

func TestVerifyCluster(t *testing.T) {
	tests := []struct {
		name   string
		phase  corev1.PodPhase
		log    string
		ok     bool
		failed string
		// failing log reads before one answers
		failing int
	}{
		{name: "passes", phase: corev1.PodSucceeded, log: "starting\n" + verifyMarker, ok: true},
		{name: "log lacks the line", phase: corev1.PodSucceeded, log: "hello", failed: "logs FAILED"},
		{name: "pod failed", phase: corev1.PodFailed, log: "", failed: "logs FAILED"},
		{name: "log read fails, then answers", phase: corev1.PodSucceeded, log: verifyMarker, ok: true, failing: 3},
		{name: "log read keeps failing", phase: corev1.PodSucceeded, log: verifyMarker, failing: 1 << 20, failed: "an error on the server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.logs.failing = tt.failing
			e.reg.logRetryFor = time.Second
			stop := kubelet(t, e, tt.phase, tt.log)
			defer stop()
			// No image=: /hp bootstrap verify with no arguments runs the cluster's default smoke-test image.
			req := request("verify-cluster", map[string]any{"timeout": "10s"})
			op, p := e.plan(t, req)
			if !strings.Contains(p.Manifest, verifyMarker[:10]) || !strings.Contains(p.Manifest, "- echo") ||
				!strings.Contains(p.Manifest, "image: "+config.DefaultVerifyImage) {
				t.Fatalf("manifest = %s", p.Manifest)
			}
			res, err := op.Execute(context.Background(), req, p, ops.Execution{})
			var rep VerifyReport
			if res == nil || json.Unmarshal(res.Data, &rep) != nil {
				t.Fatalf("result = %+v, %v", res, err)
			}
			if tt.ok {
				if err != nil || !rep.OK || len(rep.Checks) != 3 || rep.Node != "gpu-1" {
					t.Fatalf("report = %+v, %v", rep, err)
				}
				return
			}
			wantCode(t, err, ops.CodeClusterUnavailable, tt.failed)
			e.logs.mu.Lock()
			defer e.logs.mu.Unlock()
			// Read again a poll apart for logRetryFor, then given up: more than once, and not without end.
			if tt.failing > 0 && (e.logs.reads < 2 || e.logs.failing == 0) {
				t.Errorf("the log was read %d times over logRetryFor", e.logs.reads)
			}
		})
	}
	t.Run("times out when nothing schedules", func(t *testing.T) {
		e := newEnv(t, nil)
		req := request("verify-cluster", map[string]any{"timeout": "50ms"})
		op, p := e.plan(t, req)
		_, err := op.Execute(context.Background(), req, p, ops.Execution{})
		wantCode(t, err, ops.CodeClusterUnavailable, "scheduling FAILED", "no pod yet")
	})
	t.Run("guardrails", func(t *testing.T) {
		e := newEnv(t, nil)
		_, err := e.prepare(t, request("verify-cluster", map[string]any{"image": "public.ecr.aws/docker/library/busybox:1", "timeout": "31m"}))
		wantCode(t, err, ops.CodeQuotaExceeded)
	})
}

// TestVerifyClusterImage covers where the smoke-test image comes from and that every source is held to the
// cluster's image globs.
func TestVerifyClusterImage(t *testing.T) {
	const mirror = "123456789012.dkr.ecr.us-west-2.amazonaws.com/mirror/busybox:1.36"
	ecrOnly := []string{"123456789012.dkr.ecr.us-west-2.amazonaws.com/*"}
	tests := []struct {
		name   string
		edit   func(*config.Cluster)
		params map[string]any
		want   string   // the image the Job runs, when allowed
		refuse []string // what an E_IMAGE_NOT_ALLOWED names, when refused
	}{
		{name: "no arguments: the default", params: map[string]any{}, want: config.DefaultVerifyImage},
		{name: "no arguments: the configured image",
			edit: func(c *config.Cluster) {
				c.Images = append(c.Images, "123456789012.dkr.ecr.us-west-2.amazonaws.com/mirror/*")
				c.Verify.Image = mirror
			},
			params: map[string]any{}, want: mirror},
		{name: "image= wins over config",
			edit:   func(c *config.Cluster) { c.Verify.Image = "public.ecr.aws/docker/library/alpine:3.20" },
			params: map[string]any{"image": "public.ecr.aws/docker/library/busybox:1.37"}, want: "public.ecr.aws/docker/library/busybox:1.37"},
		{name: "image= outside the globs", params: map[string]any{"image": "busybox"},
			refuse: []string{`image "busybox"`, "clusters[" + testCluster + "].images"}},
		{name: "default outside the globs", edit: func(c *config.Cluster) { c.Images = ecrOnly }, params: map[string]any{},
			refuse: []string{"default smoke-test image", config.DefaultVerifyImage, "clusters[" + testCluster + "].verify.image", ecrOnly[0]}},
		{name: "configured image outside the globs",
			edit:   func(c *config.Cluster) { c.Images = ecrOnly; c.Verify.Image = "docker.io/library/busybox:1.36" },
			params: map[string]any{},
			refuse: []string{"clusters[" + testCluster + "].verify.image", `"docker.io/library/busybox:1.36"`}},
		{name: "no globs at all", edit: func(c *config.Cluster) { c.Images = nil }, params: map[string]any{},
			refuse: []string{"none are configured"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, withConfig(tt.edit))
			req := request("verify-cluster", tt.params)
			if tt.refuse != nil {
				_, err := e.prepare(t, req)
				wantCode(t, err, ops.CodeImageNotAllowed, tt.refuse...)
				return
			}
			_, p := e.plan(t, req)
			if !strings.Contains(p.Manifest, "image: "+tt.want+"\n") || !strings.Contains(p.Summary, tt.want) {
				t.Errorf("want the Job to run %s; summary %q, manifest:\n%s", tt.want, p.Summary, p.Manifest)
			}
		})
	}
}
