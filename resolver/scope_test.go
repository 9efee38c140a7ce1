package resolver

import (
	"net/netip"
	"slices"
	"testing"
)

// nonGlobal names each range that is not globally routable; documentation ranges count as global.
func TestNonGlobal(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"10.0.2.15", "private-use (RFC 1918)"},
		{"172.16.0.1", "private-use (RFC 1918)"},
		{"172.31.255.254", "private-use (RFC 1918)"},
		{"192.168.56.11", "private-use (RFC 1918)"},
		{"100.64.0.1", "shared address space (RFC 6598)"},
		{"100.127.255.254", "shared address space (RFC 6598)"},
		{"fd00:10::11", "unique-local (RFC 4193)"},
		{"fc00::1", "unique-local (RFC 4193)"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"127.0.0.1", "loopback"},
		{"::1", "loopback"},
		{"::ffff:10.0.2.15", "private-use (RFC 1918)"},
		{"224.0.0.1", "not unicast"},
		{"172.32.0.1", ""},
		{"100.128.0.1", ""},
		{"8.8.8.8", ""},
		{"192.0.2.10", ""},
		{"198.51.100.11", ""},
		{"203.0.113.10", ""},
		{"2001:db8::10", ""},
		{"2001:4860:4860::8888", ""},
		{"::ffff:192.0.2.10", ""},
	} {
		if got := nonGlobal(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("nonGlobal(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
}

// With GlobalOnly (the default ExternalIP, --external-ip-scope=global) a private route source is
// rejected and the explanation says why; a global one is chosen; without it (an explicit choice,
// --external-ip-scope=any) the private source is published as before.
func TestGlobalOnlyExternalIP(t *testing.T) {
	v4, v6 := ip("8.8.8.8"), ip("2001:4860:4860::8888")
	targets := []Target{{Type: InternalIP, IP: ip("192.168.56.10")}, {Type: ExternalIP, IP: v4}, {Type: ExternalIP, IP: v6}}
	vagrant := tableKernel{
		routes: map[netip.Addr]netip.Addr{ip("192.168.56.10"): ip("192.168.56.11"), v4: ip("10.0.2.15"), v6: ip("fd00:2::15")},
		addrs:  []LocalAddr{on("eth0", "10.0.2.15/24"), on("eth0", "fd00:2::15/64"), on("eth1", "192.168.56.11/24")},
	}
	public := tableKernel{
		routes: map[netip.Addr]netip.Addr{ip("192.168.56.10"): ip("192.168.56.11"), v4: ip("198.51.100.11"), v6: ip("2001:db8::11")},
		addrs:  []LocalAddr{on("eth0", "198.51.100.11/24"), on("eth0", "2001:db8::11/64"), on("eth1", "192.168.56.11/24")},
	}
	for _, c := range []struct {
		name       string
		k          tableKernel
		globalOnly bool
		want       string
		wantLines  []string
	}{
		{"NAT, global only", vagrant, true, "[InternalIP=192.168.56.11]", []string{
			"ExternalIP IPv4 10.0.2.15 (route to 8.8.8.8): rejected: not globally routable, so not an ExternalIP (--external-ip-scope=any publishes it): private-use (RFC 1918)",
			"ExternalIP IPv4: no accepted candidate: not published",
			"ExternalIP IPv6 fd00:2::15 (route to 2001:4860:4860::8888): rejected: not globally routable, so not an ExternalIP (--external-ip-scope=any publishes it): unique-local (RFC 4193)",
			"ExternalIP IPv6: no accepted candidate: not published",
		}},
		{"NAT, any scope", vagrant, false, "[InternalIP=192.168.56.11 ExternalIP=10.0.2.15 ExternalIP=fd00:2::15]", nil},
		{"public uplink, global only", public, true, "[InternalIP=192.168.56.11 ExternalIP=198.51.100.11 ExternalIP=2001:db8::11]", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Policy{Managed: []AddressType{InternalIP, ExternalIP}, Targets: targets,
				Types: map[AddressType]TypePolicy{ExternalIP: {GlobalOnly: c.globalOnly}}}
			s, _, err := ResolvePolicy(c.k, p, State{})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.String(); got != c.want {
				t.Errorf("addresses %s, want %s", got, c.want)
			}
			got := explained(s)
			for _, w := range c.wantLines {
				if !slices.Contains(got, w) {
					t.Errorf("explanation %q\nlacks %q", got, w)
				}
			}
		})
	}
}
