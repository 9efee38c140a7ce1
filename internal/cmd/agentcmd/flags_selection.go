package agentcmd

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// defaultTargets are the targets when a target flag is absent or empty: the route toward the
// Internet of each family (no packet is sent; the kernel is only asked which source it would use).
// InternalIP first tries the route toward the API server's own addresses (resolver's apiserver
// target), which reaches the cluster where the default route does not (docs/configuration.md,
// "Default targets by host shape").
const (
	defaultTargets         = "8.8.8.8,2001:4860:4860::8888"
	defaultInternalTargets = resolver.APIServerTarget + "," + defaultTargets
)

// defaultTargetsOf is type t's default target list.
func defaultTargetsOf(t resolver.AddressType) string {
	if t == resolver.InternalIP {
		return defaultInternalTargets
	}
	return defaultTargets
}

// noTargets is the target flag value that leaves a type unmanaged.
const noTargets = "none"

// selectionOptions are the Address selection section's flags (docs/configuration.md, "Selection
// policy"): the resolver's policy.
type selectionOptions struct {
	typePolicy                        map[resolver.AddressType]resolver.TypePolicy
	internalTargets, externalTargets  []resolver.Target
	allowSecondary, defaultExclusions bool
	serviceCIDRs                      []netip.Prefix
	keepExternalEqualInternal         bool // --external-ip-equal-internal=keep
	externalEqual, serviceCIDR        string
	externalScope                     string // --external-ip-scope: global or any
	perType                           map[resolver.AddressType]*typeFlags
}

// typeFlags are the selection flags of one address type.
type typeFlags struct{ target, interfaces, exclude, cidrs string }

// addressTypes are the types nodeaddr can manage, in the order flags and logs name them.
var addressTypes = []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}

// flagPrefix is the flag-name prefix of an address type: internal-ip or external-ip.
func flagPrefix(t resolver.AddressType) string {
	if t == resolver.InternalIP {
		return "internal-ip"
	}
	return "external-ip"
}

func (o *selectionOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.externalScope, "external-ip-scope", "global", "the ExternalIP of the default targets: global (published only when globally routable: not private-use, shared 100.64/10, unique-local, link-local) or any (any usable route source, the old default); an ExternalIP chosen with --external-ip-target, --external-ip-interfaces or an accepting --external-ip-cidrs, or found by --external-ip-discovery, is published whatever its range")
	fs.StringVar(&o.externalEqual, "external-ip-equal-internal", "drop", "an ExternalIP equal to an InternalIP on the Node (nodeaddr's or the kubelet's): drop (not published, as local-ccm does) or keep")
	o.perType = map[resolver.AddressType]*typeFlags{resolver.InternalIP: {}, resolver.ExternalIP: {}}
	for _, t := range addressTypes {
		pre, tf, unless := flagPrefix(t), o.perType[t], ""
		if t == resolver.InternalIP {
			unless = " (unless --internal-ip-interfaces or an accepting --internal-ip-cidrs is set)"
		}
		fs.StringVar(&tf.target, pre+"-target", "", "ordered comma-separated targets: IPs, at most one per family, and apiserver (the API server's own addresses); per family the first whose route source is usable becomes "+string(t)+"; empty or absent: "+defaultTargetsOf(t)+unless+"; none: "+string(t)+" not managed")
		fs.StringVar(&tf.interfaces, pre+"-interfaces", "", "comma-separated regular expressions (anchored) of interfaces whose addresses are "+string(t)+" candidates besides the route source")
		fs.StringVar(&tf.exclude, pre+"-exclude-interfaces", "", "comma-separated regular expressions (anchored) of interfaces never used for "+string(t)+", added to the default exclusions")
		fs.StringVar(&tf.cidrs, pre+"-cidrs", "", "ordered comma-separated CIDRs for "+string(t)+": the first matching one gives the priority, !CIDR rejects; alone, they select from every interface; a warning at start when they accept no address of the host in a family")
	}
	fs.BoolVar(&o.allowSecondary, "allow-secondary", false, "accept IPv4 secondary addresses (keepalived and kube-vip add VIPs as secondaries)")
	fs.BoolVar(&o.defaultExclusions, "default-exclusions", true, "exclude container/CNI interfaces ("+strings.Join(resolver.DefaultExcludeInterfaces(), " ")+"), the Node's pod CIDRs and VIP-style addresses (/32 on lo, labelled aliases, a /32 beside a wider address)")
	fs.StringVar(&o.serviceCIDR, "service-cidr", "", "the cluster's service CIDR(s), comma-separated: never a node address")
}

// validate turns the selection flags into the selection policy and targets, with the warnings
// about a valid combination likely not meant.
func (o *selectionOptions) validate(fs *pflag.FlagSet) (warnings []string, err error) {
	o.typePolicy = map[resolver.AddressType]resolver.TypePolicy{}
	for _, t := range addressTypes {
		tf, pre := o.perType[t], flagPrefix(t)
		// InternalIP is the node's identity: it stays while the host has it (TypePolicy.Sticky).
		tp := resolver.TypePolicy{Sticky: t == resolver.InternalIP}
		if tp.Interfaces, err = interfaceRegexps(pre+"-interfaces", tf.interfaces); err != nil {
			return nil, err
		}
		if tp.ExcludeInterfaces, err = interfaceRegexps(pre+"-exclude-interfaces", tf.exclude); err != nil {
			return nil, err
		}
		if tp.CIDRs, err = resolver.ParseCIDRRules(tf.cidrs); err != nil {
			return nil, cli.Usagef("--%s-cidrs: %v", pre, err)
		}
		if o.defaultExclusions {
			tp.ExcludeInterfaces = append(resolver.MustInterfaceRegexps(resolver.DefaultExcludeInterfaces()...), tp.ExcludeInterfaces...)
		}
		o.typePolicy[t] = tp
	}
	for _, t := range addressTypes {
		tf, ts := o.perType[t], o.targetsOf(t)
		if *ts, err = o.parseTargets(t, tf.target, tf.interfaces); err != nil {
			return nil, err
		}
		warnings = append(warnings, o.oneFamilyWarning(t, tf.target, *ts)...)
	}
	switch o.externalEqual {
	case "drop":
	case "keep":
		o.keepExternalEqualInternal = true
	default:
		return nil, cli.Usagef("--external-ip-equal-internal: %q is not drop or keep", o.externalEqual)
	}
	if o.externalScope != "global" && o.externalScope != "any" {
		return nil, cli.Usagef("--external-ip-scope: %q is not global or any", o.externalScope)
	}
	if o.serviceCIDRs, err = resolver.ParsePrefixes(o.serviceCIDR); err != nil {
		return nil, cli.Usagef("--service-cidr: %v", err)
	}
	return warnings, o.checkManaged(fs)
}

// restrictScope applies --external-ip-scope=global (TypePolicy.GlobalOnly) to the ExternalIP of the
// default targets only: an ExternalIP is by definition reachable from outside, and behind NAT the
// Internet route's source is a private address (on Vagrant the same on every VM), but an address
// the operator chose (a target, interfaces, an accepting CIDR) is honoured whatever its range, and
// STUN discovery (discovery) needs the private route source to ask its servers from.
func (o *selectionOptions) restrictScope(discovery bool) {
	tf, tp := o.perType[resolver.ExternalIP], o.typePolicy[resolver.ExternalIP]
	tp.GlobalOnly = o.externalScope == "global" && strings.Trim(tf.target, ", ") == "" &&
		!o.enumerates(resolver.ExternalIP) && !discovery
	o.typePolicy[resolver.ExternalIP] = tp
}

// interfaceRegexps parses the value of the interface flag --name. Each expression must parse on its
// own before the resolver anchors it as ^(?:EXPR)$: the error then quotes what the user wrote, not
// the anchored form, and an expression that parses only once wrapped ("a)|(b", which would match
// any name starting with "a") is refused instead of matching unanchored.
func interfaceRegexps(name, value string) ([]*regexp.Regexp, error) {
	for expr := range strings.SplitSeq(value, ",") {
		expr = strings.TrimSpace(expr)
		if _, err := regexp.Compile(expr); err != nil {
			return nil, cli.Usagef("--%s: %q is not a valid regular expression: %s", name, expr, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	res, err := resolver.ParseInterfaceRegexps(value)
	if err != nil {
		return nil, cli.Usagef("--%s: %v", name, err)
	}
	return res, nil
}

// checkManaged refuses a command line that manages nothing, or selects for a type it does not manage.
func (o *selectionOptions) checkManaged(fs *pflag.FlagSet) error {
	if len(o.managed()) == 0 {
		for _, name := range []string{"internal-ip-interfaces", "internal-ip-cidrs", "external-ip-interfaces", "external-ip-cidrs"} {
			if v := fs.Lookup(name).Value.String(); strings.Trim(v, ", ") != "" {
				return cli.Usagef("--%s: nothing to manage: no target, interface or accepting CIDR for InternalIP or ExternalIP", name)
			}
		}
		return cli.Usagef("--internal-ip-target and --external-ip-target are both none: nothing to manage")
	}
	for _, t := range addressTypes {
		if slices.Contains(o.managed(), t) {
			continue
		}
		// Set but empty is fine (a Helm chart passes every flag).
		for _, f := range []struct{ name, v string }{{"exclude-interfaces", o.perType[t].exclude}, {"cidrs", o.perType[t].cidrs}} {
			if strings.Trim(f.v, ", ") != "" {
				pre := flagPrefix(t)
				return cli.Usagef("--%s-%s: %s is not managed (it has no --%s-target, --%s-interfaces or accepting --%s-cidrs)",
					pre, f.name, t, pre, pre, pre)
			}
		}
	}
	return nil
}

// parseTargets reads a --*-ip-target value (after typePolicy is set): "none" leaves t unmanaged,
// empty means defaultTargets, except for an InternalIP with an interface source, which keeps
// selecting only from interfaces as before InternalIP had default targets.
func (o *selectionOptions) parseTargets(t resolver.AddressType, value, interfaces string) ([]resolver.Target, error) {
	pre := flagPrefix(t)
	v := strings.TrimSpace(value)
	if strings.EqualFold(v, noTargets) {
		if o.enumerates(t) {
			what := "--" + pre + "-cidrs"
			if strings.Trim(interfaces, ", ") != "" {
				what = "--" + pre + "-interfaces"
			}
			return nil, cli.Usagef("--%s-target=none leaves %s unmanaged, but %s selects addresses for it: drop one of them", pre, t, what)
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
		return nil, cli.Usagef("--%s-target: %v", pre, err)
	}
	return ts, nil
}

// managed lists the types nodeaddr owns: those with a target or an interface source.
func (o *selectionOptions) managed() []resolver.AddressType {
	var m []resolver.AddressType
	for _, t := range addressTypes {
		if len(*o.targetsOf(t)) > 0 || o.enumerates(t) {
			m = append(m, t)
		}
	}
	return m
}

// targetsOf is the field holding type t's targets.
func (o *selectionOptions) targetsOf(t resolver.AddressType) *[]resolver.Target {
	if t == resolver.InternalIP {
		return &o.internalTargets
	}
	return &o.externalTargets
}

func (o *selectionOptions) enumerates(t resolver.AddressType) bool {
	return len(o.typePolicy[t].Interfaces) > 0 || accepts(o.typePolicy[t].CIDRs)
}

// accepts reports whether a CIDR list has an accepting (not !) rule.
func accepts(rules []resolver.CIDRRule) bool {
	return slices.ContainsFunc(rules, func(r resolver.CIDRRule) bool { return !r.Exclude })
}

// policy is the selection policy the flags describe (pod CIDRs are added at run time).
func (o *selectionOptions) policy() resolver.Policy {
	return resolver.Policy{
		Managed: o.managed(), Targets: o.targets(), Types: o.typePolicy,
		AllowSecondary: o.allowSecondary, AllowVIPs: !o.defaultExclusions,
		ExcludeCIDRs: o.serviceCIDRs, KeepExternalEqualInternal: o.keepExternalEqualInternal,
	}
}

func (o *selectionOptions) targets() []resolver.Target {
	return append(append([]resolver.Target(nil), o.internalTargets...), o.externalTargets...)
}

// oneFamilyWarning warns when a --*-ip-target list names one family only and no interface source
// adds the other: the list is kept as given (a single-stack cluster wants that), but the type stays
// managed in both families, so a dual-stack Node would silently lose the other family's address.
func (o *selectionOptions) oneFamilyWarning(t resolver.AddressType, value string, ts []resolver.Target) []string {
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
