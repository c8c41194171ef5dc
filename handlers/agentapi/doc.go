// Package agentapi is the agent contract, the same for an agent's JSON DM and an MCP tool call: strict decoding
// (one object, each key once, unknown and forbidden fields refused by name), the camelCase field names, the reply
// body agents branch on, and ops' next steps said in each agent surface's own terms.
//
// It knows neither Slack, Redis nor client-go: handlers posts the body in a DM thread, handlers/mcp returns it as
// a tool's structuredContent.
package agentapi
