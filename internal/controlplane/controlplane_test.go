package controlplane

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// TestControlPlane starts the real plane once and walks what the end-to-end tier relies on:
// HyperPod-like GPU nodes become schedulable, a GPU Job is placed by the scheduler and
// completed by kwok, the training CRDs serve objects, RBAC sees the identities we mint,
// claims bind, and Stop leaves no process or port behind.
func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	cp, err := Start(ctx, Options{WithCRDs: true, Users: []User{{Name: "hyperops-bot", Token: "bot-token", Groups: []string{"hyperops:bots"}}}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cp.Stop()
		}
	})
	rss, err := cp.RSS()
	if err != nil {
		t.Fatalf("RSS: %v", err)
	}
	t.Logf("control plane ready in %s, RSS %d MiB, dir %s", cp.ReadyIn().Round(time.Millisecond), rss>>20, cp.Dir())

	nodes := []NodeSpec{
		{Name: "hp-gpu-0", InstanceGroup: "gpu-workers", InstanceType: "ml.p5.48xlarge", GPUs: 8},
		{Name: "hp-gpu-1", InstanceGroup: "gpu-workers", InstanceType: "ml.p5.48xlarge", GPUs: 8},
	}
	t.Run("nodes become ready and untainted", func(t *testing.T) { testNodes(ctx, t, cp, nodes) })
	t.Run("GPU job is scheduled on a kwok node and completes", func(t *testing.T) { testGPUJob(ctx, t, cp, nodes) })
	t.Run("pods/log returns the container log kwok serves", func(t *testing.T) { testPodLogs(ctx, t, cp) })
	t.Run("PyTorchJob and HyperPodPyTorchJob are served", func(t *testing.T) { testCustomResources(ctx, t, cp) })
	t.Run("RBAC applies to minted identities", func(t *testing.T) { testRBAC(ctx, t, cp) })
	t.Run("claims of the kwok storage class bind", func(t *testing.T) { testClaimBinds(ctx, t, cp) })
	t.Run("removed node disappears", func(t *testing.T) {
		if err := cp.RemoveNode(ctx, nodes[1].Name); err != nil {
			t.Fatal(err)
		}
		_, err := cp.Client().CoreV1().Nodes().Get(ctx, nodes[1].Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("node %s after RemoveNode: err = %v, want NotFound", nodes[1].Name, err)
		}
	})

	pids := cp.PIDs()
	stopped = true
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := cp.Leftovers(); err != nil {
		t.Fatalf("after Stop: %v", err)
	}
	for name, pid := range pids {
		if groupAlive(pid) {
			t.Errorf("%s (pid %d) still alive after Stop", name, pid)
		}
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("second Stop: %v, want the first result (nil)", err)
	}
}

func testNodes(ctx context.Context, t *testing.T, cp *ControlPlane, nodes []NodeSpec) {
	for _, spec := range nodes {
		if _, err := cp.AddNode(ctx, spec); err != nil {
			t.Fatalf("AddNode: %v", err)
		}
	}
	for _, spec := range nodes {
		node, err := cp.WaitNodeReady(ctx, spec.Name)
		if err != nil {
			t.Fatalf("WaitNodeReady: %v\nkwok log:\n%s", err, cp.LogTail("kwok"))
		}
		wantLabels := map[string]string{
			LabelInstanceGroup: spec.InstanceGroup,
			LabelComputeType:   ComputeTypeHyperPod,
			LabelInstanceType:  spec.InstanceType,
			LabelNodeHealth:    HealthSchedulable,
		}
		for k, v := range wantLabels {
			if got := node.Labels[k]; got != v {
				t.Errorf("node %s label %s = %q, want %q", spec.Name, k, got, v)
			}
		}
		if gpus := node.Status.Allocatable[ResourceGPU]; gpus.Value() != int64(spec.GPUs) {
			t.Errorf("node %s allocatable GPUs = %s, want %d", spec.Name, gpus.String(), spec.GPUs)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				t.Errorf("node %s still carries %s", spec.Name, taint.Key)
			}
		}
	}
}

func testGPUJob(ctx context.Context, t *testing.T, cp *ControlPlane, nodes []NodeSpec) {
	jobs := cp.Client().BatchV1().Jobs(metav1.NamespaceDefault)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-smoke"},
		Spec: batchv1.JobSpec{
			BackoffLimit:          new(int32),
			ActiveDeadlineSeconds: ptr(int64(120)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  map[string]string{LabelInstanceGroup: nodes[0].InstanceGroup},
				Containers: []corev1.Container{{
					Name:    "train",
					Image:   "public.ecr.aws/docker/library/busybox:1.36",
					Command: []string{"true"},
					Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1")},
					},
				}},
			}},
		},
	}
	if _, err := jobs.Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	done, err := pollUntil(ctx, 2*time.Minute, func() (bool, error) {
		got, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
				return c.Type == batchv1.JobComplete, nil
			}
		}
		return false, nil
	})
	if err != nil || !done {
		t.Fatalf("job did not complete (done=%v, err=%v)\nkube-controller-manager log:\n%s\nkube-scheduler log:\n%s",
			done, err, cp.LogTail("kube-controller-manager"), cp.LogTail("kube-scheduler"))
	}
	pods, err := cp.Client().CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("list job pods: %d pods, err %v", len(pods.Items), err)
	}
	names := []string{nodes[0].Name, nodes[1].Name}
	for _, pod := range pods.Items {
		if !slices.Contains(names, pod.Spec.NodeName) {
			t.Errorf("pod %s on node %q, want one of %v", pod.Name, pod.Spec.NodeName, names)
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s phase %s, want Succeeded", pod.Name, pod.Status.Phase)
		}
	}
}

func testPodLogs(ctx context.Context, t *testing.T, cp *ControlPlane) {
	pods, err := cp.Client().CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "job-name=gpu-smoke"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("list job pods: %v (%d pods)", err, len(pods.Items))
	}
	pod := pods.Items[0].Name
	tests := []struct {
		name string
		log  string
		tail int64
		want string
	}{
		{"whole log", "namespace ok\nscheduled on hp-gpu-0\nhyperops-verify: logs ok\n", 0, "namespace ok\nscheduled on hp-gpu-0\nhyperops-verify: logs ok\n"},
		{"replaced log, last line only", "first\nsecond\n", 1, "second\n"},
		{"empty log", "", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := cp.SetContainerLog(tc.log); err != nil {
				t.Fatal(err)
			}
			opts := &corev1.PodLogOptions{Container: "train"}
			if tc.tail > 0 {
				opts.TailLines = &tc.tail
			}
			got, err := cp.Client().CoreV1().Pods(metav1.NamespaceDefault).GetLogs(pod, opts).DoRaw(ctx)
			if err != nil {
				t.Fatalf("pods/log of %s: %v\nkube-apiserver log:\n%s\nkwok log:\n%s", pod, err, cp.LogTail("kube-apiserver"), cp.LogTail("kwok"))
			}
			if string(got) != tc.want {
				t.Errorf("pods/log = %q, want %q", got, tc.want)
			}
		})
	}
}

func testCustomResources(ctx context.Context, t *testing.T, cp *ControlPlane) {
	tests := []struct {
		name string
		gvr  schema.GroupVersionResource
		obj  *unstructured.Unstructured
	}{
		{"PyTorchJob", PyTorchJobGVR, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
			"metadata": map[string]any{"name": "ddp-smoke"},
			"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
				"Master": map[string]any{"replicas": int64(1)},
				"Worker": map[string]any{"replicas": int64(2)},
			}},
		}}},
		{"HyperPodPyTorchJob", HyperPodPyTorchJobGVR, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
			"metadata": map[string]any{"name": "hp-smoke"},
			"spec":     map[string]any{"nprocPerNode": "8", "replicaSpecs": []any{map[string]any{"name": "pods", "replicas": int64(2)}}},
		}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := cp.Dynamic().Resource(tc.gvr).Namespace(metav1.NamespaceDefault)
			if _, err := res.Create(ctx, tc.obj, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create: %v", err)
			}
			got, err := res.Get(ctx, tc.obj.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if got.GetKind() != tc.name || got.GetUID() == "" {
				t.Errorf("got kind %q uid %q, want kind %q and a uid", got.GetKind(), got.GetUID(), tc.name)
			}
			spec, _, _ := unstructured.NestedMap(got.Object, "spec")
			if len(spec) == 0 {
				t.Errorf("spec was pruned: %v", got.Object)
			}
		})
	}
}

func testRBAC(ctx context.Context, t *testing.T, cp *ControlPlane) {
	alice, err := cp.UserConfig("slack:U0ALICE", "hyperops:humans")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := cp.UserConfig("someone-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		cfg       func() (*kubernetes.Clientset, error)
		forbidden bool
	}{
		{"unprivileged user is forbidden", func() (*kubernetes.Clientset, error) { return kubernetes.NewForConfig(alice) }, true},
		{"system:masters is allowed", func() (*kubernetes.Clientset, error) { return kubernetes.NewForConfig(admin) }, false},
		{"static-token user authenticates and is forbidden", func() (*kubernetes.Clientset, error) {
			return kubernetes.NewForConfig(cp.TokenConfig("bot-token"))
		}, true},
		{"admin token is allowed", func() (*kubernetes.Clientset, error) { return kubernetes.NewForConfig(cp.RESTConfig()) }, false},
		{"admin impersonating the user is forbidden", func() (*kubernetes.Clientset, error) {
			cfg := cp.RESTConfig()
			cfg.Impersonate.UserName = "slack:U0ALICE"
			cfg.Impersonate.Groups = []string{"hyperops:humans"}
			return kubernetes.NewForConfig(cfg)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, err := tc.cfg()
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
			if got := apierrors.IsForbidden(err); got != tc.forbidden || (!tc.forbidden && err != nil) {
				t.Errorf("list pods: err = %v, want forbidden=%v", err, tc.forbidden)
			}
		})
	}
}

func testClaimBinds(ctx context.Context, t *testing.T, cp *ControlPlane) {
	claims := cp.Client().CoreV1().PersistentVolumeClaims(metav1.NamespaceDefault)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr(StorageClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	if _, err := claims.Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create claim: %v", err)
	}
	bound, err := pollUntil(ctx, time.Minute, func() (bool, error) {
		got, err := claims.Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, err
	})
	if err != nil || !bound {
		t.Fatalf("claim not bound (err %v)\nkwok log:\n%s", err, cp.LogTail("kwok"))
	}
}

// pollUntil calls cond every 200ms until it reports true or an error, or timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() (bool, error)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for {
		ok, err := cond()
		if ok || err != nil {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-ticker.C:
		}
	}
}

func ptr[T any](v T) *T { return &v }
