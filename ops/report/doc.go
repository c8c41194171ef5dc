// Package report says what a capacity report of a cluster is — instance groups, GPUs allocated and free, pods
// waiting for GPUs, Kueue's queues, running workloads, estimated spend and the change since the previous report — and
// draws its PNG chart. It imports ops and the standard library (and the plotting library); never Redis or client-go,
// so the surfaces that render a report link neither. ops/report/collect builds a Report.
package report
