package soak

import (
	"testing"
	"time"
)

// The IPv6 faults do what they say, each variant once, with the Node converging after each: the
// router renumbers make-before-break (the old prefix deprecated, then gone), renumbers in a flash
// with the old addresses deleted and with them left to expire, the temporary addresses rotate, and
// the DHCPv6 lease changes. The schedule draws them at random; this drives every variant. The
// agent writes once for a move of the InternalIP by deprecation, never for a rotation, and at most
// twice when an address is deleted before its successor is usable (the removal grace may run out
// first: then the family's entry goes, and comes back).
func TestIPv6Faults(t *testing.T) {
	s := newSoak(t, 5) // an odd seed: stable-privacy addresses (the soak's even seeds have EUI-64)
	s.startRA()
	s.startDHCP6()
	s.settle("start", time.Now(), s.added)
	step := func(what string, lo, hi int) {
		t.Helper()
		before := s.writes()
		s.settle(what, time.Now(), 1)
		if n := s.writes() - before; n < lo || n > hi {
			t.Errorf("%s: %d agent writes, want %d to %d", what, n, lo, hi)
		}
	}

	if usable, deprecated, gone := s.renumberRA(time.Second, time.Second); !usable || !deprecated || !gone {
		t.Errorf("make-before-break: new prefix usable %v, old deprecated %v, old gone %v", usable, deprecated, gone)
	}
	step("after the make-before-break renumbering", 1, 1)
	if usable, gone := s.flashRA(true, time.Second); !usable || !gone {
		t.Errorf("flash, old addresses deleted: new prefix usable %v, old gone %v", usable, gone)
	}
	step("after the flash renumbering (old addresses deleted)", 1, 2)
	if usable, gone := s.flashRA(false, time.Second); !usable || !gone {
		t.Errorf("flash, old addresses expiring: new prefix usable %v, old gone %v", usable, gone)
	}
	step("after the flash renumbering (old addresses expiring)", 1, 1)
	if n := s.rotateTemporary(8, 2); n < 1 {
		t.Error("the temporary route source never rotated")
	}
	step("after the rotation", 0, 0)
	if !s.dhcp6.change(s.dhcp6.free(s.rng), 500*time.Millisecond) {
		t.Error("the new DHCPv6 lease was not bound")
	}
	step("after the DHCPv6 lease change", 1, 2)
	n, lag := s.timeline.stamps()
	s.rec.mu.Lock()
	readLate := s.rec.readLate
	s.rec.mu.Unlock()
	t.Logf("%d kernel samples stamped from the kernel's notifications, read up to %s after them; %d agent writes invariant 2 "+
		"would have reported with samples stamped by when their read began", n, lag.Round(time.Millisecond), readLate)
	s.report(t)
}

// writes is the number of the agent's successful Node writes the quiet periods have counted.
func (s *soak) writes() int {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return s.rec.writes
}
