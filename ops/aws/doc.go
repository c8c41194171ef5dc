// Package aws holds the HyperOps operations that act on AWS: get-capacity, scale-capacity (SageMaker HyperPod
// instance groups and EKS managed node groups) and bootstrap-cluster (HyperPod CreateCluster on an existing EKS
// cluster), plus an ops.Pricer backed by the AWS Pricing API, with aws-sdk-go-v2. It never imports Slack, Redis,
// client-go, the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package aws
