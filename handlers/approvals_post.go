package handlers

import "sync"

// awaitingPosts counts, per handler and request id, the submits under way that asked for the approvals-channel
// post, so the entry stays until the last of concurrent identical calls has returned: the call that creates the
// record is not always the one that registered the post.
var awaitingPosts struct {
	sync.Mutex
	n map[awaitingKey]int
}

type awaitingKey struct {
	h  *Handler
	id string
}

// PostWhenAwaiting makes this process post the plan message of request id to the approvals channel, with Stop and
// Take over, once the request waits for approval, exactly as for an agent's DM request. Surfaces other than Slack
// (MCP) call it before submitting and call the returned function when the submit has returned. It does nothing
// when no approvals channel is configured.
func (h *Handler) PostWhenAwaiting(id string) (done func()) {
	if h.cfg.ApprovalsChannel == "" {
		return func() {}
	}
	k := awaitingKey{h, id}
	awaitingPosts.Lock()
	defer awaitingPosts.Unlock()
	if awaitingPosts.n == nil {
		awaitingPosts.n = map[awaitingKey]int{}
	}
	if awaitingPosts.n[k] == 0 {
		h.pending.LoadOrStore(id, &pendingPost{channel: h.cfg.ApprovalsChannel, onlyWhenAwaiting: true})
	}
	awaitingPosts.n[k]++
	return func() {
		awaitingPosts.Lock()
		defer awaitingPosts.Unlock()
		if awaitingPosts.n[k]--; awaitingPosts.n[k] <= 0 {
			delete(awaitingPosts.n, k)
			h.pending.Delete(id)
		}
	}
}
