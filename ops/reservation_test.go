package ops

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A reservation goes to Redis and agents with its time left in seconds, and comes back the same.
func TestCapacityReservationJSON(t *testing.T) {
	r := CapacityReservation{Group: "gpu", Plan: "tp", Status: "Active", EndTime: time.Date(2026, 12, 5, 17, 20, 0, 0, time.UTC),
		Left: 3*time.Hour + 20*time.Minute}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"leftSeconds":12000`) || !strings.Contains(string(b), `"endTime":"2026-12-05T17:20:00Z"`) {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var back CapacityReservation
	if err := json.Unmarshal(b, &back); err != nil || back != r {
		t.Errorf("unmarshal = %+v, %v; want %+v", back, err, r)
	}
	if got := r.Line(); got != "instance group gpu runs on training plan tp, which ends 2026-12-05 17:20 UTC (in 3 h 20 min)" {
		t.Errorf("Line() = %q", got)
	}
}
