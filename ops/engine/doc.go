// Package engine drives every request through the one guarded lifecycle (validate → plan → approve → lock → execute):
// transitions, the gate with budgets, grants and break-glass, the queue executors, the outbox tellers and the sweep,
// with the ports it needs (Store, Locker, Queue, Outbox, Policy). It imports ops, config, clockwork and the stdlib.
package engine
