// Package agentapi is the agent contract, the same for an agent's JSON DM and an MCP tool call: strict decoding
// (one object, each key once, unknown and forbidden fields refused by name), the camelCase field names, the reply
// body agents branch on, and ops' next steps said in each agent surface's own terms. handlers posts the body in a DM
// thread, handlers/mcp returns it as a tool's structuredContent.
//
// It never imports Slack, Redis, client-go, the AWS SDK, the MCP SDK, `ops/engine`, `ops/state`, `handlers` or `bot`.
package agentapi
