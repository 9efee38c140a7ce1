package main

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// cidrMiss is a managed type and family for which the type's --*-ip-cidrs list accepts no address
// of the host: the list rejects every candidate of that family (route sources too), so nodeaddr
// publishes no address of that type and family and removes the Node's. A typo or another subnet's
// CIDR would take the Node's InternalIP away with no other word.
type cidrMiss struct {
	Type   resolver.AddressType
	Family resolver.Family
	// CIDRs are the family's accepting rules; none when the list accepts only the other family,
	// which rejects every address of this one (no rule matches them).
	CIDRs []netip.Prefix
}

// cidrMisses checks each managed type's CIDR list, per family, against the host's addresses (the
// global unicast ones: loopback and link-local addresses are never node addresses). A list of
// ! rules alone accepts anything else and is not checked; a family with no accepting rule is
// checked only when the host has addresses of that family, which the list then rejects.
func (o *options) cidrMisses(addrs []resolver.LocalAddr) []cidrMiss {
	var out []cidrMiss
	for _, t := range o.managed() {
		rules := o.typePolicy[t].CIDRs
		if !slices.ContainsFunc(rules, func(r resolver.CIDRRule) bool { return !r.Exclude }) {
			continue
		}
		for _, f := range []resolver.Family{resolver.IPv4, resolver.IPv6} {
			var accepting []netip.Prefix
			for _, r := range rules {
				if !r.Exclude && resolver.FamilyOf(r.Prefix.Addr()) == f {
					accepting = append(accepting, r.Prefix)
				}
			}
			hostHas := func(a resolver.LocalAddr) bool { return a.IP.IsGlobalUnicast() && resolver.FamilyOf(a.IP) == f }
			inside := func(a resolver.LocalAddr) bool {
				return hostHas(a) && slices.ContainsFunc(accepting, func(p netip.Prefix) bool { return p.Contains(a.IP) })
			}
			if len(accepting) == 0 && !slices.ContainsFunc(addrs, hostHas) {
				continue // nothing of this family to lose
			}
			if !slices.ContainsFunc(addrs, inside) {
				out = append(out, cidrMiss{Type: t, Family: f, CIDRs: accepting})
			}
		}
	}
	return out
}

// message is the warning's text.
func (m cidrMiss) message() string {
	flag := "--" + flagPrefix(m.Type) + "-cidrs"
	if len(m.CIDRs) == 0 {
		return fmt.Sprintf("%s has no %s CIDR, so it rejects every %s address of this host: nodeaddr publishes no %s %s and removes the Node's; for a dual-stack Node add a CIDR of that family",
			flag, m.Family, m.Family, m.Family, m.Type)
	}
	return fmt.Sprintf("%s matches no %s address of this host: nodeaddr publishes no %s %s and removes the Node's until such an address appears",
		flag, m.Family, m.Family, m.Type)
}

// warnCIDRMisses logs a warning for each cidrMiss, read once at start from the host's addresses as
// the resolver reads them (k). An address that appears later is selected as usual; the warning
// only says that, as things are, the Node loses its address.
func (a *command) warnCIDRMisses(k resolver.Kernel) {
	o := a.opts
	if !slices.ContainsFunc(o.managed(), func(t resolver.AddressType) bool {
		return slices.ContainsFunc(o.typePolicy[t].CIDRs, func(r resolver.CIDRRule) bool { return !r.Exclude })
	}) {
		return // no CIDR filter: nothing to check, no need to list the addresses
	}
	addrs, err := k.Addresses()
	if err != nil {
		a.log.Warn("the host's addresses could not be read to check the --*-ip-cidrs filters", "err", err)
		return
	}
	for _, m := range o.cidrMisses(addrs) {
		attrs := []any{"type", m.Type, "family", m.Family.String()}
		if len(m.CIDRs) > 0 {
			cidrs := make([]string, len(m.CIDRs))
			for i, p := range m.CIDRs {
				cidrs[i] = p.String()
			}
			attrs = append(attrs, "cidrs", strings.Join(cidrs, ","))
		}
		a.log.Warn(m.message(), attrs...)
	}
}
