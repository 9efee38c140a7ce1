package agentcmd

// The effective configuration, logged at start, and the warnings about --*-ip-cidrs lists that
// accept no address of the host.

import (
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// logEffectiveConfig logs one INFO line per address type and family: the configuration in force
// as the flags, their defaults and cross-rules left it, so an operator reads what nodeaddr will do
// for, say, IPv6 ExternalIP without re-deriving the defaults (settings common to all are on the
// "nodeaddr starting" line).
func (o *selectionOptions) logEffectiveConfig(log *slog.Logger) {
	for _, t := range addressTypes {
		for _, f := range families {
			log.Info("effective configuration", o.effectiveAttrs(t, f)...)
		}
	}
}

// families are the address families, in the order logs name them.
var families = []resolver.Family{resolver.IPv4, resolver.IPv6}

// effectiveAttrs are the attributes of type t and family f. source is route (targets), interfaces,
// route+interfaces, or none (no source of this family, or not managed: unmanaged says which).
func (o *selectionOptions) effectiveAttrs(t resolver.AddressType, f resolver.Family) []any {
	a := []any{"type", t, "family", f.String()}
	if !slices.Contains(o.managed(), t) {
		return append(a, "source", "none",
			"unmanaged", "--"+flagPrefix(t)+"-target=none: nodeaddr leaves this type's Node entries alone")
	}
	tp := o.typePolicy[t]
	var targets []string
	for _, tg := range *o.targetsOf(t) {
		if resolver.FamilyOf(tg.IP) == f {
			targets = append(targets, tg.Label())
		}
	}
	var cidrs []resolver.CIDRRule
	for _, r := range tp.CIDRs {
		if resolver.FamilyOf(r.Prefix.Addr()) == f {
			cidrs = append(cidrs, r)
		}
	}
	source, unmanaged := "none", ""
	switch route, ifaces := len(targets) > 0, o.enumerates(t); {
	case route && ifaces:
		source = "route+interfaces"
	case route:
		source = "route"
	case ifaces:
		source = "interfaces"
	default:
		unmanaged = resolver.NoTarget
	}
	a = append(a, "source", source)
	if tp.GlobalOnly {
		a = append(a, "scope", "global")
	}
	for _, kv := range [][2]string{{"targets", strings.Join(targets, ",")}, {"interfaces", joinRegexps(tp.Interfaces)},
		{"exclude_interfaces", joinRegexps(tp.ExcludeInterfaces)}, {"cidrs", join(cidrs)},
		{"unmanaged", unmanaged}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	return a
}

// join is the comma-separated String of each x.
func join[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func joinRegexps(rs []*regexp.Regexp) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strings.TrimSuffix(strings.TrimPrefix(r.String(), "^(?:"), ")$") // as the user wrote it
	}
	return strings.Join(s, ",")
}

// cidrMiss is a managed type and family whose --*-ip-cidrs list accepts no address of the host, so
// the Node loses its address: a typo would take the InternalIP away with no other word.
type cidrMiss struct {
	Type   resolver.AddressType
	Family resolver.Family
	// CIDRs are the family's accepting rules; none when the list accepts only the other family,
	// which rejects every address of this one (no rule matches them).
	CIDRs []netip.Prefix
}

// cidrMisses checks each managed type's CIDR list, per family, against the host's global unicast
// addresses. A list of ! rules alone is not checked; a family with no accepting rule only when the
// host has addresses of that family, which the list then rejects.
func (o *selectionOptions) cidrMisses(addrs []resolver.LocalAddr) []cidrMiss {
	var out []cidrMiss
	for _, t := range o.managed() {
		rules := o.typePolicy[t].CIDRs
		if !accepts(rules) {
			continue
		}
		for _, f := range families {
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

// warnCIDRMisses logs a warning for each cidrMiss, from the host's addresses at start (k); one that
// appears later is selected as usual.
func (a *command) warnCIDRMisses(k resolver.Kernel) {
	o := a.opts
	hasCIDRs := func(t resolver.AddressType) bool { return accepts(o.typePolicy[t].CIDRs) }
	if !slices.ContainsFunc(o.managed(), hasCIDRs) {
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
			attrs = append(attrs, "cidrs", join(m.CIDRs))
		}
		a.log.Warn(m.message(), attrs...)
	}
}
