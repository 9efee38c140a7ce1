package resolver

// Stage 2, STUN discovery: the ExternalIP behind NAT replaces the route source.

import "net/netip"

// Discovery is a source of the ExternalIP that is on no interface (resolver/discovery: STUN
// behind NAT); the loop resolves again when C fires.
type Discovery interface {
	// Update gives each family's ExternalIP route source, covered or not.
	Update(sources map[Family]netip.Addr)
	// Mapped is the discovered address of family f, if there is a current one.
	Mapped(f Family) (netip.Addr, bool)
	// Covers reports whether family f is discovered now (some server can answer for it).
	Covers(f Family) bool
	C() <-chan struct{}
}

// WithDiscovery replaces each ExternalIP of s by the address discovery found for it from its route
// source. A family with no discovered address yet has no ExternalIP; a family no server covers
// (Covers, asked after Update) keeps its route source.
func WithDiscovery(d Discovery, s State) State {
	sources := map[Family]netip.Addr{}
	for _, a := range s.Addresses {
		if a.Type == ExternalIP {
			sources[FamilyOf(a.IP)] = a.IP
		}
	}
	// First: a synchronous Discovery (--run-once) probes here, so Mapped below has its answers.
	d.Update(sources)
	out := State{Managed: s.Managed, Addresses: make([]Address, 0, len(s.Addresses)), Local: s.Local, DADFailed: s.DADFailed}
	w := s.why()
	for _, a := range s.Addresses {
		f := FamilyOf(a.IP)
		if a.Type != ExternalIP || !d.Covers(f) {
			out.Addresses = append(out.Addresses, a)
			continue
		}
		m, ok := d.Mapped(f)
		if !ok {
			w.passOver(ExternalIP, f, "not published: STUN discovery has no mapped address yet")
			continue
		}
		// Not on an interface: no prefix length (annotations in CIDR form give a host prefix).
		n := Address{Type: ExternalIP, IP: m, Interface: a.Interface}
		out.Addresses = append(out.Addresses, n)
		w.passOver(ExternalIP, f, "replaced by "+m.String())
		w = w.chose(n, "STUN discovery", "chosen: the mapped address replaces the route source")
	}
	out.Explanation = w
	return out
}
