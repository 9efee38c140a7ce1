package resolver

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
)

// defaultExcludeInterfaces are the container and CNI interfaces (anchored Go regular expressions).
var defaultExcludeInterfaces = []string{
	`cali.*`, `cilium_.*`, `flannel.*`, `cni.*`, `veth.*`, `docker.*`, `kube-ipvs.*`, `lo`,
}

// DefaultExcludeInterfaces returns the interface expressions --default-exclusions excludes (a copy).
func DefaultExcludeInterfaces() []string { return slices.Clone(defaultExcludeInterfaces) }

// CIDRRule is one entry of an ordered CIDR list: an address inside Prefix is accepted with the rule's
// index as its priority (0 is best), or rejected when Exclude (written "!CIDR").
type CIDRRule struct {
	Prefix  netip.Prefix
	Exclude bool
}

func (r CIDRRule) String() string {
	if r.Exclude {
		return "!" + r.Prefix.String()
	}
	return r.Prefix.String()
}

// TypePolicy is the selection policy of one managed address type.
type TypePolicy struct {
	// Interfaces adds the addresses of every matching interface to the candidates; when it is empty
	// but CIDRs has an accepting rule, every interface is a source (as Calico's cidrs= method).
	Interfaces []*regexp.Regexp
	// ExcludeInterfaces rejects any candidate on a matching interface, route sources included.
	ExcludeInterfaces []*regexp.Regexp
	// CIDRs is the ordered CIDR list; empty accepts everything at priority 0. An address no rule
	// matches is rejected when some rule accepts, and accepted (priority len(CIDRs)) when all rules
	// are exclusions: "!10.96.0.0/12" alone means "anything but the service network".
	CIDRs []CIDRRule
	// Sticky keeps the previous address of the type, per family, while the host still has it as a
	// usable address this policy accepts, even when it is no longer a route source: nodeaddr sets it
	// for InternalIP, the node's identity, so that a route failover that leaves the old address in
	// place does not renumber the Node, and an InternalIP someone else set is adopted when local.
	Sticky bool
	// GlobalOnly rejects every candidate that is not globally routable (nonGlobal: private-use,
	// shared, unique-local, link-local, loopback). nodeaddr sets it for the default ExternalIP
	// (--external-ip-scope=global): on a host behind NAT the Internet route's source is a private
	// address, the same on every VM of a Vagrant or VirtualBox setup, and reachable from nowhere.
	GlobalOnly bool
}

// enumerates reports whether the type takes candidates from interfaces, not only from routes.
func (tp TypePolicy) enumerates() bool {
	return len(tp.Interfaces) > 0 || slices.ContainsFunc(tp.CIDRs, func(r CIDRRule) bool { return !r.Exclude })
}

// Policy is the complete address selection policy (docs/configuration.md, "Selection policy").
type Policy struct {
	// Managed lists the types nodeaddr owns, even when nothing resolves for them.
	Managed []AddressType
	// Targets ask for route-to-target sources (at most one per type and family).
	Targets []Target
	// Types holds each type's interface and CIDR policy; a missing type uses route sources only.
	Types map[AddressType]TypePolicy
	// AllowSecondary accepts IPv4 secondary addresses (keepalived and kube-vip add VIPs as such).
	AllowSecondary bool
	// AllowVIPs turns off the VIP heuristics (see vipReason).
	AllowVIPs bool
	// ExcludeCIDRs rejects addresses inside any of these (the service CIDR, the Node's pod CIDRs).
	ExcludeCIDRs []netip.Prefix
	// ReportLocal fills State.Local with every address of the host (for provided-node-ip).
	ReportLocal bool
	// KeepExternalEqualInternal keeps an ExternalIP equal to an InternalIP (stage_equal.go).
	KeepExternalEqualInternal bool
}

// Reasons a candidate is rejected by the policy (beyond usable).
var (
	errSecondary     = errors.New("IPv4 secondary address (a VIP?); --allow-secondary accepts it")
	errVIPLoopback   = errors.New("host-prefix address on the loopback interface (a VIP)")
	errVIPLabel      = errors.New("address label differs from the interface name (a VIP alias)")
	errVIPHost       = errors.New("IPv4 /32 next to a wider address on the same interface (a VIP)")
	errExcludedIface = errors.New("interface excluded")
	errExcludedCIDR  = errors.New("inside an excluded network (service or pod CIDR)")
	errNoCIDRRule    = errors.New("matches no CIDR rule")
	errCIDRExcluded  = errors.New("excluded by a ! CIDR rule")
	errNotLocal      = errors.New("source is not assigned to a local interface")
)

// candidate is one address that could become a node address of some type.
type candidate struct {
	la    LocalAddr
	route bool // the source of the route toward a target
	prev  bool // the previous address, adopted by stickiness
	prio  int
}

// selectAddresses is the policy's pure decision. sources maps each target to its route source
// (missing: no route); prev is the state published last (stickiness).
//
// For each managed type and family the candidates are the route source (for a temporary IPv6
// source, stableOf) plus, when the type enumerates interfaces, the addresses of matching
// interfaces, each filtered by accept. The best priority wins; among equals the previous address
// stays, else the route source, else the first in kernel order, so a new address of equal priority
// never flips the Node.
func selectAddresses(p Policy, sources map[Target]netip.Addr, addrs []LocalAddr, prev State, rec *recorder) ([]Address, []Skip) {
	var out []Address
	var skips []Skip
	for _, t := range p.Managed {
		tp := p.Types[t]
		for _, f := range []Family{IPv4, IPv6} {
			tgt, hasTarget, route, fallbacks := p.routeCandidate(tp, t, f, sources, addrs, rec, &skips)
			var cands []candidate
			if route != nil {
				cands = append(cands, *route)
			}
			if tp.enumerates() {
				for _, la := range addrs {
					if FamilyOf(la.IP) != f || !matchAny(tp.Interfaces, la.Link, len(tp.Interfaces) == 0) {
						continue
					}
					if slices.ContainsFunc(cands, func(c candidate) bool { return c.la.IP == la.IP }) {
						continue
					}
					prio, err := p.accept(tp, la, addrs)
					if err != nil {
						rec.reject(Target{Type: t}, la.IP, la.Link, err)
						if la.Scope == scopeUniverse { // link-local and loopback are noise
							skips = append(skips, Skip{Target: Target{Type: t}, Source: la.IP,
								Reason: "interface " + la.Link + ": " + err.Error()})
						}
						continue
					}
					cands = append(cands, candidate{la: la, prio: prio})
				}
			}
			switch {
			case tp.Sticky:
				cands = p.adopt(tp, cands, prev, t, f, addrs, "", fallbacks)
			case f == IPv6 && len(cands) > 0 && cands[0].route:
				// Among one link's usable global IPv6 addresses the kernel's source choice is no
				// decision: it prefers the newest (RFC 6724 ties), so a router's make-before-break
				// renumbering would move the address at the announcement and again at the old
				// prefix's deprecation. The previous address on the route source's link stays
				// while usable; another link (a failover) still moves it.
				cands = p.adopt(tp, cands, prev, t, f, addrs, cands[0].la.Link, fallbacks)
			}
			c, ok := pick(cands, prev, t, f)
			if ok {
				out = append(out, Address{Type: t, IP: c.la.IP, Interface: c.la.Link, PrefixLen: c.la.PrefixLen})
			}
			rec.picked(t, f, tgt, hasTarget || tp.enumerates(), cands, c, prev)
		}
	}
	return out, skips
}

// stableOf returns the address a temporary IPv6 route source stands for: a usable, non-temporary
// address of the same prefix on the same interface, preferably the one the kernel derives the
// temporary addresses from (IFA_F_MANAGETEMPADDR). With use_tempaddr=2 the kernel prefers
// temporary addresses as sources (RFC 6724, rule 7) and replaces them daily.
func stableOf(addrs []LocalAddr, tmp LocalAddr) (LocalAddr, bool) {
	if !tmp.IP.Is6() || tmp.Flags&ifaTemporary == 0 || tmp.PrefixLen <= 0 || tmp.PrefixLen > 128 {
		return LocalAddr{}, false
	}
	pfx := netip.PrefixFrom(tmp.IP, tmp.PrefixLen).Masked()
	var found []LocalAddr
	for _, a := range addrs {
		if a.LinkIndex == tmp.LinkIndex && a.IP.Is6() && a.PrefixLen == tmp.PrefixLen && pfx.Contains(a.IP) &&
			a.Flags&ifaTemporary == 0 && usable(a) == nil {
			found = append(found, a)
		}
	}
	if a, ok := first(found, func(a LocalAddr) bool { return a.Flags&ifaManageTempAddr != 0 }); ok {
		return a, true
	}
	return first(found, func(LocalAddr) bool { return true })
}

// adopt adds the previous address of t and f to cands when the policy accepts it (TypePolicy.Sticky)
// and, when link is not empty, it is on that link. A previous address that is a fallback's route
// source (fallbacks: of the targets after the winning one) is not adopted: an InternalIP of 8.8.8.8's
// route, taken while the API server's addresses were unknown, gives way to the API server's route.
func (p Policy) adopt(tp TypePolicy, cands []candidate, prev State, t AddressType, f Family, addrs []LocalAddr, link string, fallbacks []netip.Addr) []candidate {
	old, ok := prev.Get(t, f)
	if !ok || slices.ContainsFunc(cands, func(c candidate) bool { return c.la.IP == old.IP }) || slices.Contains(fallbacks, old.IP) {
		return cands
	}
	la, found := find(addrs, old.IP)
	if !found || link != "" && la.Link != link {
		return cands
	}
	prio, err := p.accept(tp, la, addrs)
	if err != nil {
		return cands
	}
	return append(cands, candidate{la: la, prio: prio, prev: true})
}

// pick chooses among accepted candidates: best priority; the previous address stays among equals.
func pick(cands []candidate, prev State, t AddressType, f Family) (candidate, bool) {
	if len(cands) == 0 {
		return candidate{}, false
	}
	best := slices.MinFunc(cands, func(a, b candidate) int { return a.prio - b.prio }).prio
	// Among equals the previous address stays, else the first listed (the route source is first).
	i := slices.IndexFunc(cands, func(c candidate) bool { return c.prio == best })
	if old, ok := prev.Get(t, f); ok {
		kept := func(c candidate) bool { return c.la.IP == old.IP && c.prio == best }
		if j := slices.IndexFunc(cands, kept); j >= 0 {
			i = j
		}
	}
	return cands[i], true
}

// accept applies every filter to la and returns its priority, or why it is rejected.
func (p Policy) accept(tp TypePolicy, la LocalAddr, addrs []LocalAddr) (int, error) {
	if err := usable(la); err != nil {
		return 0, err
	}
	if err := scopeReason(tp, la.IP); err != nil {
		return 0, err
	}
	if la.IP.Is4() && la.Flags&ifaSecondary != 0 && !p.AllowSecondary {
		return 0, errSecondary
	}
	if !p.AllowVIPs {
		if err := vipReason(la, addrs); err != nil {
			return 0, err
		}
	}
	if matchAny(tp.ExcludeInterfaces, la.Link, false) {
		return 0, fmt.Errorf("%w: %s", errExcludedIface, la.Link)
	}
	for _, pfx := range p.ExcludeCIDRs {
		if pfx.Contains(la.IP) {
			return 0, fmt.Errorf("%w: %s", errExcludedCIDR, pfx)
		}
	}
	return cidrPriority(tp.CIDRs, la.IP)
}

// cidrPriority is the index of the first rule containing ip, or why ip is rejected.
func cidrPriority(rules []CIDRRule, ip netip.Addr) (int, error) {
	accepting := false
	for i, r := range rules {
		if r.Prefix.Contains(ip) {
			if r.Exclude {
				return 0, fmt.Errorf("%w: %s", errCIDRExcluded, r)
			}
			return i, nil
		}
		accepting = accepting || !r.Exclude
	}
	if accepting {
		return 0, errNoCIDRRule
	}
	return len(rules), nil
}

// vipReason recognises the addresses keepalived, kube-vip and similar tools float between hosts: a
// host prefix on the loopback, an IPv4 label other than the interface name, and an IPv4 /32 next to
// a wider IPv4 address on its interface. A lone /32 and IPv6 /128s (DHCPv6) stay usable.
func vipReason(la LocalAddr, addrs []LocalAddr) error {
	host := la.PrefixLen == la.IP.BitLen()
	switch {
	case host && la.Link == "lo":
		return errVIPLoopback
	case la.IP.Is4() && la.Label != "" && la.Link != "" && la.Label != la.Link:
		return errVIPLabel
	case host && la.IP.Is4() && slices.ContainsFunc(addrs, func(o LocalAddr) bool {
		return o.LinkIndex == la.LinkIndex && o.IP.Is4() && o.PrefixLen > 0 && o.PrefixLen < 32 &&
			o.Flags&ifaSecondary == 0
	}):
		return errVIPHost
	}
	return nil
}

func matchAny(res []*regexp.Regexp, s string, emptyMatches bool) bool {
	if len(res) == 0 {
		return emptyMatches
	}
	return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(s) })
}
