package resolver

// Stage 1, selection: one snapshot of the kernel and the policy's choice (policy.go).

import (
	"errors"
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
		if t.placeholder() {
			continue
		}
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
				st.Local = append(st.Local, Address{IP: a.IP, PrefixLen: a.PrefixLen}.Prefix())
			}
		}
	}
	return st.Normalize(), skips, nil
}

// routeCandidate tries t's targets of family f in order and returns the first one whose route
// source the policy accepts, as a candidate (nil: none), and the route sources of the targets after
// it (adopt). hasTarget reports whether t has a target of family f at all.
func (p Policy) routeCandidate(tp TypePolicy, t AddressType, f Family, sources map[Target]netip.Addr, addrs []LocalAddr,
	rec *recorder, skips *[]Skip) (won Target, hasTarget bool, route *candidate, fallbacks []netip.Addr) {
	for _, tgt := range p.Targets {
		if tgt.Type != t || FamilyOf(tgt.IP) != f {
			continue
		}
		hasTarget = true
		if route != nil {
			if src, ok := sources[tgt]; ok && src.IsValid() {
				fallbacks = append(fallbacks, src)
			}
			continue
		}
		if c, ok := p.targetCandidate(tp, tgt, sources, addrs, rec, skips); ok {
			won, route = tgt, &c
		}
	}
	if route == nil {
		// The explanation names the first target when none gave an address.
		won, _ = first(p.Targets, func(x Target) bool { return x.Type == t && FamilyOf(x.IP) == f })
	}
	return won, hasTarget, route, fallbacks
}

// targetCandidate is tgt's route source as a candidate, if the policy accepts it; else it records why not.
func (p Policy) targetCandidate(tp TypePolicy, tgt Target, sources map[Target]netip.Addr, addrs []LocalAddr,
	rec *recorder, skips *[]Skip) (candidate, bool) {
	if tgt.placeholder() {
		*skips = append(*skips, Skip{Target: tgt, Reason: apiServerUnknown})
		rec.reject(tgt, netip.Addr{}, "", errAPIServerUnknown)
		return candidate{}, false
	}
	src, ok := sources[tgt]
	if !ok || !src.IsValid() {
		*skips = append(*skips, Skip{Target: tgt, Reason: "no route"})
		rec.reject(tgt, netip.Addr{}, "", errNoRoute)
		return candidate{}, false
	}
	la, found := find(addrs, src)
	if !found {
		*skips = append(*skips, Skip{Target: tgt, Source: src, Reason: errNotLocal.Error()})
		rec.reject(tgt, src, "", errNotLocal)
		return candidate{}, false
	}
	if st, ok := stableOf(addrs, la); ok {
		rec.reject(tgt, src, la.Link, fmt.Errorf("%w: stands for %s, the stable address of its prefix", errTemporary, st.IP))
		la = st
	}
	prio, err := p.accept(tp, la, addrs)
	if err != nil {
		*skips = append(*skips, Skip{Target: tgt, Source: la.IP, Reason: err.Error()})
		rec.reject(tgt, la.IP, la.Link, err)
		return candidate{}, false
	}
	return candidate{la: la, route: true, prio: prio}, true
}

// The kernel's address flags and route scope (linux/if_addr.h, rtnetlink.h), spelled here so the
// resolver builds on every platform; TestKernelFlagsMatchLinux checks them against x/sys/unix.
const (
	scopeUniverse = 0 // RT_SCOPE_UNIVERSE

	ifaSecondary      = 0x01  // IFA_F_SECONDARY
	ifaTemporary      = 0x01  // IFA_F_TEMPORARY: the same bit, named for IPv6
	ifaOptimistic     = 0x04  // IFA_F_OPTIMISTIC
	ifaDADFailed      = 0x08  // IFA_F_DADFAILED
	ifaDeprecated     = 0x20  // IFA_F_DEPRECATED
	ifaTentative      = 0x40  // IFA_F_TENTATIVE
	ifaManageTempAddr = 0x100 // IFA_F_MANAGETEMPADDR
)

// LocalAddr is an address assigned to a local interface, as the kernel reports it.
type LocalAddr struct {
	IP        netip.Addr
	LinkIndex int
	Link      string
	Flags     int // IFA_F_* flags
	Scope     int // RT_SCOPE_*
	// PreferredLft is the preferred lifetime in seconds; 0 means deprecated, 0xFFFFFFFF forever.
	PreferredLft int
	// PrefixLen is the address's prefix length (32 or 128 for a host address); 0 when unknown.
	PrefixLen int
	// Label is the IPv4 address label (IFA_LABEL): the interface name unless an alias ("eth0:vip").
	Label string
}

// Kernel is the snapshot source a resolution reads (Netlink; a table in tests).
type Kernel interface {
	// RouteSource returns the source address the kernel would use toward dst; zero: no route.
	RouteSource(dst netip.Addr) (netip.Addr, error)
	// Addresses lists the addresses of every local interface.
	Addresses() ([]LocalAddr, error)
}

// Reasons an address is not usable as a node address.
var (
	errTentative  = errors.New("tentative (duplicate address detection running)")
	errDADFailed  = errors.New("duplicate address detection failed")
	errDeprecated = errors.New("deprecated")
	errOptimistic = errors.New("optimistic (duplicate address detection running)")
	errTemporary  = errors.New("temporary (IPv6 privacy) address")
	errScope      = errors.New("not of universe scope")
)

// usable returns nil when a can be published as a node address, else why not (the kernel's flags).
func usable(a LocalAddr) error {
	switch {
	case a.Scope != scopeUniverse:
		return errScope
	case a.Flags&ifaDADFailed != 0:
		return errDADFailed
	case a.Flags&ifaTentative != 0:
		return errTentative
	case a.Flags&ifaOptimistic != 0:
		return errOptimistic
	case a.Flags&ifaDeprecated != 0 || a.PreferredLft == 0:
		return errDeprecated
	case a.IP.Is6() && a.Flags&ifaTemporary != 0:
		// Bit 0x01 is IFA_F_TEMPORARY for IPv6 and IFA_F_SECONDARY for IPv4: only IPv6 is checked.
		return errTemporary
	}
	return nil
}

// Skip records a target whose route source could not be used, for logs.
type Skip struct {
	Target Target
	Source netip.Addr
	Reason string
}

func find(addrs []LocalAddr, ip netip.Addr) (LocalAddr, bool) {
	return first(addrs, func(a LocalAddr) bool { return a.IP == ip })
}
