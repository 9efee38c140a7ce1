package resolver

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/netnstest"
)

// policyKernel resolves InternalIP on the real kernel with p (Managed set here) and prev.
func policyKernel(t *testing.T, p Policy, prev State) (State, []Skip) {
	t.Helper()
	p.Managed = []AddressType{InternalIP}
	st, skips, err := ResolvePolicy(Netlink{}, p, prev)
	if err != nil {
		t.Fatalf("ResolvePolicy: %v", err)
	}
	return st, skips
}

func wantIPs(t *testing.T, st State, skips []Skip, want ...string) {
	t.Helper()
	var got []string
	for _, a := range st.Addresses {
		got = append(got, a.IP.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("resolved %v, want %v (skips %+v)", got, want, skips)
	}
}

func wantSkip(t *testing.T, skips []Skip, ip, reason string) {
	t.Helper()
	if !slices.ContainsFunc(skips, func(s Skip) bool { return s.Source.String() == ip && strings.Contains(s.Reason, reason) }) {
		t.Fatalf("skips %+v: want %s skipped as %q", skips, ip, reason)
	}
}

func defaultTypePolicy(include ...string) map[AddressType]TypePolicy {
	return map[AddressType]TypePolicy{InternalIP: {Interfaces: MustInterfaceRegexps(include...),
		ExcludeInterfaces: MustInterfaceRegexps(defaultExcludeInterfaces...)}}
}

// keepalived adds its VIP as a second address of the subnet (IFA_F_SECONDARY); kube-vip adds a /32
// to the uplink (ARP mode) or to lo (BGP mode); an alias carries a label. None becomes the node IP,
// not even when a route names it as its source.
func TestKernelVIPsNeverSelected(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "kv")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "kv")
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1")
	t4 := Target{Type: InternalIP, IP: kTarget4}
	p := Policy{Targets: []Target{t4}, Types: defaultTypePolicy("kv")}

	netnstest.IP(t, "addr", "add", "192.0.2.100/24", "dev", "kv")                    // keepalived
	netnstest.IP(t, "addr", "add", "192.0.2.200/32", "dev", "kv")                    // kube-vip ARP
	netnstest.IP(t, "addr", "add", "192.0.2.201/32", "dev", "kv", "label", "kv:vip") // alias
	netnstest.IP(t, "addr", "add", "192.0.2.202/32", "dev", "lo")                    // kube-vip BGP
	if la := findKernelAddr(t, ip("192.0.2.201")); la.Label != "kv:vip" || la.PrefixLen != 32 {
		t.Fatalf("alias read back as %+v: want label kv:vip, /32", la)
	}
	st, skips := policyKernel(t, p, State{})
	wantIPs(t, st, skips, "192.0.2.10")
	wantSkip(t, skips, "192.0.2.100", "secondary")
	wantSkip(t, skips, "192.0.2.200", "next to a wider address")
	wantSkip(t, skips, "192.0.2.201", "label differs")

	for _, vip := range []string{"192.0.2.100", "192.0.2.200", "192.0.2.201", "192.0.2.202"} {
		t.Run("route source "+vip, func(t *testing.T) {
			netnstest.IP(t, "route", "replace", "default", "via", "192.0.2.1", "src", vip)
			// Route source only: the VIP is refused and nothing is published rather than the VIP.
			st, skips := policyKernel(t, Policy{Targets: []Target{t4}}, State{})
			wantIPs(t, st, skips)
			wantSkip(t, skips, vip, "")
			// With the uplink as an interface source, the real address is chosen.
			st, skips = policyKernel(t, p, State{})
			wantIPs(t, st, skips, "192.0.2.10")
		})
	}
}

// IPv6 privacy (temporary) and deprecated addresses are never chosen, from an interface or as the
// route's source; a temporary route source stands for the stable address of its prefix.
func TestKernelIPv6TemporaryAndDeprecatedSkipped(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "k6")
	netnstest.Sysctl(t, "net.ipv6.conf.k6.accept_dad", "0")
	netnstest.Sysctl(t, "net.ipv6.conf.k6.use_tempaddr", "2")
	// mngtmpaddr makes the kernel derive a temporary address from this /64, as SLAAC would.
	netnstest.IP(t, "-6", "addr", "add", "2001:db8:6::10/64", "dev", "k6", "mngtmpaddr", "valid_lft", "7200", "preferred_lft", "3600")
	netnstest.IP(t, "-6", "addr", "add", "2001:db8:6::20/64", "dev", "k6", "preferred_lft", "0", "valid_lft", "3600", "nodad")
	netnstest.IP(t, "-6", "route", "add", "default", "via", "2001:db8:6::1", "dev", "k6")

	var temp netip.Addr
	for deadline := time.Now().Add(5 * time.Second); !temp.IsValid(); time.Sleep(20 * time.Millisecond) {
		addrs, err := Netlink{}.Addresses()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if a.Link == "k6" && a.Flags&ifaTemporary != 0 && a.Flags&ifaTentative == 0 {
				temp = a.IP
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel made no temporary address: %+v", addrs)
		}
	}
	t6 := Target{Type: InternalIP, IP: kTarget6}
	p := Policy{Targets: []Target{t6}, Types: defaultTypePolicy("k6")}
	st, skips := policyKernel(t, p, State{})
	wantIPs(t, st, skips, "2001:db8:6::10")
	wantSkip(t, skips, temp.String(), "temporary")
	wantSkip(t, skips, "2001:db8:6::20", "deprecated")

	// Even as the route's preferred source they are refused: the deprecated one leaves nothing, the
	// temporary one gives way to the stable address it was derived from.
	for _, src := range []struct{ ip, want string }{{temp.String(), "2001:db8:6::10"}, {"2001:db8:6::20", ""}} {
		netnstest.IP(t, "-6", "route", "replace", "default", "via", "2001:db8:6::1", "dev", "k6", "src", src.ip)
		st, skips := policyKernel(t, Policy{Targets: []Target{t6}}, State{})
		if src.want == "" {
			wantIPs(t, st, skips)
			wantSkip(t, skips, src.ip, "")
		} else {
			wantIPs(t, st, skips, src.want)
		}
	}
}

// A CNI bridge and a Calico-style veth are ignored: as interface sources and as a route's source.
func TestKernelCNIInterfacesIgnored(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "cni0")
	netnstest.Veth(t, "cali123")
	netnstest.Veth(t, "nic")
	netnstest.IP(t, "addr", "add", "10.244.0.1/24", "dev", "cni0")
	netnstest.IP(t, "addr", "add", "10.244.1.1/24", "dev", "cali123")
	netnstest.IP(t, "addr", "add", "10.0.0.10/24", "dev", "nic")
	netnstest.IP(t, "route", "add", "198.51.100.0/24", "dev", "cni0", "src", "10.244.0.1")

	st, skips := policyKernel(t, Policy{Types: defaultTypePolicy(".*")}, State{})
	wantIPs(t, st, skips, "10.0.0.10")
	wantSkip(t, skips, "10.244.0.1", "interface excluded")
	wantSkip(t, skips, "10.244.1.1", "interface excluded")

	p := Policy{Targets: []Target{{Type: InternalIP, IP: kTarget4}}, Types: map[AddressType]TypePolicy{
		InternalIP: {ExcludeInterfaces: MustInterfaceRegexps(defaultExcludeInterfaces...)}}}
	st, skips = policyKernel(t, p, State{})
	wantIPs(t, st, skips)
	wantSkip(t, skips, "10.244.0.1", "interface excluded: cni0")
}

// The ordered CIDR list: `!` rejects, the first accepting rule gives the priority; among equal
// priority the current address stays, a better one replaces it.
func TestKernelCIDRPriorityAndStickiness(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "pb") // pb gets the lower interface index: its addresses list first
	netnstest.Veth(t, "pa")
	netnstest.IP(t, "addr", "add", "10.2.0.10/24", "dev", "pa") // excluded
	netnstest.IP(t, "addr", "add", "10.9.0.10/24", "dev", "pa") // priority 2
	rules, err := ParseCIDRRules("!10.2.0.0/16, 10.1.0.0/16, 10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Types: map[AddressType]TypePolicy{InternalIP: {CIDRs: rules,
		ExcludeInterfaces: MustInterfaceRegexps(defaultExcludeInterfaces...)}}}
	st, skips := policyKernel(t, p, State{})
	wantIPs(t, st, skips, "10.9.0.10")
	wantSkip(t, skips, "10.2.0.10", "excluded by a ! CIDR rule")

	// A second address of the same priority appears, first in kernel order: without a previous
	// choice it would win, but the current address stays.
	netnstest.IP(t, "addr", "add", "10.8.0.10/24", "dev", "pb")
	fresh, skips := policyKernel(t, p, State{})
	wantIPs(t, fresh, skips, "10.8.0.10")
	st, skips = policyKernel(t, p, st)
	wantIPs(t, st, skips, "10.9.0.10")

	// A higher-priority address replaces it.
	netnstest.IP(t, "addr", "add", "10.1.0.10/24", "dev", "pb")
	st, skips = policyKernel(t, p, st)
	wantIPs(t, st, skips, "10.1.0.10")

	// It goes: the best remaining one is chosen.
	netnstest.IP(t, "addr", "del", "10.1.0.10/24", "dev", "pb")
	st, skips = policyKernel(t, p, st)
	if got := st.Addresses; len(got) != 1 || (got[0].IP != ip("10.9.0.10") && got[0].IP != ip("10.8.0.10")) {
		t.Fatalf("after the better address left: %v (skips %+v), want 10.9.0.10 or 10.8.0.10", got, skips)
	}
}
