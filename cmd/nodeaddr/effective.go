package main

import (
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// effective is the configuration in force for one address type and family, as the flags, their
// defaults and their cross-rules left it: startup logs one INFO line per effective value, so an
// operator reads what nodeaddr will do for, say, IPv6 ExternalIP without re-deriving the defaults.
type effective struct {
	Type   resolver.AddressType
	Family resolver.Family
	// Source is how the type and family is selected: "route" (targets), "interfaces",
	// "route+interfaces", or "none" when managed without a source of this family (the Node's entry
	// is removed) or not managed at all.
	Source string
	// Targets, Interfaces, Exclude and CIDRs are the values of this family ("" when none).
	Targets, Interfaces, Exclude, CIDRs string
	// Unmanaged, when not empty, says why nodeaddr leaves the Node's entries of this type and
	// family alone or removes them.
	Unmanaged string
}

// effectiveConfig lists the effective configuration per address type (InternalIP first) and family
// (IPv4 first).
func (o *options) effectiveConfig() []effective {
	var out []effective
	for _, t := range []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP} {
		for _, f := range []resolver.Family{resolver.IPv4, resolver.IPv6} {
			out = append(out, o.effectiveOf(t, f))
		}
	}
	return out
}

func (o *options) effectiveOf(t resolver.AddressType, f resolver.Family) effective {
	e := effective{Type: t, Family: f, Source: "none"}
	pre := flagPrefix(t)
	if !slices.Contains(o.managed(), t) {
		e.Unmanaged = "--" + pre + "-target=none: nodeaddr leaves this type's Node entries alone"
		return e
	}
	tp := o.typePolicy[t]
	var targets []string
	for _, tg := range o.targets() {
		if tg.Type == t && resolver.FamilyOf(tg.IP) == f {
			targets = append(targets, tg.IP.String())
		}
	}
	e.Targets = strings.Join(targets, ",")
	e.Interfaces = joinRegexps(tp.Interfaces)
	e.Exclude = joinRegexps(tp.ExcludeInterfaces)
	var cidrs []string
	for _, r := range tp.CIDRs {
		if resolver.FamilyOf(r.Prefix.Addr()) == f {
			cidrs = append(cidrs, r.String())
		}
	}
	e.CIDRs = strings.Join(cidrs, ",")
	switch route, ifaces := len(targets) > 0, o.enumerates(t); {
	case route && ifaces:
		e.Source = "route+interfaces"
	case route:
		e.Source = "route"
	case ifaces:
		e.Source = "interfaces"
	default:
		e.Unmanaged = resolver.NoTarget
	}
	return e
}

func joinRegexps(rs []*regexp.Regexp) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strings.TrimSuffix(strings.TrimPrefix(r.String(), "^(?:"), ")$") // as the user wrote it
	}
	return strings.Join(s, ",")
}

// attrs are the log line's attributes, with the stable keys type and family first.
func (e effective) attrs() []any {
	a := []any{"type", e.Type, "family", e.Family.String(), "source", e.Source}
	for _, kv := range [][2]string{{"targets", e.Targets}, {"interfaces", e.Interfaces},
		{"exclude_interfaces", e.Exclude}, {"cidrs", e.CIDRs}, {"unmanaged", e.Unmanaged}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	return a
}

// logEffectiveConfig logs one INFO line per address type and family (the settings that apply to all
// of them are on the "nodeaddr starting" line).
func (o *options) logEffectiveConfig(log *slog.Logger) {
	for _, e := range o.effectiveConfig() {
		log.Info("effective configuration", e.attrs()...)
	}
}
