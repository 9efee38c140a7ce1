package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// buildPolicy turns the selection flags into o's selection policy, targets and annotations.
func (o *options) buildPolicy(fs *pflag.FlagSet, r *rawFlags) error {
	var err error
	o.typePolicy = map[resolver.AddressType]resolver.TypePolicy{}
	for _, t := range addressTypes {
		tf, pre := r.perType[t], flagPrefix(t)
		// InternalIP is the node's identity: it stays while the host has it (TypePolicy.Sticky).
		tp := resolver.TypePolicy{Sticky: t == resolver.InternalIP}
		if tp.Interfaces, err = interfaceRegexps(pre+"-interfaces", tf.interfaces); err != nil {
			return err
		}
		if tp.ExcludeInterfaces, err = interfaceRegexps(pre+"-exclude-interfaces", tf.exclude); err != nil {
			return err
		}
		if tp.CIDRs, err = resolver.ParseCIDRRules(tf.cidrs); err != nil {
			return usagef("--%s-cidrs: %v", pre, err)
		}
		if o.defaultExclusions {
			tp.ExcludeInterfaces = append(resolver.MustInterfaceRegexps(resolver.DefaultExcludeInterfaces()...), tp.ExcludeInterfaces...)
		}
		o.typePolicy[t] = tp
	}
	for _, t := range addressTypes {
		tf, ts := r.perType[t], o.targetsOf(t)
		if *ts, err = o.parseTargets(t, tf.target, tf.interfaces); err != nil {
			return err
		}
		o.warnings = append(o.warnings, o.oneFamilyWarning(t, tf.target, *ts)...)
	}
	switch r.externalEqual {
	case "drop":
	case "keep":
		o.keepExternalEqualInternal = true
	default:
		return usagef("--external-ip-equal-internal: %q is not drop or keep", r.externalEqual)
	}
	if o.serviceCIDRs, err = resolver.ParsePrefixes(r.serviceCIDR); err != nil {
		return usagef("--service-cidr: %v", err)
	}
	if err := o.checkManaged(fs, r); err != nil {
		return err
	}
	if o.annotations, err = vocab.ParseAnnotations(r.annotations, o.managed()); err != nil {
		return usagef("--annotations: %v", err)
	}
	if o.approvalRecord {
		if slices.ContainsFunc(o.annotations, func(a vocab.AnnotationSpec) bool { return a.Key == vocab.RecordAnnotation }) {
			return usagef("--annotations names %s, which --approval-record writes itself", vocab.RecordAnnotation)
		}
		o.annotations = append(o.annotations, vocab.RecordSpec())
	}
	return nil
}

// interfaceRegexps parses the value of the interface flag --name. Each expression must parse on its
// own before the resolver anchors it as ^(?:EXPR)$: the error then quotes what the user wrote, not
// the anchored form, and an expression that parses only once wrapped ("a)|(b", which would match
// any name starting with "a") is refused instead of matching unanchored.
func interfaceRegexps(name, value string) ([]*regexp.Regexp, error) {
	for expr := range strings.SplitSeq(value, ",") {
		expr = strings.TrimSpace(expr)
		if _, err := regexp.Compile(expr); err != nil {
			return nil, usagef("--%s: %q is not a valid regular expression: %s", name, expr, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	res, err := resolver.ParseInterfaceRegexps(value)
	if err != nil {
		return nil, usagef("--%s: %v", name, err)
	}
	return res, nil
}

// checkManaged refuses a command line that manages nothing, or selects for a type it does not manage.
func (o *options) checkManaged(fs *pflag.FlagSet, r *rawFlags) error {
	if len(o.managed()) == 0 {
		for _, name := range []string{"internal-ip-interfaces", "internal-ip-cidrs", "external-ip-interfaces", "external-ip-cidrs"} {
			if v := fs.Lookup(name).Value.String(); strings.Trim(v, ", ") != "" {
				return usagef("--%s: nothing to manage: no target, interface or accepting CIDR for InternalIP or ExternalIP", name)
			}
		}
		return usagef("--internal-ip-target and --external-ip-target are both none: nothing to manage")
	}
	for _, t := range addressTypes {
		if slices.Contains(o.managed(), t) {
			continue
		}
		// Set but empty is fine (a Helm chart passes every flag).
		for _, f := range []struct{ name, v string }{{"exclude-interfaces", r.perType[t].exclude}, {"cidrs", r.perType[t].cidrs}} {
			if strings.Trim(f.v, ", ") != "" {
				pre := flagPrefix(t)
				return usagef("--%s-%s: %s is not managed (it has no --%s-target, --%s-interfaces or accepting --%s-cidrs)",
					pre, f.name, t, pre, pre, pre)
			}
		}
	}
	return nil
}

// parseTargets reads a --*-ip-target value (after typePolicy is set): "none" leaves t unmanaged,
// empty means defaultTargets, except for an InternalIP with an interface source, which keeps
// selecting only from interfaces as before InternalIP had default targets.
func (o *options) parseTargets(t resolver.AddressType, value, interfaces string) ([]resolver.Target, error) {
	pre := flagPrefix(t)
	v := strings.TrimSpace(value)
	if strings.EqualFold(v, noTargets) {
		if o.enumerates(t) {
			what := "--" + pre + "-cidrs"
			if strings.Trim(interfaces, ", ") != "" {
				what = "--" + pre + "-interfaces"
			}
			return nil, usagef("--%s-target=none leaves %s unmanaged, but %s selects addresses for it: drop one of them", pre, t, what)
		}
		return nil, nil
	}
	if strings.Trim(v, ", ") == "" {
		if t == resolver.InternalIP && o.enumerates(t) {
			return nil, nil
		}
		v = defaultTargetsOf(t)
	}
	ts, err := resolver.ParseTargets(t, v)
	if err != nil {
		return nil, usagef("--%s-target: %v", pre, err)
	}
	return ts, nil
}

// managed lists the types nodeaddr owns: those with a target or an interface source.
func (o *options) managed() []resolver.AddressType {
	var m []resolver.AddressType
	for _, t := range addressTypes {
		if len(*o.targetsOf(t)) > 0 || o.enumerates(t) {
			m = append(m, t)
		}
	}
	return m
}

// targetsOf is the field holding type t's targets.
func (o *options) targetsOf(t resolver.AddressType) *[]resolver.Target {
	if t == resolver.InternalIP {
		return &o.internalTargets
	}
	return &o.externalTargets
}

func (o *options) enumerates(t resolver.AddressType) bool {
	return len(o.typePolicy[t].Interfaces) > 0 || accepts(o.typePolicy[t].CIDRs)
}

// accepts reports whether a CIDR list has an accepting (not !) rule.
func accepts(rules []resolver.CIDRRule) bool {
	return slices.ContainsFunc(rules, func(r resolver.CIDRRule) bool { return !r.Exclude })
}

// policy is the selection policy the flags describe (pod CIDRs are added at run time).
func (o *options) policy() resolver.Policy {
	return resolver.Policy{
		Managed: o.managed(), Targets: o.targets(), Types: o.typePolicy,
		AllowSecondary: o.allowSecondary, AllowVIPs: !o.defaultExclusions,
		ExcludeCIDRs: o.serviceCIDRs, KeepExternalEqualInternal: o.keepExternalEqualInternal,
	}
}

func (o *options) targets() []resolver.Target {
	return append(append([]resolver.Target(nil), o.internalTargets...), o.externalTargets...)
}

// oneFamilyWarning warns when a --*-ip-target list names one family only and no interface source
// adds the other: the list is kept as given (a single-stack cluster wants that), but the type stays
// managed in both families, so a dual-stack Node would silently lose the other family's address.
func (o *options) oneFamilyWarning(t resolver.AddressType, value string, ts []resolver.Target) []string {
	if strings.Trim(value, ", ") == "" || len(ts) == 0 || o.enumerates(t) {
		return nil // the defaults cover both families; "none" leaves the type alone
	}
	has := map[resolver.Family]bool{}
	for _, tg := range ts {
		has[resolver.FamilyOf(tg.IP)] = true
	}
	if len(has) != 1 {
		return nil
	}
	named, other, otherDefault := resolver.IPv4, resolver.IPv6, "2001:4860:4860::8888"
	if has[resolver.IPv6] {
		named, other, otherDefault = resolver.IPv6, resolver.IPv4, "8.8.8.8"
	}
	pre := flagPrefix(t)
	return []string{fmt.Sprintf("--%s-target names %s targets only: nodeaddr publishes no %s %s and removes one the Node has; "+
		"for a dual-stack Node add a target of that family, e.g. --%s-target=%s,%s",
		pre, named, other, t, pre, strings.Trim(value, ", "), otherDefault)}
}

// logEffectiveConfig logs one INFO line per address type and family: the configuration in force
// as the flags, their defaults and cross-rules left it, so an operator reads what nodeaddr will do
// for, say, IPv6 ExternalIP without re-deriving the defaults (settings common to all are on the
// "nodeaddr starting" line).
func (o *options) logEffectiveConfig(log *slog.Logger) {
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
func (o *options) effectiveAttrs(t resolver.AddressType, f resolver.Family) []any {
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
func (o *options) cidrMisses(addrs []resolver.LocalAddr) []cidrMiss {
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
