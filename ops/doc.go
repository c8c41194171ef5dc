// Package ops is the HyperOps vocabulary: a Request expressed by a person or an agent, the Plan that shows its diff,
// cost and risk, the Record of its lifecycle, errors with codes, and the Operation catalog that validates, plans and
// executes it. ops/engine drives requests through the lifecycle. It knows nothing of Slack or of the engine.
package ops
