package soak

import (
	"testing"
	"time"
)

// A replay of the overlap the soak's schedule can draw but rarely does: the agent is killed and
// restarted while the host has no usable address at all (a DHCP client between releasing one
// lease and binding the next on both uplinks). The restarted agent must not publish an empty
// InternalIP list before the removal grace has passed since the host lost its address.
func TestRestartWhileHostHasNoAddress(t *testing.T) {
	s := newSoak(t, 2)
	s.settle("start", time.Now(), 0)
	lost := time.Now()
	for _, u := range uplinks {
		if ip := s.primary(u); ip != "" {
			s.ip("addr", "del", ip+"/24", "dev", u.dev)
		}
	}
	s.rec.event("kernel", "every uplink address deleted")
	s.w.killAgent(500 * time.Millisecond)
	time.Sleep(grace - time.Since(lost) - time.Second) // measured window: the restart comes 1 s before the grace ends
	s.heal()
	s.settle("after the gap", time.Now(), 2)
	s.report(t)
}
