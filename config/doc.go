// Package config is the HyperOps configuration: the types for every key of the YAML file, loading with ${ENV}
// expansion for secrets, strict decoding (unknown keys are errors with their line), documented defaults, and a
// validation that reports every problem at once; also the lookups and guardrail checks other packages use. It never
// imports Slack, Redis, client-go, the AWS SDK, the MCP SDK, `ops`, `approvals`, `handlers` or `bot`.
package config
