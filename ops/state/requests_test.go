package state_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
	"github.com/hyperops/hyperops/ops/state"
)

func TestCreateGetUpdate(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		rec := record("req-1", ops.PhaseReceived, "U1", epoch)
		if _, err := s.Get(ctx, "req-1"); !errors.Is(err, ops.ErrNotFound) {
			t.Fatalf("Get before Create: %v, want ErrNotFound", err)
		}
		stored, created, err := s.Create(ctx, rec)
		if err != nil || !created || stored.ID() != "req-1" {
			t.Fatalf("Create = %v, %v, %v", stored, created, err)
		}
		other := record("req-1", ops.PhaseReceived, "U2", epoch.Add(time.Minute))
		stored, created, err = s.Create(ctx, other)
		if err != nil || created {
			t.Fatalf("second Create: created=%v err=%v, want the existing record", created, err)
		}
		if stored.Fingerprint != rec.Fingerprint || stored.Request.Initiator.ID != "U1" {
			t.Fatalf("second Create returned %+v, want the first request", stored.Request)
		}

		next := rec.Clone()
		next.Phase = ops.PhasePlanned
		ev := audit.Event{RequestID: "req-1", From: ops.PhaseReceived, To: ops.PhasePlanned, At: epoch}
		steps := []struct {
			name    string
			expect  int64
			wantErr error
			wantVer int64
		}{
			{"current version", 1, nil, 2},
			{"stale version", 1, ops.ErrVersionConflict, 2},
			{"future version", 7, ops.ErrVersionConflict, 2},
			{"next version", 2, nil, 3},
		}
		for _, st := range steps {
			err := s.Update(ctx, next, st.expect, ev)
			if !errors.Is(err, st.wantErr) || (st.wantErr == nil && err != nil) {
				t.Fatalf("%s: Update error %v, want %v", st.name, err, st.wantErr)
			}
			got, err := s.Get(ctx, "req-1")
			if err != nil || got.Version != st.wantVer || got.Phase != ops.PhasePlanned {
				t.Fatalf("%s: Get = version %d phase %s err %v, want version %d planned", st.name, got.Version, got.Phase, err, st.wantVer)
			}
		}
		if err := s.Update(ctx, record("nope", ops.PhasePlanned, "U1", epoch), 1, ev); !errors.Is(err, ops.ErrNotFound) {
			t.Fatalf("Update of a missing record: %v, want ErrNotFound", err)
		}
		audit, err := s.Audit(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var tos []ops.Phase
		for _, a := range audit {
			tos = append(tos, a.To)
		}
		// Newest first: two successful updates and the creation; failed compare-and-sets leave no trace.
		if want := []ops.Phase{ops.PhasePlanned, ops.PhasePlanned, ops.PhaseReceived}; !slices.Equal(tos, want) {
			t.Fatalf("audit phases %v, want %v", tos, want)
		}
	})
}

func TestList(t *testing.T) {
	eachBackend(t, state.Options{}, func(t *testing.T, s *state.Store, _ redis.UniversalClient) {
		ctx := ctxT(t)
		// r00..r59: phases cycle awaiting / executing / succeeded, initiators U0 / U1, one minute apart.
		phases := []ops.Phase{ops.PhaseAwaitingApproval, ops.PhaseExecuting, ops.PhaseSucceeded}
		for i := range 60 {
			rec := record(fmt.Sprintf("r%02d", i), ops.PhaseReceived, fmt.Sprintf("U%d", i%2), time.Now().Add(time.Duration(i-60)*time.Minute))
			if _, _, err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			next := rec.Clone()
			next.Phase = phases[i%3]
			if err := s.Update(ctx, next, 1, audit.Event{RequestID: rec.ID(), To: next.Phase}); err != nil {
				t.Fatal(err)
			}
		}
		cases := []struct {
			name string
			q    engine.ListQuery
			want []string
		}{
			{"default limit, newest first", engine.ListQuery{}, ids(59, -1, 50)},
			{"limit", engine.ListQuery{Limit: 3}, []string{"r59", "r58", "r57"}},
			{"one phase", engine.ListQuery{Phases: []ops.Phase{ops.PhaseExecuting}, Limit: 3}, []string{"r58", "r55", "r52"}},
			{"two phases merged by time", engine.ListQuery{Phases: []ops.Phase{ops.PhaseAwaitingApproval, ops.PhaseExecuting}, Limit: 4},
				[]string{"r58", "r57", "r55", "r54"}},
			{"phase and initiator", engine.ListQuery{Phases: []ops.Phase{ops.PhaseSucceeded}, Initiator: "U1", Limit: 2}, []string{"r59", "r53"}},
			{"no phase left in old index", engine.ListQuery{Phases: []ops.Phase{ops.PhaseReceived}}, nil},
			{"everything of a phase", engine.ListQuery{Phases: []ops.Phase{ops.PhaseExecuting}, Limit: 100}, ids(58, -3, 20)},
		}
		for _, c := range cases {
			recs, err := s.List(ctx, c.q)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.ID())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: got %v, want %v", c.name, got, c.want)
			}
		}
	})
}

// ids lists "rNN" from start stepping by step, n of them.
func ids(start, step, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("r%02d", start+i*step))
	}
	return out
}
