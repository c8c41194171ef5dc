package ops

// Undo is how to put back what a request replaced: the operation and parameters of the request that restores
// it, made by the operation's Plan from the state it observed (an inference server's previous applied spec, a
// group's previous count), or why it cannot be put back.
type Undo struct {
	Operation string `json:"operation,omitempty"`
	Params    Params `json:"params,omitempty"`
	// Restores says in words what a revert puts back ("the image ghcr.io/acme/srv:v1 that req-… applied").
	Restores string `json:"restores,omitempty"`
	// Refusal says why the request cannot be reverted, Next what to do instead; Operation is empty then.
	Refusal string `json:"refusal,omitempty"`
	Next    string `json:"next,omitempty"`
}

// Revertible reports whether a revert can be asked from u.
func (u *Undo) Revertible() bool { return u != nil && u.Operation != "" && u.Refusal == "" }

// Revertible reports whether a revert of the record can be asked now: it succeeded, its plan recorded how to put
// back what it replaced, and no revert of it is under way or done (RevertedBy names only ones that ended without
// a change then; the engine checks that again).
func (r *Record) Revertible() bool {
	return r.Phase == PhaseSucceeded && !r.Request.DryRun && r.Plan != nil && r.Plan.Undo.Revertible() && r.RevertedBy == ""
}
