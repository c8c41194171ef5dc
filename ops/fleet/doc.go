// Package fleet is what the Kubernetes and AWS halves of HyperOps tell each other about a cluster's nodes: a node
// group's nodes, readiness, GPUs and health (GroupNodes, HealthCounts, NodeHealth), HyperPod's view of an
// instance's health, and the pods on a node, each behind a small reader port (NodeCounter, InstanceHealthReader,
// NodePodReader) that one side implements and the other's operations and the report use. It never imports Slack,
// Redis, client-go, the AWS SDK, the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package fleet
