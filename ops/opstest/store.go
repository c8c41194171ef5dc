package opstest

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/audit"
	"github.com/hyperops/hyperops/ops/engine"
)

// Store is an in-memory engine.Store: records by id, Update a compare-and-set on Version that appends to the audit
// trail in the same step, List newest first. It keeps copies, so a caller's record never changes what is stored.
type Store struct {
	mu      sync.Mutex
	records map[string]*ops.Record
	audit   []audit.Event
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{records: map[string]*ops.Record{}} }

// Create stores rec unless its id is taken; it returns the stored record and whether this call created it.
func (s *Store) Create(_ context.Context, rec *ops.Record) (*ops.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, ok := s.records[rec.ID()]; ok {
		return got.Clone(), false, nil
	}
	s.records[rec.ID()] = rec.Clone()
	return rec.Clone(), true, nil
}

// Get returns a copy of the record, or ops.ErrNotFound.
func (s *Store) Get(_ context.Context, id string) (*ops.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, ok := s.records[id]; ok {
		return got.Clone(), nil
	}
	return nil, ops.ErrNotFound
}

// Update stores rec if the stored version is expect (ops.ErrVersionConflict otherwise) and appends ev.
func (s *Store) Update(_ context.Context, rec *ops.Record, expect int64, ev audit.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.records[rec.ID()]
	if !ok {
		return ops.ErrNotFound
	}
	if got.Version != expect {
		return ops.ErrVersionConflict
	}
	rec.Version = expect + 1
	s.records[rec.ID()] = rec.Clone()
	s.audit = append(s.audit, ev)
	return nil
}

// List returns the records that pass q, newest first (by id among records created at the same instant).
func (s *Store) List(_ context.Context, q engine.ListQuery) ([]*ops.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*ops.Record
	for _, r := range s.records {
		if (len(q.Phases) == 0 || slices.Contains(q.Phases, r.Phase)) && (q.Initiator == "" || q.Initiator == r.Request.Initiator.ID) {
			out = append(out, r.Clone())
		}
	}
	slices.SortFunc(out, func(a, b *ops.Record) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID(), b.ID()))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// Audit returns the audit trail so far, oldest first.
func (s *Store) Audit() []audit.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.audit)
}
