// Package engine drives every request through the one guarded lifecycle (validate → plan → approve → lock → execute):
// transitions, the gate with budgets, grants and break-glass, queue executors, outbox tellers, the sweep and job
// watching, with the ports they need (Store, Locker, Queue, Outbox, Policy). It imports ops, config, clockwork, std.
package engine
