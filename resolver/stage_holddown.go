package resolver

// Stage 3, hold-down: an address that stopped resolving is kept for the removal grace.

import (
	"slices"
	"time"
)

type slot struct {
	t AddressType
	f Family
}

// holdDown keeps a managed address that disappeared until nothing has resolved for its type and
// family for Grace; a replacement by another valid address takes effect at once.
type holdDown struct {
	Grace time.Duration
	held  map[slot]heldAddr
}

type heldAddr struct {
	addr Address
	// gone is when a resolution first missed addr (zero while it still resolves): the grace runs
	// from there, not from the last resolution that saw it, which may be a resync interval old.
	gone time.Time
}

// Seed holds the Node's addresses as if this loop had published them: a restarted agent whose
// first resolution finds nothing (a DHCP client's gap between two leases) keeps them for the grace.
func (h *holdDown) Seed(addrs []Address) {
	if h.held == nil {
		h.held = make(map[slot]heldAddr)
	}
	for _, a := range addrs {
		s := slot{a.Type, FamilyOf(a.IP)}
		if _, ok := h.held[s]; !ok {
			h.held[s] = heldAddr{addr: a}
		}
	}
}

// Apply merges a fresh resolution into the held state at now. It returns the effective state and the
// earliest time a held address expires (zero: none).
func (h *holdDown) Apply(now time.Time, resolved State) (State, time.Time) {
	if h.held == nil {
		h.held = make(map[slot]heldAddr)
	}
	fresh := make(map[slot]bool, len(resolved.Addresses))
	for _, a := range resolved.Addresses {
		s := slot{a.Type, FamilyOf(a.IP)}
		fresh[s] = true
		h.held[s] = heldAddr{addr: a}
	}
	out := resolved
	out.Addresses = slices.Clone(resolved.Addresses)
	w := resolved.why()
	var next time.Time
	for s, ha := range h.held {
		if fresh[s] {
			continue
		}
		if ha.gone.IsZero() {
			ha.gone = now
			h.held[s] = ha
		}
		expiry := ha.gone.Add(h.Grace)
		if !now.Before(expiry) || !slices.Contains(resolved.Managed, s.t) {
			delete(h.held, s)
			continue
		}
		out.Addresses = append(out.Addresses, ha.addr)
		w = w.chose(ha.addr, "previous address", "held during removal grace (the loop's hold-down)")
		if next.IsZero() || expiry.Before(next) {
			next = expiry
		}
	}
	out.Explanation = w
	return out.Normalize(), next
}
