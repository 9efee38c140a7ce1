package resolver

import "time"

// debouncer is a trailing-edge debounce with a maximum delay: a burst of events is resolved Quiet
// after its last event, but never later than MaxDelay after its first, so continuous churn cannot
// starve an update. A link event (carrier or operational state, an interface appearing) holds the
// burst LinkQuiet after it instead, as bonding's updelay/downdelay hold a carrier change but not
// an address change: a DHCP renewal or a renumbering is published after a short quiet, while a
// flapping carrier, whose every phase would move the route to another uplink, is not published at
// all. It holds no timer; the caller asks Due and arms its own.
type debouncer struct {
	Quiet, LinkQuiet, MaxDelay time.Duration
	first, last, lastLink      time.Time
}

// Event records an event at now; link says the burst had a link event since the last one.
func (d *debouncer) Event(now time.Time, link bool) {
	if d.first.IsZero() {
		d.first = now
	}
	d.last = now
	if link {
		d.lastLink = now
	}
}

// Due returns when the pending burst should be resolved, and false when nothing is pending.
func (d *debouncer) Due() (time.Time, bool) {
	due, _, ok := d.due()
	return due, ok
}

// Wait says why the pending burst waits until Due: the quiet that applies, or the cap.
func (d *debouncer) Wait() string {
	_, why, _ := d.due()
	return why
}

func (d *debouncer) due() (time.Time, string, bool) {
	if d.first.IsZero() {
		return time.Time{}, "", false
	}
	due, why := d.last.Add(d.Quiet), "quiet "+d.Quiet.String()+" after the last address, route or rule event"
	if !d.lastLink.IsZero() {
		if hold := d.lastLink.Add(d.LinkQuiet); hold.After(due) {
			due, why = hold, "link hold "+d.LinkQuiet.String()+" after the last link event"
		}
	}
	if limit := d.first.Add(d.MaxDelay); d.MaxDelay > 0 && limit.Before(due) {
		due, why = limit, "max delay "+d.MaxDelay.String()+" after the burst's first event"
	}
	return due, why, true
}

// Reset clears the pending burst (after it was resolved).
func (d *debouncer) Reset() { d.first, d.last, d.lastLink = time.Time{}, time.Time{}, time.Time{} }

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
