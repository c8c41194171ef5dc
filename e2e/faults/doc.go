// Package faults is the fault matrix: every kind of operation HyperOps runs, through the real bot (in process),
// against the faithful fakes and the local control plane, each with a fault on one of its wires (Redis, the
// Kubernetes API, AWS, Slack), checked at the fakes' state: one effective write at most, a truthful record, the
// lock held until the outcome is known, other requests undisturbed, every transition told once.
package faults
