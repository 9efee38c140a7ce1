package metrics

import (
	"net/netip"
	"time"
)

// The pools' admission: a new connection takes a slot, or evicts the one that has held it longest.

// admitSilent counts a new connection, closing others as connBudget says.
func (b *connBudget) admitSilent(c *budgetConn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.silentBy[c.source] >= b.perSource {
		b.evict(b.longest(func(o *budgetConn) bool { return o.silent && o.source == c.source }), closedSourceBudget)
	}
	if b.silent >= b.maxSilent {
		b.evict(b.pickFull(func(o *budgetConn) bool { return o.silent }), closedListenerFull)
	}
	b.conns[c] = struct{}{}
	b.count(c, 1)
	if b.firstRequest > 0 {
		c.timeout = time.AfterFunc(b.firstRequest, func() { b.expire(c) })
	}
}

// admitServed moves c from the silent connections to those handed to net/http, closing a waiting
// one if they are full, or waiting until a busy one ends; false: c was closed meanwhile.
func (b *connBudget) admitServed(c *budgetConn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		select {
		case <-b.done:
			return false
		default:
		}
		if c.gone {
			return false
		}
		waiting := func(o *budgetConn) bool { return !o.silent && !o.active }
		switch {
		case b.servedBy[c.source] >= b.perSource:
			if v := b.longest(func(o *budgetConn) bool { return waiting(o) && o.source == c.source }); v != nil {
				b.evict(v, closedSourceBudget)
				continue
			}
		case b.served >= b.max:
			if v := b.pickFull(func(o *budgetConn) bool { return !o.silent }); v != nil {
				b.evict(v, closedListenerFull)
				continue
			}
		default:
			b.count(c, -1)
			c.silent, c.since = false, time.Now()
			b.count(c, 1)
			return true
		}
		b.freed.Wait()
	}
}

// evict stops counting c and closes it (mu held); the goroutine reading it fails and ends.
func (b *connBudget) evict(c *budgetConn, reason string) {
	if c == nil {
		return
	}
	b.forget(c)
	b.closed(reason)
	c.Conn.Close()
}

// longest returns the connection match accepts that has been in its state the longest (mu held).
func (b *connBudget) longest(match func(*budgetConn) bool) *budgetConn {
	return oldest(b.conns, func(o *budgetConn, _ struct{}) (time.Time, bool) { return o.since, match(o) })
}

// pickFull returns the connection to close when the pool inPool selects is full (mu held): the
// longest-waiting one of the source holding the most connections in the pool among those with
// one waiting; nil when every one is busy.
func (b *connBudget) pickFull(inPool func(*budgetConn) bool) *budgetConn {
	var from netip.Prefix
	most := 0
	for o := range b.conns {
		if !inPool(o) || o.active {
			continue
		}
		if _, by := b.pool(o.silent); by[o.source] > most {
			from, most = o.source, by[o.source]
		}
	}
	if most == 0 {
		return nil
	}
	return b.longest(func(o *budgetConn) bool { return inPool(o) && !o.active && o.source == from })
}

// sourceOfRemote is the budget's unit of source for an "ip:port" address: an IPv4 address, or the
// /64 of an IPv6 address (one host usually holds a whole /64, and picking a new address from it is free).
func sourceOfRemote(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}
