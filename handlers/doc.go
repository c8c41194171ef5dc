// Package handlers is HyperOps' Slack-facing surface: the /hp slash grammar built from the operation catalog, agents'
// direct messages (read and answered by the contract in handlers/agentapi), button and modal interactions, and the
// Block Kit rendering of the engine's records. It knows nothing of Redis or client-go: it talks to the engine and to Slack through interfaces.
package handlers
