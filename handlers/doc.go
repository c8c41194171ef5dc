// Package handlers is HyperOps' Slack-facing surface: the /hp slash grammar built from the operation catalog, agents'
// direct messages (read and answered by the contract in handlers/agentapi), button and modal interactions, and the
// Block Kit rendering of the engine's records; it talks to the engine and to Slack through interfaces. It never
// imports Redis, client-go, the AWS SDK, the MCP SDK, `ops/state`, `ops/kube`, `ops/aws`, `ops/report/collect` or `bot`.
package handlers
