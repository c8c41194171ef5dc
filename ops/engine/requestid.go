package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/hyperops/hyperops/ops"
)

// NewRequestID returns a fresh request id for requests that came without one.
func NewRequestID() string { return "req-" + randomID(8) }

// ScopedRequestID is the id a request is stored under when the request id its client gave is already another
// initiator's: that id, a colon and 10 hex digits of the initiator's id. Request ids are each initiator's own (two
// agents may both send "r1"), while the stored id, the one people see, stays unique.
func ScopedRequestID(clientID, initiatorID string) string {
	sum := sha256.Sum256([]byte(initiatorID))
	return clientID + ":" + hex.EncodeToString(sum[:5])
}

// create stores rec under its request id, or under ScopedRequestID when that id is another initiator's. It returns
// the initiator's own record when there is one under either id (created=false): their scoped record is looked for
// first, so a resend never creates a second record once the other initiator's has expired.
func (e *Engine) create(ctx context.Context, rec *ops.Record) (*ops.Record, bool, error) {
	who := rec.Request.Initiator.ID
	scoped := rec.Clone()
	scoped.Request.ID = ScopedRequestID(rec.ID(), who)
	got, err := e.store.Get(ctx, scoped.ID())
	switch {
	case err == nil && got.Request.Initiator.ID == who:
		return got, false, nil
	case err != nil && !errors.Is(err, ops.ErrNotFound):
		return nil, false, err
	}
	stored, created, err := e.store.Create(ctx, rec)
	if err != nil || created || stored.Request.Initiator.ID == who {
		return stored, created, err
	}
	stored, created, err = e.store.Create(ctx, scoped)
	if err == nil && !created && stored.Request.Initiator.ID != who {
		return nil, false, ops.Errorf(ops.CodeIdempotencyConflict, "requestId", "use another requestId",
			"request id %s is taken", rec.ID())
	}
	return stored, created, err
}

func validateRequestID(id string) error {
	if len(id) > 128 {
		return ops.Errorf(ops.CodeInvalidArgument, "requestId", "use at most 128 characters", "requestId is %d characters long", len(id))
	}
	for _, r := range id {
		ok := r == '-' || r == '_' || r == '.' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return ops.Errorf(ops.CodeInvalidArgument, "requestId", "use letters, digits and - _ . : only", "requestId %q contains %q", id, r)
		}
	}
	return nil
}
