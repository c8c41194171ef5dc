// Package ops is the HyperOps domain: a Request expressed by a person or an agent, the Plan that shows its diff,
// cost and risk, the Operation catalog that validates, plans and executes it, and the Engine that drives every
// request through one guarded lifecycle (validate → plan → approve → lock → execute). It knows nothing of Slack.
package ops
