package mcp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/hyperops/hyperops/approvals"
	"github.com/hyperops/hyperops/config"
	"github.com/hyperops/hyperops/handlers/agentapi"
	"github.com/hyperops/hyperops/ops"
)

// Agent is a registered agent as the MCP server knows it: who its requests are from, what it may ask, and the
// digest of its bearer token.
type Agent struct {
	// Initiator is the identity its requests are recorded under: the same as for its DMs.
	Initiator ops.Initiator
	// Operations are globs of the operations it may use.
	Operations []string
	// ReadOnly is its scope's readOnly: its mutating tools are not listed, and a call of one is E_OUT_OF_SCOPE.
	ReadOnly bool
	// scopeAt is where its scope is configured (agents[i].scope), for that refusal.
	scopeAt string
	digest  [sha256.Size]byte
}

// Name is the agent's configured name.
func (a Agent) Name() string { return a.Initiator.Name }

// Allows reports whether the agent may use an operation.
func (a Agent) Allows(operation string) bool {
	return agentapi.Allows(a.Operations, operation)
}

// lists reports whether the agent's tools include spec's: allowed, and not a change by a read-only agent.
func (a Agent) lists(spec ops.Spec) bool { return a.Allows(spec.Name) && !(a.ReadOnly && spec.Mutates) }

// AgentsFrom returns the configured agents that have an MCP token. Their initiator is the one their DMs use
// (config.Agent.InitiatorID), so a DM and an MCP call with the same requestId are one request.
func AgentsFrom(cfg *config.Config) ([]Agent, error) {
	var out []Agent
	for i, a := range cfg.Agents {
		if a.MCP.TokenSHA256 == "" {
			continue
		}
		b, err := hex.DecodeString(strings.ToLower(a.MCP.TokenSHA256))
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("agent %s: mcp.tokenSHA256 is not a hex SHA-256 digest", a.Name)
		}
		ag := Agent{Initiator: ops.Initiator{Kind: ops.Agent, ID: a.InitiatorID(), Name: a.Name}, Operations: a.Operations,
			ReadOnly: a.Scope.ReadOnly, scopeAt: approvals.ScopePath(i)}
		copy(ag.digest[:], b)
		out = append(out, ag)
	}
	return out, nil
}

// NewAgent builds an agent from its identity, operations and token digest (tests, tools).
func NewAgent(who ops.Initiator, operations []string, tokenSHA256 [sha256.Size]byte) Agent {
	return Agent{Initiator: who, Operations: operations, digest: tokenSHA256}
}

// match finds the agent whose token digest equals the token's, comparing every agent in constant time so the answer
// takes as long for a near miss as for a far one.
func match(agents []*agentServer, token string) *agentServer {
	sum := sha256.Sum256([]byte(token))
	var found *agentServer
	for _, a := range agents {
		if subtle.ConstantTimeCompare(sum[:], a.agent.digest[:]) == 1 {
			found = a
		}
	}
	return found
}
