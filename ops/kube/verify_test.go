package kube

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperops/hyperops/ops"
)

// kubelet plays scheduler and kubelet for the smoke-test Job: it creates the Job's pod, schedules it, runs it to
// the given phase and leaves log as its output.
func kubelet(t *testing.T, e *env, phase corev1.PodPhase, log string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			jobs, err := e.kube.BatchV1().Jobs(testNS).List(context.Background(), metav1.ListOptions{})
			if err != nil || len(jobs.Items) == 0 {
				continue
			}
			j := jobs.Items[0]
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x1", Namespace: testNS, Labels: j.Spec.Template.Labels},
				Spec: *j.Spec.Template.Spec.DeepCopy(), Status: corev1.PodStatus{Phase: phase}}
			pod.Spec.NodeName = "gpu-1"
			e.logs.set(pod.Name, log)
			if _, err := e.kube.CoreV1().Pods(testNS).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Errorf("create pod: %v", err)
			}
			return
		}
	}()
	return func() { close(done); wg.Wait() }
}

func TestVerifyCluster(t *testing.T) {
	tests := []struct {
		name   string
		phase  corev1.PodPhase
		log    string
		ok     bool
		failed string
	}{
		{name: "passes", phase: corev1.PodSucceeded, log: "starting\n" + verifyMarker, ok: true},
		{name: "log lacks the line", phase: corev1.PodSucceeded, log: "hello", failed: "logs FAILED"},
		{name: "pod failed", phase: corev1.PodFailed, log: "", failed: "logs FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			stop := kubelet(t, e, tt.phase, tt.log)
			defer stop()
			req := request("verify-cluster", map[string]any{"image": "public.ecr.aws/docker/library/busybox:1.36", "timeout": "10s"})
			op, p := e.plan(t, req)
			if !strings.Contains(p.Manifest, verifyMarker[:10]) || !strings.Contains(p.Manifest, "- echo") {
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
		})
	}
	t.Run("times out when nothing schedules", func(t *testing.T) {
		e := newEnv(t, nil)
		req := request("verify-cluster", map[string]any{"image": "public.ecr.aws/docker/library/busybox:1.36", "timeout": "50ms"})
		op, p := e.plan(t, req)
		_, err := op.Execute(context.Background(), req, p, ops.Execution{})
		wantCode(t, err, ops.CodeClusterUnavailable, "scheduling FAILED", "no pod yet")
	})
	t.Run("guardrails", func(t *testing.T) {
		e := newEnv(t, nil)
		_, err := e.prepare(t, request("verify-cluster", map[string]any{"image": "busybox"}))
		wantCode(t, err, ops.CodeImageNotAllowed)
		_, err = e.prepare(t, request("verify-cluster", map[string]any{"image": "public.ecr.aws/docker/library/busybox:1", "timeout": "31m"}))
		wantCode(t, err, ops.CodeQuotaExceeded)
	})
}
