package resolver

import "time"

// debouncer is a trailing-edge debounce with a maximum delay: a burst of events is resolved Quiet
// after its last event, but never later than MaxDelay after its first, so continuous churn cannot
// starve an update. It holds no timer; the caller asks Due and arms its own.
type debouncer struct {
	Quiet, MaxDelay time.Duration
	first, last     time.Time
}

// Event records an event at now.
func (d *debouncer) Event(now time.Time) {
	if d.first.IsZero() {
		d.first = now
	}
	d.last = now
}

// Due returns when the pending burst should be resolved, and false when nothing is pending.
func (d *debouncer) Due() (time.Time, bool) {
	if d.first.IsZero() {
		return time.Time{}, false
	}
	due := d.last.Add(d.Quiet)
	if limit := d.first.Add(d.MaxDelay); d.MaxDelay > 0 && limit.Before(due) {
		due = limit
	}
	return due, true
}

// Reset clears the pending burst (after it was resolved).
func (d *debouncer) Reset() { d.first, d.last = time.Time{}, time.Time{} }

type slot struct {
	t AddressType
	f Family
}

// holdDown keeps a managed address that disappeared until nothing has resolved for its type and
// family for Grace. A replacement by another valid address takes effect at once; a DHCP client that
// flushes and re-adds, or a flapping link, never produces an empty or intermediate list.
type holdDown struct {
	Grace time.Duration
	held  map[slot]heldAddr
}

type heldAddr struct {
	addr Address
	// gone is when a resolution first missed addr (zero while it still resolves). The grace runs
	// from there, not from the last resolution that saw it: that one may be a whole resync interval
	// old, and a flush-and-re-add would then be published as a removal.
	gone time.Time
}

// Seed holds the Node's addresses as if this loop had published them: a restarted agent whose
// first resolution finds nothing (a restart in a DHCP client's gap between two leases) keeps them
// for the grace instead of removing them at once, as the agent before the restart would have.
// An address that resolves, or a replacement, takes effect at once as usual.
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
// earliest time a held address expires (zero when none is held past now).
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
	out := State{Managed: resolved.Managed, Addresses: append([]Address(nil), resolved.Addresses...), Local: resolved.Local}
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
		if !now.Before(expiry) || !managed(resolved.Managed, s.t) {
			delete(h.held, s)
			continue
		}
		out.Addresses = append(out.Addresses, ha.addr)
		if next.IsZero() || expiry.Before(next) {
			next = expiry
		}
	}
	return out.Normalize(), next
}

func managed(ts []AddressType, t AddressType) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
