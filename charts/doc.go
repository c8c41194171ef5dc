// Package charts holds the tests of the HyperOps Helm chart (charts/hyperops): they render it with the Helm Go SDK,
// decode every manifest as its Kubernetes kind, check the config it carries with config.Parse, the values schema and
// the RBAC it grants, cross-check the Slack app manifest's scopes, and apply it to a real API server.
package charts
