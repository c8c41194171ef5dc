package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyperops/hyperops/internal/fakeaws"
	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/opstest"
	"github.com/hyperops/hyperops/ops/state"
)

// writeTarget is one AWS write HyperOps makes, with the request that makes it and its lock.
type writeTarget struct {
	name  string
	op    string // the fake's operation
	req   func(id string) ops.Request
	scope ops.LockScope
	// attempts is how many calls the SDK makes for one Write that keeps failing with a 5xx: 1 for SageMaker's
	// writes (no idempotency token, no blind retry), the standard retryer's 3 for EKS (its token makes them safe).
	attempts int
	// prepare readies the fixture for req (marks the node a recovery takes faulty); nil when nothing is needed.
	prepare func(t *testing.T, f *fixture)
	// readBack is the fake's operation the write's read-back reads.
	readBack string
}

func (wt writeTarget) setup(t *testing.T, f *fixture) {
	t.Helper()
	if wt.prepare != nil {
		wt.prepare(t, f)
	}
}

func markFirstGPUFaulty(t *testing.T, f *fixture) {
	t.Helper()
	must(t, f.srv.MarkNodeFaulty("ml-hp", f.gpuIDs(t)[0], "GPU XID 79: fallen off the bus"))
}

func writeTargets() []writeTarget {
	return []writeTarget{
		{"HyperPod UpdateCluster", fakeaws.OpSageMakerUpdateCluster,
			func(id string) ops.Request { return scaleRequest(id, testCluster, "gpu", 4) },
			ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: "gpu"}, 1, nil, fakeaws.OpSageMakerDescribeCluster},
		{"HyperPod BatchRebootClusterNodes", fakeaws.OpSageMakerBatchRebootClusterNodes,
			func(id string) ops.Request { return recoveryRequest(id, OpRebootNodes, ops.Params{"faulty": true}) },
			ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: "gpu"}, 1, markFirstGPUFaulty, fakeaws.OpSageMakerListClusterNodes},
		{"HyperPod BatchReplaceClusterNodes", fakeaws.OpSageMakerBatchReplaceClusterNodes,
			func(id string) ops.Request { return recoveryRequest(id, OpReplaceNodes, ops.Params{"faulty": true}) },
			ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: "gpu"}, 1, markFirstGPUFaulty, fakeaws.OpSageMakerListClusterNodes},
		{"HyperPod CreateCluster", fakeaws.OpSageMakerCreateCluster,
			func(id string) ops.Request { return bootstrapRequest(id, ops.Params{"template": "gpu-small"}) },
			ops.LockScope{Cluster: testDevCluster, Kind: "bootstrap"}, 1, nil, fakeaws.OpSageMakerDescribeCluster},
		{"EKS UpdateNodegroupConfig", fakeaws.OpEKSUpdateNodegroupConfig,
			func(id string) ops.Request { return scaleRequest(id, testCluster, "cpu", 3) },
			ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: "cpu"}, 3, nil, ""},
	}
}

func hasNote(rec *ops.Record, fragment string) bool {
	for _, h := range rec.History {
		if strings.Contains(h.Note, fragment) {
			return true
		}
	}
	return false
}

func (f *fixture) lockFree(t *testing.T, scope ops.LockScope) bool {
	t.Helper()
	_, held, err := f.store.Holder(ctxT(t), scope)
	must(t, err)
	return !held
}

// An answer lost after AWS made the change (a 5xx, a dropped connection, a client that gave up waiting): the
// write is read back instead of sent again, exactly one change takes effect, and the request ends succeeded.
func TestLostAnswerAfterWriteIsReadBack(t *testing.T) {
	lost := []struct {
		name  string
		fault fakeaws.Fault
	}{
		{"500 after apply", fakeaws.Fault{When: fakeaws.FaultAfter, Status: 500, Code: "InternalFailure", Message: "We encountered an internal error."}},
		{"reset after apply", fakeaws.Fault{When: fakeaws.FaultAfter, Reset: true}},
		{"answer slower than the write timeout", fakeaws.Fault{When: fakeaws.FaultAfter, Delay: time.Minute}},
	}
	for _, wt := range writeTargets() {
		for _, lc := range lost {
			t.Run(wt.name+"/"+lc.name, func(t *testing.T) {
				// The fake's transition outlasts the write timeout, so the read-back sees the change in progress.
				f := newFixture(t, fixtureOptions{writeTimeout: 300 * time.Millisecond, transitionDelay: time.Second, recoveryDuration: time.Second})
				wt.setup(t, f)
				fault := lc.fault
				fault.Op = wt.op
				if fault.Delay == 0 {
					fault.Times = wt.attempts // every attempt of the one Write loses its answer
				}
				f.srv.Inject(fault)
				rec, err := f.engine.Submit(ctxT(t), wt.req("lost-"+wt.op))
				if err != nil || rec.Phase != ops.PhaseSucceeded {
					t.Fatalf("Submit: %v, phase %v; want succeeded", err, rec.Phase)
				}
				if n := f.srv.Applied(wt.op); n != 1 {
					t.Errorf("%s took effect %d times, want exactly 1", wt.op, n)
				}
				if !hasNote(rec, "read back after the answer was lost") || !hasNote(rec, "the answer to the change was lost") {
					t.Errorf("history does not tell the lost answer and its read-back: %+v", rec.History)
				}
				if wt.attempts == 1 && f.srv.Calls(wt.op) != 1 {
					t.Errorf("%s was sent %d times; it has no idempotency token and must be sent once", wt.op, f.srv.Calls(wt.op))
				}
				if !f.lockFree(t, wt.scope) {
					t.Errorf("lock %s still held after the request succeeded", wt.scope)
				}
			})
		}
	}
}

// A 5xx before AWS acted: nothing changed, and the request fails with AWS's error and says nothing changed. EKS
// is the exception by design: its read-back is the same request with the same clientRequestToken, which makes the
// change now (once) and the request succeeds.
func TestFailedBeforeWriteChangesNothing(t *testing.T) {
	for _, wt := range writeTargets() {
		t.Run(wt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			wt.setup(t, f)
			f.srv.Inject(fakeaws.Fault{Op: wt.op, When: fakeaws.FaultBefore, Status: 500, Code: "InternalFailure",
				Message: "We encountered an internal error.", Times: wt.attempts})
			rec, err := f.engine.Submit(ctxT(t), wt.req("before-"+wt.op))
			if wt.op == fakeaws.OpEKSUpdateNodegroupConfig {
				if err != nil || rec.Phase != ops.PhaseSucceeded || f.srv.Applied(wt.op) != 1 {
					t.Fatalf("EKS: %v, phase %v, applied %d; want the token's re-send to make the one change", err, rec.Phase, f.srv.Applied(wt.op))
				}
				return
			}
			ue := asOpsError(t, err)
			if rec.Phase != ops.PhaseFailed || ue.Code != ops.CodeAWSError || !strings.Contains(ue.Message, "InternalFailure") ||
				!strings.Contains(ue.Message, "nothing changed") || ue.Next == "" {
				t.Fatalf("phase %v, error %+v; want failed with InternalFailure, nothing changed and a next step", rec.Phase, ue)
			}
			if n, calls := f.srv.Applied(wt.op), f.srv.Calls(wt.op); n != 0 || calls != 1 {
				t.Errorf("%s applied %d times in %d calls, want 0 in 1", wt.op, n, calls)
			}
			if !f.lockFree(t, wt.scope) {
				t.Errorf("lock %s still held after the request failed", wt.scope)
			}
		})
	}
}

// Refusals AWS makes before acting end the request failed with AWS's message, nothing applied, the lock freed;
// throttling is retried by the SDK and the change is made once.
func TestRefusedWrites(t *testing.T) {
	refusals := []struct {
		code, message string
		status        int
	}{
		{"ValidationException", "1 validation error detected: Value at 'instanceCount' failed to satisfy constraint", 400},
		{"AccessDeniedException", "User is not authorized to perform this action", 403},
		{"ResourceLimitExceeded", "The account-level service limit for ml.p5.48xlarge for cluster usage is 2 Instances", 400},
	}
	for _, wt := range writeTargets() {
		for _, rc := range refusals {
			t.Run(wt.name+"/"+rc.code, func(t *testing.T) {
				f := newFixture(t, fixtureOptions{})
				wt.setup(t, f)
				f.srv.Inject(fakeaws.Fault{Op: wt.op, When: fakeaws.FaultBefore, Status: rc.status, Code: rc.code, Message: rc.message})
				rec, err := f.engine.Submit(ctxT(t), wt.req("refused"))
				ue := asOpsError(t, err)
				if rec.Phase != ops.PhaseFailed || !strings.Contains(ue.Message, rc.message) || !strings.Contains(ue.Message, rc.code) || ue.Next == "" {
					t.Fatalf("phase %v, error %+v; want failed with AWS's message and a next step", rec.Phase, ue)
				}
				if n, calls := f.srv.Applied(wt.op), f.srv.Calls(wt.op); n != 0 || calls != 1 {
					t.Errorf("%s applied %d times in %d calls, want 0 in 1", wt.op, n, calls)
				}
				if !f.lockFree(t, wt.scope) {
					t.Errorf("lock %s still held after the refusal", wt.scope)
				}
			})
		}
		t.Run(wt.name+"/throttled", func(t *testing.T) {
			f := newFixture(t, fixtureOptions{})
			wt.setup(t, f)
			f.srv.Inject(fakeaws.Fault{Op: wt.op, When: fakeaws.FaultBefore, Status: 400, Code: "ThrottlingException", Message: "Rate exceeded", Times: 2})
			rec, err := f.engine.Submit(ctxT(t), wt.req("throttled"))
			if err != nil || rec.Phase != ops.PhaseSucceeded {
				t.Fatalf("Submit: %v, phase %v", err, rec.Phase)
			}
			if n, calls := f.srv.Applied(wt.op), f.srv.Calls(wt.op); n != 1 || calls != 3 {
				t.Errorf("%s applied %d times in %d calls, want 1 in 3 (two throttled)", wt.op, n, calls)
			}
		})
	}
}

// When the answer was lost and the read-back cannot tell either (AWS's reads fail too), the request ends
// interrupted offering Stop and Take over, and its lock stays held until a person decides; Stop frees it.
func TestUnknownOutcomeHoldsTheLock(t *testing.T) {
	for _, wt := range writeTargets() {
		t.Run(wt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{transitionDelay: time.Second, recoveryDuration: time.Second})
			wt.setup(t, f)
			f.srv.Inject(fakeaws.Fault{Op: wt.op, When: fakeaws.FaultAfter, Status: 503, Code: "ServiceUnavailable", Message: "down", Times: -1})
			// The read-back: the token's re-send for EKS (struck by the fault above), DescribeCluster for HyperPod's
			// UpdateCluster and CreateCluster, ListClusterNodes for recovery, which fails from the moment the
			// read-back begins.
			eng := f.withOps(t, func(op ops.Operation) ops.Operation {
				return &opstest.HookedOp{Operation: op, BeforeVerify: func(*ops.Request) {
					if wt.readBack != "" {
						f.srv.Inject(fakeaws.Fault{Op: wt.readBack, When: fakeaws.FaultBefore, Status: 500,
							Code: "InternalFailure", Message: "reads down", Times: -1})
					}
				}}
			})
			rec, err := eng.Submit(ctxT(t), wt.req("unknown"))
			if err != nil || rec.Phase != ops.PhaseInterrupted {
				t.Fatalf("Submit: %v, phase %v; want interrupted", err, rec.Phase)
			}
			ue := rec.Errors[len(rec.Errors)-1]
			if !strings.Contains(ue.Next, "Take over") || !strings.Contains(ue.Next, "Stop") || !strings.Contains(ue.Message, "lost") {
				t.Errorf("error %+v does not say the answer was lost nor offer Take over and Stop", ue)
			}
			if n := f.srv.Applied(wt.op); n != 1 {
				t.Errorf("%s took effect %d times, want 1", wt.op, n)
			}
			if holder, held, err := f.store.Holder(ctxT(t), wt.scope); err != nil || !held || holder != "unknown" {
				t.Fatalf("lock %s: holder %q held %v (%v); want kept by the interrupted request", wt.scope, holder, held, err)
			}
			other := wt.req("next")
			f.srv.ClearFaults()
			if _, err := eng.Submit(ctxT(t), other); codeOf(err) != ops.CodeLocked {
				t.Errorf("a second change to the same scope: %v, want E_LOCKED while the outcome is unknown", err)
			}
			stopped, err := eng.Stop(ctxT(t), "unknown", human("U0LEAD"))
			if err != nil || stopped.Phase != ops.PhaseCancelled {
				t.Fatalf("Stop: %v, %+v", err, stopped)
			}
			if !f.lockFree(t, wt.scope) {
				t.Errorf("lock %s still held after Stop", wt.scope)
			}
		})
	}
}

// withOps is an engine on the fixture's store whose catalog holds the fixture's operations, each wrapped.
func (f *fixture) withOps(t *testing.T, wrap func(ops.Operation) ops.Operation) *engine.Engine {
	t.Helper()
	catalog := ops.NewCatalog()
	for _, name := range f.catalog.Names() {
		op, err := f.catalog.Lookup(name)
		must(t, err)
		if _, steps := op.(ops.Steps); steps {
			op = wrap(op)
		}
		catalog.Register(op)
	}
	return engine.New(catalog, f.store, f.store, nil, engine.Options{Replica: "test", Notifier: f.progress, LockTTL: 10 * time.Second})
}

// Resume of a request interrupted with an unknown outcome runs under the lock it kept (it is the request's own) and
// plans against what AWS shows by then: the change had been made, so nothing is sent and it ends succeeded.
func TestResumeAfterUnknownOutcome(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.srv.Inject(fakeaws.Fault{Op: fakeaws.OpSageMakerUpdateCluster, When: fakeaws.FaultAfter, Reset: true})
	eng := f.withOps(t, func(op ops.Operation) ops.Operation {
		return &opstest.HookedOp{Operation: op, BeforeVerify: func(*ops.Request) {
			f.srv.Inject(fakeaws.Fault{Op: fakeaws.OpSageMakerDescribeCluster, When: fakeaws.FaultBefore, Status: 500,
				Code: "InternalFailure", Message: "reads down", Times: -1})
		}}
	})
	rec, err := eng.Submit(ctxT(t), scaleRequest("resume-unknown", testCluster, "gpu", 4))
	if err != nil || rec.Phase != ops.PhaseInterrupted {
		t.Fatalf("Submit: %v, phase %v; want interrupted", err, rec.Phase)
	}
	f.srv.ClearFaults()
	opstest.Eventually(t, 5*time.Second, "the lost change to finish on AWS", func() bool {
		hp, _ := f.srv.HyperPodCluster("ml-hp")
		return hp.Status == fakeaws.StatusInService && hp.InstanceGroups[0].CurrentCount == 4
	})
	resumed, err := eng.Resume(ctxT(t), "resume-unknown", human("U0ALICE"))
	if err != nil || resumed.Phase != ops.PhaseSucceeded {
		t.Fatalf("Resume: %v, %+v; want succeeded", err, resumed)
	}
	if n := f.srv.Applied(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster took effect %d times, want 1", n)
	}
	if !f.lockFree(t, ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: "gpu"}) {
		t.Error("lock still held after the resumed request succeeded")
	}
}

// failingAccept is the real store, except that recording the accepted write fails as an unreachable Redis would.
type failingAccept struct{ *state.Store }

func (s failingAccept) Update(ctx context.Context, rec *ops.Record, expect int64, ev audit.Event) error {
	if strings.HasPrefix(ev.Note, "change accepted") {
		return fmt.Errorf("write the record: %w", ops.ErrStateUnavailable)
	}
	return s.Store.Update(ctx, rec, expect, ev)
}

// A write AWS accepted whose acceptance could not be recorded leaves the request for a replica to resume, and its
// scope locked meanwhile: nobody else may change the group while the record does not say what was sent.
func TestUnrecordedWriteKeepsTheLock(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	eng := engine.New(f.catalog, failingAccept{f.store}, f.store, nil, engine.Options{Replica: "test", LockTTL: 10 * time.Second})
	if _, err := eng.Submit(ctxT(t), scaleRequest("unrecorded", testCluster, "gpu", 4)); codeOf(err) != ops.CodeStateUnavailable {
		t.Fatalf("Submit: %v, want E_STATE_UNAVAILABLE", err)
	}
	scope := ops.LockScope{Cluster: testCluster, Kind: "capacity", Name: "gpu"}
	if holder, held, err := f.store.Holder(ctxT(t), scope); err != nil || !held || holder != "unrecorded" {
		t.Fatalf("lock %s: holder %q held %v (%v); want kept by the request", scope, holder, held, err)
	}
	if n := f.srv.Applied(fakeaws.OpSageMakerUpdateCluster); n != 1 {
		t.Errorf("UpdateCluster took effect %d times, want 1", n)
	}
}
