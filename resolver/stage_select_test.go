package resolver

import (
	"fmt"
	"net/netip"
	"regexp"
	"testing"

	"golang.org/x/sys/unix"
)

// The selection names the addresses it refused because duplicate address detection failed, once
// each, with their interface and the type that considered them first; other refusals (a tentative
// address, still in DAD) are not among them.
func TestResolvePolicyNamesDADFailed(t *testing.T) {
	gua, target := netip.MustParseAddr("2001:db8:1::10"), netip.MustParseAddr("2001:db8:53::1")
	la := func(ip, link string, flags int) LocalAddr {
		return LocalAddr{IP: netip.MustParseAddr(ip), LinkIndex: 2, Link: link, PrefixLen: 64, PreferredLft: 0xFFFFFFFF, Flags: flags}
	}
	k := tableKernel{routes: map[netip.Addr]netip.Addr{target: gua}, addrs: []LocalAddr{
		la("2001:db8:1::10", "eth0", unix.IFA_F_PERMANENT),
		la("fd00:1::10", "eth0", unix.IFA_F_PERMANENT|ifaDADFailed),
		la("fd00:1::11", "eth0", unix.IFA_F_PERMANENT|ifaTentative),
		la("fd00:2::10", "eth1", unix.IFA_F_PERMANENT|ifaDADFailed),
	}}
	cidrs := TypePolicy{CIDRs: []CIDRRule{{Prefix: netip.MustParsePrefix("fd00::/8")}, {Prefix: netip.MustParsePrefix("2000::/3")}}}
	p := Policy{Managed: []AddressType{InternalIP, ExternalIP},
		Targets: []Target{{Type: InternalIP, IP: target}, {Type: ExternalIP, IP: target}},
		Types: map[AddressType]TypePolicy{
			InternalIP: {CIDRs: cidrs.CIDRs, Interfaces: []*regexp.Regexp{regexp.MustCompile("^eth0$")}},
			ExternalIP: cidrs,
		}}
	s, _, err := ResolvePolicy(k, p, State{})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(s.DADFailed, " ", s.String())
	if want := "[InternalIP=fd00:1::10 ExternalIP=fd00:2::10] [InternalIP=2001:db8:1::10 ExternalIP=2001:db8:1::10]"; got != want {
		t.Errorf("DADFailed and addresses %s, want %s", got, want)
	}
	if s.DADFailed[0].Interface != "eth0" || s.DADFailed[1].Interface != "eth1" {
		t.Errorf("interfaces %+v, want eth0 and eth1", s.DADFailed)
	}
}
