// Package readings lets one request's validation and planning read the world once: under With, Once keeps what an
// operation read by key (a DescribeCluster of one cluster, say), so Plan diffs against the state Validate checked;
// Without ends that, and an execution always reads afresh. It never imports Slack, Redis, client-go, the AWS SDK,
// the MCP SDK, `ops/engine`, `ops/state`, `approvals`, `handlers` or `bot`.
package readings
