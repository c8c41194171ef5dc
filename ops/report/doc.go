// Package report builds the capacity report of a cluster: instance groups, GPUs allocated and free, pods waiting
// for GPUs, running workloads, estimated spend and the change since the previous report, from the Kubernetes API,
// the AWS view of instance groups, the pricing table and bounded samples; and draws its PNG chart.
package report
