package handlers

import "sync"

// shownPlansMax bounds how many requests' plan messages a replica remembers (about 100 bytes each): past it the
// oldest is forgotten, which costs that request one chat.update that changes nothing.
const shownPlansMax = 10000

// shownPlans remembers, per request, the last version its plan message was updated to and a digest of what it
// shows, so a Settle with nothing new does not call Slack. It is bounded: at most max requests, the oldest
// forgotten first, and a finished request is forgotten once settled.
type shownPlans struct {
	mu    sync.Mutex
	max   int
	m     map[string]shownPlan
	order []string // ids in the order first remembered; may hold forgotten ids
}

type shownPlan struct {
	version int64
	content string
}

func newShownPlans(max int) *shownPlans { return &shownPlans{max: max, m: map[string]shownPlan{}} }

func (s *shownPlans) get(id string) (version int64, content string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.m[id]
	return p.version, p.content, ok
}

func (s *shownPlans) put(id string, version int64, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; !ok {
		s.order = append(s.order, id)
	}
	s.m[id] = shownPlan{version: version, content: content}
	for len(s.m) > s.max {
		oldest := s.order[0]
		s.order = s.order[1:]
		delete(s.m, oldest)
	}
	if len(s.order) > 2*s.max {
		s.compact()
	}
}

func (s *shownPlans) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	if len(s.order) > 2*s.max {
		s.compact()
	}
}

// compact drops forgotten ids from the order.
func (s *shownPlans) compact() {
	kept := make([]string, 0, len(s.m))
	for _, id := range s.order {
		if _, ok := s.m[id]; ok {
			kept = append(kept, id)
		}
	}
	s.order = kept
}

func (s *shownPlans) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
