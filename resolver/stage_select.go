package resolver

// Stage 1, selection: one snapshot of the kernel and the policy's choice (policy.go).

import (
	"fmt"
	"net/netip"
	"slices"
)

// Excluding returns p with cidrs (the Node's pod CIDRs) excluded too.
func (p Policy) Excluding(cidrs []netip.Prefix) Policy {
	if len(cidrs) > 0 {
		p.ExcludeCIDRs = append(slices.Clone(p.ExcludeCIDRs), cidrs...)
	}
	return p
}

// ResolvePolicy takes one snapshot of k and applies p; prev is the state published last (for
// stickiness). Addresses are listed only when something needs them.
func ResolvePolicy(k Kernel, p Policy, prev State) (State, []Skip, error) {
	st := State{Managed: p.Managed}
	sources := make(map[Target]netip.Addr, len(p.Targets))
	need := p.ReportLocal
	for _, t := range p.Targets {
		src, err := k.RouteSource(t.IP)
		if err != nil {
			return State{}, nil, fmt.Errorf("route to %s: %w", t.IP, err)
		}
		if src.IsValid() {
			sources[t] = src
			need = true
		}
	}
	for _, t := range p.Managed {
		tp := p.Types[t]
		need = need || tp.enumerates() || tp.Sticky && slices.ContainsFunc(prev.Addresses, func(a Address) bool { return a.Type == t })
	}
	var addrs []LocalAddr
	if need {
		var err error
		if addrs, err = k.Addresses(); err != nil {
			return State{}, nil, fmt.Errorf("list addresses: %w", err)
		}
	}
	rec := &recorder{}
	var skips []Skip
	st.Addresses, skips = selectAddresses(p, sources, addrs, prev, rec)
	st.Explanation, st.DADFailed = rec.lines, rec.dadFailed
	if p.ReportLocal {
		st.Local = make([]netip.Prefix, 0, len(addrs))
		for _, a := range addrs {
			if a.Flags&ifaDADFailed == 0 {
				st.Local = append(st.Local, localPrefix(a))
			}
		}
	}
	return st.Normalize(), skips, nil
}

// localPrefix is a's address with its prefix length (the host length when the kernel gave none).
func localPrefix(a LocalAddr) netip.Prefix {
	bits := a.PrefixLen
	if bits <= 0 || bits > a.IP.BitLen() {
		bits = a.IP.BitLen()
	}
	return netip.PrefixFrom(a.IP, bits)
}
