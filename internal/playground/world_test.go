package playground

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hyperops/hyperops/internal/controlplane"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/fakeslack"
)

// postWorld presses a side-panel button through the page's HTTP API.
func postWorld(t *testing.T, pg *Playground, kind, name, ns string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"kind": kind, "name": name, "namespace": ns})
	resp, err := http.Post(pg.URL()+"api/world", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode != http.StatusOK || !a.OK {
		t.Fatalf("%s %s: %d %+v", kind, name, resp.StatusCode, a)
	}
}

// waitWorld polls the side panel's world until cond holds.
func waitWorld(ctx context.Context, t *testing.T, pg *Playground, what string, cond func(World) bool) World {
	t.Helper()
	for {
		w := pg.world(ctx)
		if cond(w) {
			return w
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the world never showed %s; last: %+v", what, w)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestWorldActions presses the side panel's buttons: a node becomes unhealthy (HyperPod's health label, cordoned)
// and healthy again; AWS throttles, so a capacity request is refused with E_AWS_ERROR, until it stops; a running
// Job made to fail fails.
func TestWorldActions(t *testing.T) {
	pg := startPlayground(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	w := waitWorld(ctx, t, pg, "two ready GPU nodes", func(w World) bool {
		return len(w.Nodes) == GPUNodes && w.Nodes[0].Ready && w.Nodes[1].Ready
	})
	node := w.Nodes[0].Name
	postWorld(t, pg, "node-unhealthy", node, "")
	n, err := pg.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := n.Labels[controlplane.LabelNodeHealth]; h == controlplane.HealthSchedulable || !n.Spec.Unschedulable {
		t.Fatalf("node %s after make unhealthy: health %q, unschedulable %v", node, h, n.Spec.Unschedulable)
	}
	if st := hyperPodNode(pg, node); st.Status != fakeaws.NodeFailure || st.Message != unhealthyReason {
		t.Fatalf("the fake AWS has node %s as %+v, want Failure with the playground's reason", node, st)
	}
	postWorld(t, pg, "node-healthy", node, "")
	waitWorld(ctx, t, pg, node+" healthy again", func(w World) bool {
		for _, nv := range w.Nodes {
			if nv.Name == node {
				return nv.Health == controlplane.HealthSchedulable && !nv.Cordoned
			}
		}
		return false
	})

	if st := hyperPodNode(pg, node); st.Status != fakeaws.NodeRunning || st.Message != "" {
		t.Fatalf("the fake AWS has node %s as %+v after make healthy, want Running", node, st)
	}

	postWorld(t, pg, "throttle-on", "", "")
	if !pg.world(ctx).Throttled {
		t.Fatal("the world does not say AWS is throttling")
	}
	if a := pg.send(ctx, request{As: "engineer", Channel: OpsChannel, Text: "/hp capacity scale group=" + GPUGroup + " count=3"}); !a.OK {
		t.Fatal(a.Error)
	}
	if _, err := pg.Slack.WaitFor(ctx, func(s fakeslack.Snapshot) bool {
		for _, e := range s.Ephemerals {
			if e.User == "U0ERIN" && strings.Contains(e.Text+string(e.Blocks), "E_AWS_ERROR") {
				return true
			}
		}
		for _, m := range s.Messages[OpsChannel] {
			if strings.Contains(m.Text+string(m.Blocks), "E_AWS_ERROR") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("a scale while AWS throttles was not answered E_AWS_ERROR: %v", err)
	}
	postWorld(t, pg, "throttle-off", "", "")
	if pg.world(ctx).Throttled {
		t.Fatal("the world still says AWS is throttling")
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "doomed", Namespace: Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "hyperops"}},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "trainer", Image: "public.ecr.aws/docker/library/busybox:1.36"}},
		}}},
	}
	if _, err := pg.Kube.BatchV1().Jobs(Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitWorld(ctx, t, pg, "the Job running", func(w World) bool {
		for _, wl := range w.Workloads {
			if wl.Name == "doomed" {
				return wl.State == "running"
			}
		}
		return false
	})
	postWorld(t, pg, "fail-workload", "doomed", Namespace)
	waitWorld(ctx, t, pg, "the Job failed", func(w World) bool {
		for _, wl := range w.Workloads {
			if wl.Name == "doomed" {
				return wl.State == "failed"
			}
		}
		return false
	})
}

// hyperPodNode is the fake AWS's view of a node of the playground's HyperPod cluster.
func hyperPodNode(pg *Playground, name string) fakeaws.Node {
	hp, _ := pg.AWS.HyperPodCluster(HyperPod)
	for _, g := range hp.InstanceGroups {
		for _, n := range g.Nodes {
			if string(n.Name) == name {
				return n
			}
		}
	}
	return fakeaws.Node{}
}
