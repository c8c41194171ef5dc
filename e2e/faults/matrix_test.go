package faults

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperops/hyperops/e2e/harness"
	"github.com/hyperops/hyperops/internal/faultproxy"
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
)

const nginx = "public.ecr.aws/docker/library/nginx:1.27"

var (
	deployInference = operation{
		name:    "deploy-inference",
		command: func(n string) string { return "infer deploy name=" + n + " image=" + nginx },
		writes:  kubeWrites("deployments"), kube: "deployments",
		scope: func(n string) string { return "/" + n },
	}
	createStorage = operation{
		name:    "create-storage",
		command: func(n string) string { return "storage create name=" + n + " size=1Gi storage-class=" + harness.StorageClass },
		writes:  kubeWrites("persistentvolumeclaims"), kube: "persistentvolumeclaims",
		scope: func(n string) string { return "/" + n },
	}
	deleteStorage = operation{
		name:    "delete-storage",
		command: func(n string) string { return "storage delete name=" + n },
		setup: func(t *testing.T, w *world, n string) {
			rec := w.submit(t, "setup-"+n, createStorage.command(n))
			if rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("set-up: creating the claim %s ended %s: %v", n, rec.Phase, rec.Errors)
			}
		},
		writes: kubeWrites("persistentvolumeclaims"), kube: "persistentvolumeclaims",
		scope: func(n string) string { return "/" + n },
	}
	scaleHyperPod = operation{
		name:    "scale-capacity (HyperPod)",
		command: func(string) string { return "capacity scale group=" + harness.GPUGroup + " count=2" },
		writes:  func(w *world, _ string) int { return w.AWS.Calls(fakeaws.OpSageMakerUpdateCluster) },
		scope:   func(string) string { return harness.GPUGroup },
	}
	scaleEKS = operation{
		name:    "scale-capacity (EKS)",
		command: func(string) string { return "capacity scale group=" + EKSGroup + " count=1" },
		writes:  func(w *world, _ string) int { return w.AWS.Calls(fakeaws.OpEKSUpdateNodegroupConfig) },
		scope:   func(string) string { return EKSGroup },
	}
)

// kubeFault answers the request's non-dry-run write of its object with status (once when times is 1).
func kubeFault(name string, act faultproxy.Action, status, retryAfter, times int, want ops.Phase, writes int) fault {
	return fault{name: name, want: want, wantWrites: writes, arm: func(t *testing.T, w *world, c *run) {
		w.kube.Inject(faultproxy.Rule{Resource: c.op.kube, Name: c.name, Verb: writeVerb(c.op), Action: act,
			Status: status, RetryAfter: retryAfter, Times: times})
	}}
}

func writeVerb(op operation) string {
	if op.name == deleteStorage.name {
		return "delete"
	}
	return "patch"
}

// redisDropOnStep loses Redis's answer to the script that records the step note of the request: the script ran.
func redisDropOnStep(note string, want ops.Phase, writes int) fault {
	return fault{name: "redis: answer to «" + note + "» lost", want: want, wantWrites: writes, arm: func(t *testing.T, w *world, c *run) {
		w.redisProxy.DropAfterForward(faultproxy.Contains(c.id, note), 1)
	}}
}

// redisCutWhile cuts the bot's Redis for outage once the request's record satisfies cond.
func redisCutWhile(name string, outage time.Duration, cond func(*ops.Record) bool, want ops.Phase, writes int) fault {
	return fault{name: name, want: want, wantWrites: writes, arm: func(t *testing.T, w *world, c *run) {
		go func() {
			_, err := w.WaitRecord(t.Context(), 3*time.Minute, c.id, cond)
			if err != nil {
				return
			}
			w.redisProxy.Cut()
			select {
			case <-time.After(outage):
			case <-c.done:
			}
			w.redisProxy.Restore()
		}()
	}}
}

func executing(r *ops.Record) bool { return r.Phase == ops.PhaseExecuting }

func writeAccepted(r *ops.Record) bool { return r.Execution != nil && !r.Execution.WriteAccepted.IsZero() }

var (
	none         = fault{name: "none", want: ops.PhaseSucceeded, wantWrites: 1}
	redisLatency = fault{name: "redis: +50ms a chunk", want: ops.PhaseSucceeded, wantWrites: 1,
		arm: func(t *testing.T, w *world, c *run) { w.redisProxy.SetLatency(50 * time.Millisecond) }}
	redisCutAwait = redisCutWhile("redis: cut 5s after the write", 5*time.Second, writeAccepted, ops.PhaseSucceeded, 1)
	redisDropAcc  = redisDropOnStep("change accepted", ops.PhaseSucceeded, 1)

	kube429 = kubeFault("kube: 429 Retry-After 1 on the write", faultproxy.Answer, http.StatusTooManyRequests, 1, 1, ops.PhaseSucceeded, 1)
	kube403 = kubeFault("kube: 403 on the write", faultproxy.Answer, http.StatusForbidden, 0, 0, ops.PhaseFailed, 0)
	kube409 = kubeFault("kube: 409 once on the write", faultproxy.Answer, http.StatusConflict, 0, 1, ops.PhaseSucceeded, 1)
	kube422 = kubeFault("kube: 422 on the write", faultproxy.Answer, http.StatusUnprocessableEntity, 0, 0, ops.PhaseFailed, 0)
	kube503 = kubeFault("kube: 503 on the write, not forwarded", faultproxy.Answer, http.StatusServiceUnavailable, 0, 0, ops.PhaseFailed, 0)
	kubeHoldBefore = kubeFault("kube: write held, never forwarded", faultproxy.HoldBefore, 0, 0, 1, ops.PhaseFailed, 0)
)

// cells is the committed matrix: every pair whose invariants hold.
func cells() []struct {
	op operation
	f  fault
} {
	type cell = struct {
		op operation
		f  fault
	}
	var out []cell
	kubeOps := []operation{deployInference, createStorage, deleteStorage}
	for _, op := range kubeOps {
		for _, f := range []fault{none, kube429, kube403, kube409, kube422, kube503, kubeHoldBefore, redisLatency, redisDropAcc} {
			out = append(out, cell{op, f})
		}
	}
	for _, op := range []operation{scaleHyperPod, scaleEKS} {
		for _, f := range []fault{none, redisLatency, redisCutAwait, redisDropAcc} {
			out = append(out, cell{op, f})
		}
	}
	return out
}

// TestFaultMatrix runs every cell in its own world, in parallel, and prints the matrix.
func TestFaultMatrix(t *testing.T) {
	var mu sync.Mutex
	var results []result
	t.Run("cells", func(t *testing.T) {
		for _, c := range cells() {
			t.Run(c.op.name+"/"+c.f.name, func(t *testing.T) {
				t.Parallel()
				r := runCell(t, c.op, c.f)
				if t.Failed() {
					r.told += " FAILED"
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			})
		}
	})
	t.Log("\n" + table(results))
}

func table(rs []result) string {
	sort.Slice(rs, func(i, j int) bool { return rs[i].op+rs[i].fault < rs[j].op+rs[j].fault })
	var b strings.Builder
	fmt.Fprintf(&b, "| operation | fault | effective writes | final phase | told |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", r.op, r.fault, r.writes, r.phase, r.told)
	}
	fmt.Fprintf(&b, "%d cells\n", len(rs))
	return b.String()
}
