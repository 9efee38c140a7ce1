package agentcmd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// hostAddrs is a host's address list, one LocalAddr per "link=address" item.
func hostAddrs(items ...string) []resolver.LocalAddr {
	var out []resolver.LocalAddr
	for _, it := range items {
		link, ip, _ := strings.Cut(it, "=")
		out = append(out, resolver.LocalAddr{Link: link, IP: netip.MustParseAddr(ip)})
	}
	return out
}

// A CIDR filter whose accepting rules contain no address of the host would take the Node's address
// of that type and family away: each such type and family is reported, and only those.
func TestCIDRMisses(t *testing.T) {
	dualStack := hostAddrs("lo=127.0.0.1", "lo=::1", "eth0=192.0.2.10", "eth0=2001:db8::10", "eth0=fe80::1")
	ipv4Only := hostAddrs("lo=127.0.0.1", "lo=::1", "eth0=192.0.2.10", "eth0=fe80::1")
	for _, tc := range []struct {
		name  string
		args  []string
		addrs []resolver.LocalAddr
		want  string // fmt of the misses
	}{
		{"no CIDR filter", nil, dualStack, "[]"},
		{"the filter matches", []string{"--internal-ip-cidrs=192.0.2.0/24,2001:db8::/32"}, dualStack, "[]"},
		{"a later rule matches", []string{"--internal-ip-cidrs=10.0.0.0/8,192.0.2.0/24"}, ipv4Only, "[]"},
		{"no such address on the host", []string{"--internal-ip-cidrs=10.0.0.0/8"}, ipv4Only,
			"[{InternalIP IPv4 [10.0.0.0/8]}]"},
		{"only ! rules: nothing is required", []string{"--internal-ip-cidrs=!10.0.0.0/8"}, dualStack, "[]"},
		{"! rules are not accepting ones", []string{"--internal-ip-cidrs=!192.0.2.0/24,10.0.0.0/8"}, ipv4Only,
			"[{InternalIP IPv4 [10.0.0.0/8]}]"},
		{"per family", []string{"--internal-ip-cidrs=192.0.2.0/24,fd00::/8"}, dualStack,
			"[{InternalIP IPv6 [fd00::/8]}]"},
		{"an IPv4 list rejects the host's IPv6 addresses", []string{"--internal-ip-cidrs=192.0.2.0/24"}, dualStack,
			"[{InternalIP IPv6 []}]"},
		{"an IPv4 list on an IPv4 host", []string{"--internal-ip-cidrs=192.0.2.0/24"}, ipv4Only, "[]"},
		{"loopback and link-local addresses are no node addresses", []string{"--internal-ip-cidrs=127.0.0.0/8,fe80::/10"}, dualStack,
			"[{InternalIP IPv4 [127.0.0.0/8]} {InternalIP IPv6 [fe80::/10]}]"},
		{"ExternalIP too", []string{"--external-ip-cidrs=203.0.113.0/24,2001:db8::/32"}, dualStack,
			"[{ExternalIP IPv4 [203.0.113.0/24]}]"},
		{"a host with no address at all", []string{"--internal-ip-cidrs=192.0.2.0/24"}, nil,
			"[{InternalIP IPv4 [192.0.2.0/24]}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(append([]string{"--node-name=n"}, tc.args...), env())
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(o.cidrMisses(tc.addrs)); got != tc.want {
				t.Errorf("%q: misses %s, want %s", tc.args, got, tc.want)
			}
		})
	}
}

// addrKernel is a host with a fixed address list (no routes).
type addrKernel struct {
	addrs []resolver.LocalAddr
	err   error
	reads int
}

func (k *addrKernel) RouteSource(netip.Addr) (netip.Addr, error) { return netip.Addr{}, nil }
func (k *addrKernel) Addresses() ([]resolver.LocalAddr, error) {
	k.reads++
	return k.addrs, k.err
}

// At start the agent warns, through its logger, about a CIDR filter that matches no address of the
// host; without a CIDR filter it does not even list the addresses.
func TestWarnCIDRMisses(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		k     *addrKernel
		want  string // "" no warning
		reads int
	}{
		{[]string{"--internal-ip-cidrs=10.0.0.0/8"}, &addrKernel{addrs: hostAddrs("eth0=192.0.2.10")},
			`level=WARN msg="--internal-ip-cidrs matches no IPv4 address of this host: nodeaddr publishes no IPv4 InternalIP and removes the Node's until such an address appears" type=InternalIP family=IPv4 cidrs=10.0.0.0/8` + "\n", 1},
		{[]string{"--internal-ip-cidrs=10.0.0.0/8"}, &addrKernel{addrs: hostAddrs("eth0=10.1.2.3")}, "", 1},
		{[]string{"--internal-ip-cidrs=10.0.0.0/8"}, &addrKernel{addrs: hostAddrs("eth0=10.1.2.3", "eth0=2001:db8::3")},
			`level=WARN msg="--internal-ip-cidrs has no IPv6 CIDR, so it rejects every IPv6 address of this host: nodeaddr publishes no IPv6 InternalIP and removes the Node's; for a dual-stack Node add a CIDR of that family" type=InternalIP family=IPv6` + "\n", 1},
		{nil, &addrKernel{}, "", 0},
		{[]string{"--internal-ip-cidrs=!10.0.0.0/8"}, &addrKernel{}, "", 0},
		{[]string{"--internal-ip-cidrs=10.0.0.0/8"}, &addrKernel{err: errors.New("netlink: permission denied")},
			`level=WARN msg="the host's addresses could not be read to check the --*-ip-cidrs filters" err="netlink: permission denied"` + "\n", 1},
	} {
		o, err := parse(append([]string{"--node-name=n"}, tc.args...), env())
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		}))
		(&command{opts: o, log: log}).warnCIDRMisses(tc.k)
		if logs.String() != tc.want || tc.k.reads != tc.reads {
			t.Errorf("%q: logged %q after %d address reads, want %q after %d", tc.args, logs.String(), tc.k.reads, tc.want, tc.reads)
		}
	}
}
