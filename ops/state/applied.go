package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
)

// {p}:applied:<cluster>:<namespace>:<kind>:<name> holds "<fence>|<request id>": the request whose write to the object
// was accepted last. Update sets it in the same script that stores such a record (Plan.Applies names the object,
// Execution.WriteAccepted is set), only when the record's fence is not smaller than the one stored, so a late
// update of an older record never takes the index back. It lives as long as a record (RequestTTL); the record
// stays the source of truth.

// appliedKeys are the index keys a record sets: none until its write was accepted.
func (s *Store) appliedKeys(rec *ops.Record) []string {
	if rec.Plan == nil || rec.Execution == nil || rec.Execution.WriteAccepted.IsZero() {
		return nil
	}
	keys := make([]string, 0, len(rec.Plan.Applies))
	for _, o := range rec.Plan.Applies {
		keys = append(keys, s.appliedKey(o))
	}
	return keys
}

func (s *Store) appliedKey(o ops.ObjectRef) string {
	return s.key("applied", o.Cluster, o.Namespace, o.Kind, o.Name)
}

// LastApplied returns the record of the request whose write to obj was accepted last (it implements
// kube.AppliedRecords), or an error matching ops.ErrNotFound when no record says what HyperOps applied to it.
func (s *Store) LastApplied(ctx context.Context, obj ops.ObjectRef) (*ops.Record, error) {
	v, err := s.rdb.Get(ctx, s.appliedKey(obj)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("state: what was applied to %s %s/%s: %w", obj.Kind, obj.Namespace, obj.Name, ops.ErrNotFound)
	}
	if err != nil {
		return nil, unavailable("read what was applied to "+obj.Name, err)
	}
	_, id, ok := strings.Cut(v, "|")
	if !ok {
		return nil, fmt.Errorf("state: applied index of %s %s/%s holds %q: %w", obj.Kind, obj.Namespace, obj.Name, v, ops.ErrNotFound)
	}
	rec, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Plan == nil || !slices.Contains(rec.Plan.Applies, obj) {
		return nil, fmt.Errorf("state: request %s did not apply %s %s/%s: %w", id, obj.Kind, obj.Namespace, obj.Name, ops.ErrNotFound)
	}
	return rec, nil
}
