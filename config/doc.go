// Package config is the HyperOps configuration: the types for every key of the YAML file, loading with ${ENV}
// expansion for secrets, strict decoding (unknown keys are errors with their line), documented defaults, and a
// validation that reports every problem at once. It also holds the lookups and guardrail checks other packages use.
package config
