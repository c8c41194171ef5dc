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
	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/internal/faultproxy"
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
		name: "create-storage",
		command: func(n string) string {
			return "storage create name=" + n + " size=1Gi storage-class=" + harness.StorageClass
		},
		writes: kubeWrites("persistentvolumeclaims"), kube: "persistentvolumeclaims",
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
		writes:  func(w *world, _ string) int { return w.AWS.Applied(fakeaws.OpSageMakerUpdateCluster) },
		scope:   func(string) string { return harness.GPUGroup }, aws: fakeaws.OpSageMakerUpdateCluster,
	}
	bootstrap = operation{
		name:    "bootstrap (HyperPod CreateCluster)",
		command: func(string) string { return "bootstrap hyperpod template=" + Template },
		writes:  func(w *world, _ string) int { return w.AWS.Applied(fakeaws.OpSageMakerCreateCluster) },
		scope:   func(string) string { return harness.Cluster + "/bootstrap" }, aws: fakeaws.OpSageMakerCreateCluster,
		world: worldOptions{noHyperPod: true},
	}
	scaleEKS = operation{
		name:    "scale-capacity (EKS)",
		command: func(string) string { return "capacity scale group=" + EKSGroup + " count=1" },
		writes:  func(w *world, _ string) int { return w.AWS.Applied(fakeaws.OpEKSUpdateNodegroupConfig) },
		scope:   func(string) string { return EKSGroup }, aws: fakeaws.OpEKSUpdateNodegroupConfig,
	}
)

// kubeFault answers the request's non-dry-run write of its object with status (once when times is 1).
func kubeFault(name string, act faultproxy.Action, status, retryAfter, times int, want ops.Phase, writes int) fault {
	return fault{name: name, want: want, wantWrites: writes, arm: func(t *testing.T, w *world, c *run) {
		c.fired = w.kube.Inject(faultproxy.Rule{Resource: c.op.kube, Name: c.name, Verb: writeVerb(c.op), Action: act,
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
		c.fired = w.redisProxy.DropAfterForward(faultproxy.Contains(c.id, note), 1)
	}}
}

// redisCutAfter cuts the bot's Redis right after the master answered the script that records the step note of the
// request (the proxy cuts once that answer reached the bot), for outage and until the bot was refused at least
// once: the bot heard its step recorded, then loses Redis.
func redisCutAfter(name, note string, outageFor time.Duration, want ops.Phase, writes int) fault {
	return fault{name: name, want: want, wantWrites: writes, storeWide: true, arm: func(t *testing.T, w *world, c *run) {
		c.fired = w.redisProxy.Refused
		w.redisProxy.AfterAnswer(faultproxy.Contains(c.id, note), 1, func() {
			w.redisProxy.Cut()
			go func() {
				defer w.redisProxy.Restore()
				outage(t, c, outageFor, w.redisProxy.Refused)
			}()
		})
	}}
}

// awsFault injects f into the request's one AWS write.
func awsFault(name string, f fakeaws.Fault, want ops.Phase, writes int) fault {
	return fault{name: name, want: want, wantWrites: writes, arm: func(t *testing.T, w *world, c *run) {
		f.Op = c.op.aws
		w.AWS.Inject(f)
	}}
}

var (
	none         = fault{name: "none", want: ops.PhaseSucceeded, wantWrites: 1}
	redisLatency = fault{name: "redis: +50ms a chunk", want: ops.PhaseSucceeded, wantWrites: 1,
		arm: func(t *testing.T, w *world, c *run) { w.redisProxy.SetLatency(50 * time.Millisecond) }}
	redisCutAwait = redisCutAfter("redis: cut 5s after the write", "change accepted", 5*time.Second, ops.PhaseSucceeded, 1)
	redisDropAcc  = redisDropOnStep("change accepted", ops.PhaseSucceeded, 1)

	kube429        = kubeFault("kube: 429 Retry-After 1 on the write", faultproxy.Answer, http.StatusTooManyRequests, 1, 1, ops.PhaseSucceeded, 1)
	kube403        = kubeFault("kube: 403 on the write", faultproxy.Answer, http.StatusForbidden, 0, 0, ops.PhaseFailed, 0)
	kube409        = kubeFault("kube: 409 once on the write", faultproxy.Answer, http.StatusConflict, 0, 1, ops.PhaseSucceeded, 1)
	kube422        = kubeFault("kube: 422 on the write", faultproxy.Answer, http.StatusUnprocessableEntity, 0, 0, ops.PhaseFailed, 0)
	kube503        = kubeFault("kube: 503 on the write, not forwarded", faultproxy.Answer, http.StatusServiceUnavailable, 0, 0, ops.PhaseFailed, 0)
	kubeHoldBefore = kubeFault("kube: write held, never forwarded", faultproxy.HoldBefore, 0, 0, 1, ops.PhaseFailed, 0)
	// The write took effect and its answer was lost (dropped, or held past the client's patience): read back,
	// never sent again.
	kubeDropAfter = kubeFault("kube: write dropped after it took effect", faultproxy.DropAfter, 0, 0, 1, ops.PhaseSucceeded, 1)
	kubeHoldAfter = kubeFault("kube: write held after it took effect", faultproxy.HoldAfter, 0, 0, 1, ops.PhaseSucceeded, 1)
	// deploy-inference applies a Deployment, then its Service: the Deployment's answer lost, the Service was never
	// sent, and the read-back finds the change half made: interrupted, the lock held, for people to decide.
	kubeDropAfterHalf = kubeFault("kube: write dropped after it took effect", faultproxy.DropAfter, 0, 0, 1, ops.PhaseInterrupted, 1)
	kubeHoldAfterHalf = kubeFault("kube: write held after it took effect", faultproxy.HoldAfter, 0, 0, 1, ops.PhaseInterrupted, 1)
	// A plain delete meets a 409 only from an admission or a precondition: it is refused, not retried.
	kube409Delete = kubeFault("kube: 409 once on the write", faultproxy.Answer, http.StatusConflict, 0, 1, ops.PhaseFailed, 0)

	awsThrottled = awsFault("aws: ThrottlingException 400 twice", fakeaws.Fault{When: fakeaws.FaultBefore, Status: 400,
		Code: "ThrottlingException", Message: "Rate exceeded", Times: 2}, ops.PhaseSucceeded, 1)
	// A 5xx may come after acting: the answer is lost, and what reading back finds decides. HyperPod reads the
	// instance group (nothing changed: failed); EKS reads back by re-sending with its idempotency token, which meets
	// the same 5xx, so it cannot tell: interrupted, the lock held for a person.
	aws500Before = awsFault("aws: 500 before acting, every try", fakeaws.Fault{When: fakeaws.FaultBefore, Status: 500,
		Code: "InternalFailure", Times: -1}, ops.PhaseFailed, 0)
	aws500BeforeEKS = awsFault("aws: 500 before acting, every try", fakeaws.Fault{When: fakeaws.FaultBefore, Status: 500,
		Code: "InternalFailure", Times: -1}, ops.PhaseInterrupted, 0)
	aws400 = awsFault("aws: ValidationException", fakeaws.Fault{When: fakeaws.FaultBefore, Status: 400,
		Code: "ValidationException", Message: "bad instance count"}, ops.PhaseFailed, 0)
	// The SDK retries a 5xx and a reset itself (3 attempts): the fault strikes all three, then clears.
	aws500After = awsFault("aws: 500 after acting (answer lost)", fakeaws.Fault{When: fakeaws.FaultAfter, Status: 500,
		Code: "InternalFailure", Times: 3}, ops.PhaseSucceeded, 1)
	awsResetAfter = awsFault("aws: connection reset after acting", fakeaws.Fault{When: fakeaws.FaultAfter, Reset: true, Times: 3},
		ops.PhaseSucceeded, 1)
	// CreateCluster, like UpdateCluster, has no idempotency token: refusals are final, a lost answer is read back.
	awsResourceLimit = awsFault("aws: ResourceLimitExceeded", fakeaws.Fault{When: fakeaws.FaultBefore, Status: 400,
		Code: "ResourceLimitExceeded", Message: "The account-level service limit 'ml.p5.48xlarge for cluster usage' is 0 Instances"},
		ops.PhaseFailed, 0)
	awsAccessDenied = awsFault("aws: AccessDeniedException", fakeaws.Fault{When: fakeaws.FaultBefore, Status: 400,
		Code: "AccessDeniedException", Message: "User is not authorized to perform: sagemaker:CreateCluster"}, ops.PhaseFailed, 0)
	aws500AfterOnce = awsFault("aws: 500 after acting (answer lost)", fakeaws.Fault{When: fakeaws.FaultAfter, Status: 500,
		Code: "InternalFailure"}, ops.PhaseSucceeded, 1)
	awsResetAfterOnce = awsFault("aws: connection reset after acting", fakeaws.Fault{When: fakeaws.FaultAfter, Reset: true},
		ops.PhaseSucceeded, 1)
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
		conflict, drop, hold := kube409, kubeDropAfter, kubeHoldAfter
		if op.name == deleteStorage.name {
			conflict = kube409Delete
		}
		if op.name == deployInference.name {
			drop, hold = kubeDropAfterHalf, kubeHoldAfterHalf
		}
		faults := []fault{none, kube429, kube403, conflict, kube422, kube503, kubeHoldBefore, drop, hold, redisLatency}
		// A delete is no ops.Steps operation: it records no «change accepted», so that fault would strike nothing.
		if op.name != deleteStorage.name {
			faults = append(faults, redisDropAcc)
		}
		for _, f := range faults {
			out = append(out, cell{op, f})
		}
	}
	for _, op := range []operation{scaleHyperPod, scaleEKS} {
		before := aws500Before
		if op.name == scaleEKS.name {
			before = aws500BeforeEKS
		}
		for _, f := range []fault{none, redisLatency, redisCutAwait, redisDropAcc, awsThrottled, before, aws400, aws500After, awsResetAfter} {
			out = append(out, cell{op, f})
		}
	}
	for _, f := range []fault{none, awsThrottled, aws500Before, aws400, awsResourceLimit, awsAccessDenied, aws500AfterOnce,
		awsResetAfterOnce, redisDropAcc, redisCutAwait} {
		out = append(out, cell{bootstrap, f})
	}
	for _, op := range []operation{deployInference, scaleHyperPod} {
		for _, f := range slackFaults {
			// On HyperPod the refused update is the one to «waiting for approval»: its plain-text version keeps
			// Approve and Deny, so the vote still comes.
			out = append(out, cell{op, f})
		}
		out = append(out, cell{op, redisFailover}, cell{op, redisReadOnly})
	}
	out = append(out, cell{deployInference, watchClosed("deployments")}, cell{createStorage, watchClosed("persistentvolumeclaims")})
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
		for _, f := range reportFaults {
			t.Run("capacity-report/"+f.name, func(t *testing.T) {
				t.Parallel()
				r := runReportCell(t, f)
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
