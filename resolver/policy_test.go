package resolver

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// on returns a usable address with its prefix on link (index by name), labelled like the kernel does.
func on(link string, cidr string) LocalAddr {
	pfx := netip.MustParsePrefix(cidr)
	la := LocalAddr{IP: pfx.Addr(), PrefixLen: pfx.Bits(), Link: link, LinkIndex: linkIndex(link), PreferredLft: forever}
	if la.IP.Is4() {
		la.Label = link
	}
	return la
}

func linkIndex(name string) int {
	return int(name[len(name)-1]) + len(name)*100
}

func with(a LocalAddr, f func(*LocalAddr)) LocalAddr { f(&a); return a }

func secondary(a LocalAddr) LocalAddr {
	return with(a, func(a *LocalAddr) { a.Flags |= ifaSecondary })
}

func cidrs(t *testing.T, s string) []CIDRRule {
	t.Helper()
	r, err := ParseCIDRRules(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSelect(t *testing.T) {
	t4, t6 := Target{Type: InternalIP, IP: ip("198.51.100.1")}, Target{Type: InternalIP, IP: ip("2001:db8:ffff::1")}
	internalOnly := []AddressType{InternalIP}
	eth0 := on("eth0", "192.0.2.10/24")
	eth1 := on("eth1", "10.0.0.10/24")
	eth1b := on("eth1", "10.1.0.10/24")
	eth06 := on("eth0", "2001:db8::10/64")
	// SLAAC with privacy extensions: the /64's stable address and a temporary one derived from it.
	slaac6 := with(eth06, func(a *LocalAddr) { a.Flags = ifaManageTempAddr })
	temp6 := with(on("eth0", "2001:db8::8a3f:1/64"), func(a *LocalAddr) { a.Flags = ifaTemporary })
	ifaces := func(exprs ...string) map[AddressType]TypePolicy {
		return map[AddressType]TypePolicy{InternalIP: {Interfaces: MustInterfaceRegexps(exprs...),
			ExcludeInterfaces: MustInterfaceRegexps(defaultExcludeInterfaces...)}}
	}
	prevIP := func(s string) State {
		return State{Managed: internalOnly, Addresses: []Address{{InternalIP, ip(s), "", 0}}}
	}
	tests := []struct {
		name    string
		policy  Policy
		sources map[Target]netip.Addr
		addrs   []LocalAddr
		prev    State
		want    []string // selected IPs, in order
		skip    string   // a reason that must appear among the skips
	}{
		{
			name:    "route source only (the default)",
			policy:  Policy{Targets: []Target{t4}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0, eth1},
			want:    []string{"192.0.2.10"},
		},
		{
			name:    "keepalived secondary VIP as route source is skipped",
			policy:  Policy{Targets: []Target{t4}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.100")},
			addrs:   []LocalAddr{eth0, secondary(on("eth0", "192.0.2.100/24"))},
			skip:    errSecondary.Error(),
		},
		{
			name:    "--allow-secondary accepts it",
			policy:  Policy{Targets: []Target{t4}, AllowSecondary: true},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.100")},
			addrs:   []LocalAddr{eth0, secondary(on("eth0", "192.0.2.100/24"))},
			want:    []string{"192.0.2.100"},
		},
		{
			name:    "kube-vip BGP /32 on lo as route source is skipped",
			policy:  Policy{Targets: []Target{t4}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.200")},
			addrs:   []LocalAddr{eth0, on("lo", "192.0.2.200/32")},
			skip:    errVIPLoopback.Error(),
		},
		{
			name:    "labelled alias eth0:vip is skipped",
			policy:  Policy{Targets: []Target{t4}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.200")},
			addrs:   []LocalAddr{eth0, with(on("eth0", "192.0.2.200/32"), func(a *LocalAddr) { a.Label = "eth0:vip" })},
			skip:    errVIPLabel.Error(),
		},
		{
			name:    "kube-vip ARP /32 next to the real /24 is skipped",
			policy:  Policy{Targets: []Target{t4}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.200")},
			addrs:   []LocalAddr{eth0, on("eth0", "192.0.2.200/32")},
			skip:    errVIPHost.Error(),
		},
		{
			name:    "a lone /32 uplink is fine",
			policy:  Policy{Targets: []Target{t4}},
			sources: map[Target]netip.Addr{t4: ip("203.0.113.5")},
			addrs:   []LocalAddr{on("eth0", "203.0.113.5/32")},
			want:    []string{"203.0.113.5"},
		},
		{
			name:    "an IPv6 /128 (DHCPv6) is fine",
			policy:  Policy{Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: ip("2001:db8::5")},
			addrs:   []LocalAddr{on("eth0", "2001:db8::5/128"), eth06},
			want:    []string{"2001:db8::5"},
		},
		{
			name:    "--allow-vips (no default exclusions) accepts a VIP",
			policy:  Policy{Targets: []Target{t4}, AllowVIPs: true},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.200")},
			addrs:   []LocalAddr{eth0, on("eth0", "192.0.2.200/32")},
			want:    []string{"192.0.2.200"},
		},
		{
			name:    "route source on an excluded interface",
			policy:  Policy{Targets: []Target{t4}, Types: ifaces()},
			sources: map[Target]netip.Addr{t4: ip("10.244.0.1")},
			addrs:   []LocalAddr{on("cni0", "10.244.0.1/24")},
			skip:    "interface excluded: cni0",
		},
		{
			name:   "interfaces without a target, both families",
			policy: Policy{Types: ifaces("eth0")},
			addrs:  []LocalAddr{eth1, eth06, eth0},
			want:   []string{"192.0.2.10", "2001:db8::10"},
		},
		{
			name:   "include is anchored: eth.* does not match veth0",
			policy: Policy{Types: map[AddressType]TypePolicy{InternalIP: {Interfaces: MustInterfaceRegexps("eth.*")}}},
			addrs:  []LocalAddr{on("veth0", "10.9.0.1/24"), eth1},
			want:   []string{"10.0.0.10"},
		},
		{
			name:   "CNI interfaces ignored by default",
			policy: Policy{Types: ifaces(".*")},
			addrs: []LocalAddr{on("cni0", "10.244.0.1/24"), on("cali123", "10.244.1.1/32"), on("flannel.1", "10.244.2.0/32"),
				on("docker0", "172.17.0.1/16"), on("kube-ipvs0", "10.96.0.1/32"), on("veth9", "10.9.0.1/24"),
				on("cilium_host", "10.244.3.1/32"), on("lo", "127.0.0.1/8"), eth1},
			want: []string{"10.0.0.10"},
			skip: "interface excluded: cni0",
		},
		{
			name:   "IPv6 temporary and deprecated addresses skipped",
			policy: Policy{Types: ifaces("eth0")},
			addrs: []LocalAddr{
				with(on("eth0", "2001:db8::aaaa/64"), func(a *LocalAddr) { a.Flags = ifaTemporary }),
				with(on("eth0", "2001:db8::bbbb/64"), func(a *LocalAddr) { a.PreferredLft = 0 }),
				eth06,
			},
			want: []string{"2001:db8::10"},
			skip: errTemporary.Error(),
		},
		{
			name:    "IPv6 temporary route source: the stable address of its prefix stands for it",
			policy:  Policy{Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: temp6.IP},
			addrs:   []LocalAddr{on("eth1", "2001:db8:1::10/64"), temp6, on("eth0", "2001:db8::5/64"), slaac6},
			want:    []string{"2001:db8::10"}, // mngtmpaddr first: the address the kernel derived temp6 from
		},
		{
			name:    "IPv6 temporary route source: another stable address of the prefix when no mngtmpaddr",
			policy:  Policy{Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: temp6.IP},
			addrs:   []LocalAddr{temp6, on("eth0", "2001:db8::5/64"), eth06},
			want:    []string{"2001:db8::5"},
		},
		{
			name:    "IPv6 temporary route source: nothing stands for it off its prefix, link or lifetime",
			policy:  Policy{Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: temp6.IP},
			addrs: []LocalAddr{temp6, on("eth1", "2001:db8::10/64"), on("eth0", "2001:db8:1::10/64"),
				on("eth0", "2001:db8::/48"), with(slaac6, func(a *LocalAddr) { a.PreferredLft = 0 }),
				with(on("eth0", "2001:db8::bbbb/64"), func(a *LocalAddr) { a.Flags = ifaTemporary })},
			skip: errTemporary.Error(),
		},
		{
			name:    "IPv6 temporary route source: its stable address still passes the CIDR rules",
			policy:  Policy{Targets: []Target{t6}, Types: map[AddressType]TypePolicy{InternalIP: {CIDRs: cidrs(t, "!2001:db8::10/128")}}},
			sources: map[Target]netip.Addr{t6: temp6.IP},
			addrs:   []LocalAddr{temp6, slaac6},
			skip:    "excluded by a ! CIDR rule: !2001:db8::10/128",
		},
		{
			name:   "CIDR priority: the first rule wins over kernel order",
			policy: Policy{Types: map[AddressType]TypePolicy{InternalIP: {CIDRs: cidrs(t, "10.1.0.0/16,10.0.0.0/8")}}},
			addrs:  []LocalAddr{eth0, eth1, eth1b},
			want:   []string{"10.1.0.10"},
		},
		{
			name:   "CIDRs alone enumerate every interface; no match is rejected",
			policy: Policy{Types: map[AddressType]TypePolicy{InternalIP: {CIDRs: cidrs(t, "10.0.0.0/8")}}},
			addrs:  []LocalAddr{eth0, eth1},
			want:   []string{"10.0.0.10"},
			skip:   errNoCIDRRule.Error(),
		},
		{
			name:   "! rule excludes before a wider accepting rule",
			policy: Policy{Types: map[AddressType]TypePolicy{InternalIP: {CIDRs: cidrs(t, "!10.1.0.0/16,10.0.0.0/8")}}},
			addrs:  []LocalAddr{eth1b, eth1},
			want:   []string{"10.0.0.10"},
			skip:   "excluded by a ! CIDR rule: !10.1.0.0/16",
		},
		{
			name:    "only ! rules: everything else is accepted",
			policy:  Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {CIDRs: cidrs(t, "!192.0.2.0/24")}}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0},
			skip:    "excluded by a ! CIDR rule: !192.0.2.0/24",
		},
		{
			name:    "only ! rules: a non-matching route source is kept",
			policy:  Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {CIDRs: cidrs(t, "!10.0.0.0/8")}}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0},
			want:    []string{"192.0.2.10"},
		},
		{
			name:   "service and pod CIDRs excluded",
			policy: Policy{Types: ifaces(".*"), ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}},
			addrs:  []LocalAddr{eth1, eth1b},
			want:   []string{"10.1.0.10"},
			skip:   errExcludedCIDR.Error(),
		},
		{
			name:    "equal priority, nothing published: the route source wins",
			policy:  Policy{Targets: []Target{t4}, Types: ifaces("eth.*")},
			sources: map[Target]netip.Addr{t4: eth1b.IP},
			addrs:   []LocalAddr{eth0, eth1, eth1b},
			want:    []string{"10.1.0.10"},
		},
		{
			name:    "sticky: a second valid address does not flip the choice",
			policy:  Policy{Targets: []Target{t4}, Types: ifaces("eth.*")},
			sources: map[Target]netip.Addr{t4: eth1b.IP},
			addrs:   []LocalAddr{eth0, eth1, eth1b},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"10.0.0.10"},
		},
		{
			name:    "sticky only while valid",
			policy:  Policy{Targets: []Target{t4}, Types: ifaces("eth.*")},
			sources: map[Target]netip.Addr{t4: eth1b.IP},
			addrs:   []LocalAddr{eth0, with(eth1, func(a *LocalAddr) { a.PreferredLft = 0 }), eth1b},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"10.1.0.10"},
		},
		{
			name: "a higher-priority address replaces the current one",
			policy: Policy{Types: map[AddressType]TypePolicy{InternalIP: {
				CIDRs: cidrs(t, "10.1.0.0/16,10.0.0.0/8")}}},
			addrs: []LocalAddr{eth1, eth1b},
			prev:  prevIP("10.0.0.10"),
			want:  []string{"10.1.0.10"},
		},
		{
			name: "the current one stays against a lower-priority newcomer",
			policy: Policy{Types: map[AddressType]TypePolicy{InternalIP: {
				CIDRs: cidrs(t, "10.0.0.0/16,10.0.0.0/8")}}},
			addrs: []LocalAddr{eth1b, eth1},
			prev:  prevIP("10.0.0.10"),
			want:  []string{"10.0.0.10"},
		},
		{
			name:    "not sticky: the route source replaces a previous address that is only local",
			policy:  Policy{Targets: []Target{t4}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0, eth1},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"192.0.2.10"},
		},
		{
			name:    "IPv6 make-before-break: a newer address on the route source's link does not flip the choice",
			policy:  Policy{Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: ip("2001:db8:2::10")},
			addrs:   []LocalAddr{on("eth0", "2001:db8:2::10/64"), eth06},
			prev:    prevIP("2001:db8::10"),
			want:    []string{"2001:db8::10"},
		},
		{
			name:    "IPv6 make-before-break: the previous address deprecated, the route source",
			policy:  Policy{Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: ip("2001:db8:2::10")},
			addrs:   []LocalAddr{on("eth0", "2001:db8:2::10/64"), with(eth06, func(a *LocalAddr) { a.Flags = ifaDeprecated })},
			prev:    prevIP("2001:db8::10"),
			want:    []string{"2001:db8:2::10"},
		},
		{
			name:    "IPv6 failover: the previous address on another link is not kept",
			policy:  Policy{Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: ip("2001:db8:2::10")},
			addrs:   []LocalAddr{on("eth0", "2001:db8:2::10/64"), on("eth1", "2001:db8::10/64")},
			prev:    prevIP("2001:db8::10"),
			want:    []string{"2001:db8:2::10"},
		},
		{
			name:    "sticky type: a previous address on another uplink is adopted",
			policy:  Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true}}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0, eth1},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"10.0.0.10"},
		},
		{
			name:   "sticky type: adopted even without any route",
			policy: Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true}}},
			addrs:  []LocalAddr{eth0, eth1},
			prev:   prevIP("10.0.0.10"),
			want:   []string{"10.0.0.10"},
			skip:   "no route",
		},
		{
			name:    "sticky type: an address the host no longer has is replaced",
			policy:  Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true}}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"192.0.2.10"},
		},
		{
			name:    "sticky type: an address the policy rejects is replaced",
			policy:  Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true, ExcludeInterfaces: MustInterfaceRegexps("eth1")}}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0, eth1},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"192.0.2.10"},
		},
		{
			name:    "sticky type: an unusable address is replaced",
			policy:  Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true}}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0, secondary(eth1)},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"192.0.2.10"},
		},
		{
			name: "sticky type: a better CIDR priority still wins",
			policy: Policy{Targets: []Target{t4}, Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true,
				CIDRs: cidrs(t, "192.0.2.0/24,10.0.0.0/8")}}},
			sources: map[Target]netip.Addr{t4: eth0.IP},
			addrs:   []LocalAddr{eth0, eth1},
			prev:    prevIP("10.0.0.10"),
			want:    []string{"192.0.2.10"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			p.Managed = internalOnly
			got, skips := selectAddresses(p, tt.sources, tt.addrs, tt.prev, &recorder{})
			var gotIPs []string
			for _, a := range got {
				gotIPs = append(gotIPs, a.IP.String())
			}
			if !slices.Equal(gotIPs, tt.want) {
				t.Errorf("Select = %v, want %v (skips %+v)", gotIPs, tt.want, skips)
			}
			if tt.skip != "" && !slices.ContainsFunc(skips, func(s Skip) bool { return strings.Contains(s.Reason, tt.skip) }) {
				t.Errorf("skips %+v, want one saying %q", skips, tt.skip)
			}
		})
	}
}

// Per type: InternalIP from the private NIC by interface, ExternalIP from the default route.
func TestSelectTwoTypes(t *testing.T) {
	tExt := Target{Type: ExternalIP, IP: ip("198.51.100.1")}
	p := Policy{
		Managed: []AddressType{InternalIP, ExternalIP},
		Targets: []Target{tExt},
		Types:   map[AddressType]TypePolicy{InternalIP: {Interfaces: MustInterfaceRegexps("ens4")}},
	}
	addrs := []LocalAddr{on("ens3", "203.0.113.7/24"), on("ens4", "10.0.0.7/24")}
	got, _ := selectAddresses(p, map[Target]netip.Addr{tExt: ip("203.0.113.7")}, addrs, State{}, &recorder{})
	want := []Address{{InternalIP, ip("10.0.0.7"), "ens4", 24}, {ExternalIP, ip("203.0.113.7"), "ens3", 24}}
	if !slices.Equal(got, want) {
		t.Errorf("Select = %v, want %v", got, want)
	}
}

func TestResolvePolicyReportsLocal(t *testing.T) {
	k := &fakeKernel{addrs: []LocalAddr{on("eth0", "192.0.2.10/24"),
		with(on("eth0", "2001:db8::1/64"), func(a *LocalAddr) { a.Flags = ifaDADFailed })}}
	st, _, err := ResolvePolicy(k, Policy{Managed: []AddressType{InternalIP}, ReportLocal: true}, State{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Local, []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}) || len(st.Addresses) != 0 {
		t.Errorf("state %+v, want Local [192.0.2.10] (dad-failed left out) and no address", st)
	}
}

func TestParsePolicyLists(t *testing.T) {
	res, err := ParseInterfaceRegexps(" eth[0-9]+ , bond.*,")
	if err != nil || len(res) != 2 {
		t.Fatalf("ParseInterfaceRegexps = %v, %v", res, err)
	}
	for name, want := range map[string]bool{"eth0": true, "eth12": true, "veth0": false, "eth0.100": false, "bond0": true} {
		if got := matchAny(res, name, false); got != want {
			t.Errorf("match %q = %v, want %v", name, got, want)
		}
	}
	if _, err := ParseInterfaceRegexps("eth(0"); err == nil || !strings.Contains(err.Error(), `"eth(0" is not a valid regular expression`) {
		t.Errorf("bad regexp error = %v", err)
	}

	rules, err := ParseCIDRRules("10.1.2.3/16, !10.0.0.0/8 ,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	want := []CIDRRule{{netip.MustParsePrefix("10.1.0.0/16"), false}, {netip.MustParsePrefix("10.0.0.0/8"), true},
		{netip.MustParsePrefix("fd00::/8"), false}}
	if !slices.Equal(rules, want) {
		t.Errorf("ParseCIDRRules = %v, want %v", rules, want)
	}
	for _, bad := range []string{"10.0.0.0", "!", "10.0.0.0/33", "fe80::/10%eth0", "::ffff:10.0.0.0/104", "eth0"} {
		if _, err := ParseCIDRRules(bad); err == nil {
			t.Errorf("ParseCIDRRules(%q) accepted", bad)
		}
	}
}
