package chaos

import (
	"testing"
	"time"
)

// The lease model accepts a worker listed ACTIVE through its leases and INACTIVE once the
// last acknowledged heartbeat's lease may have run out, and refuses a worker listed INACTIVE
// within the lease of a heartbeat acknowledged before the listing, or listed with a heartbeat
// older, by more than the lag, than one acknowledged before it.
func TestLeaseModel(t *testing.T) {
	lease, lag := 5*time.Second, 10*time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := time.Millisecond
	cases := []struct {
		name  string
		build func(h *leaseHistory)
		ok    bool
	}{
		{"active through the lease, inactive after it", func(h *leaseHistory) {
			h.heartbeat([]string{"w"}, at(0), 10*ms)
			h.read("w", at(time.Second), at(time.Second+5*ms), false, at(5*ms))
			h.read("w", at(lease+time.Second), at(lease+time.Second+5*ms), true, at(5*ms))
		}, true},
		{"inactive within the lease of an acknowledged heartbeat", func(h *leaseHistory) {
			h.heartbeat([]string{"w"}, at(0), 10*ms)
			h.heartbeat([]string{"w"}, at(time.Second), 10*ms)
			h.read("w", at(3*time.Second), at(3*time.Second+5*ms), true, at(time.Second+5*ms))
		}, false},
		{"inactive while a heartbeat is in flight: it may come after", func(h *leaseHistory) {
			h.heartbeat([]string{"w"}, at(0), 10*ms)
			h.heartbeat([]string{"w"}, at(lease+time.Second), 3*time.Second)
			h.read("w", at(lease+2*time.Second), at(lease+2*time.Second+5*ms), true, at(5*ms))
		}, true},
		{"a listing shows the last written heartbeat, within the lag", func(h *leaseHistory) {
			h.heartbeat([]string{"w"}, at(0), 10*ms)
			h.heartbeat([]string{"w"}, at(time.Second), 10*ms)
			h.read("w", at(2*time.Second), at(2*time.Second+5*ms), false, at(5*ms))
		}, true},
		{"an acknowledged heartbeat lost beyond the lag", func(h *leaseHistory) {
			h.heartbeat([]string{"w"}, at(0), 10*ms)
			h.heartbeat([]string{"w"}, at(lag+time.Second), 10*ms)
			h.read("w", at(lag+2*time.Second), at(lag+2*time.Second+5*ms), false, at(5*ms))
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h leaseHistory
			c.build(&h)
			_, bad := h.check(lease, lag, 10*time.Second)
			if c.ok && len(bad) > 0 {
				t.Fatalf("a legal history was refused: %v", bad)
			}
			if !c.ok && len(bad) == 0 {
				t.Fatal("an illegal history was accepted")
			}
			t.Log(bad)
		})
	}
}
