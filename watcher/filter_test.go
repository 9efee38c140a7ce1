package watcher

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

func ipNet(t *testing.T, cidr string) net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return *n
}

const forever = 0xFFFFFFFF

func TestAddrFilterIgnoresUninterestingAddresses(t *testing.T) {
	for _, cidr := range []string{
		"fe80::1/64", "169.254.10.1/16", // link-local
		"ff02::1/128", "224.0.0.1/32", // multicast
		"::1/128", "127.0.0.1/8", // loopback
	} {
		t.Run(cidr, func(t *testing.T) {
			var f addrFilter
			for _, isNew := range []bool{true, false} {
				u := netlink.AddrUpdate{LinkAddress: ipNet(t, cidr), LinkIndex: 2, NewAddr: isNew, PreferedLft: forever}
				if !f.Ignore(u) {
					t.Errorf("Ignore(%s, new=%v) = false, want true", cidr, isNew)
				}
			}
		})
	}
	var f addrFilter
	if !f.Ignore(netlink.AddrUpdate{NewAddr: true}) {
		t.Error("Ignore(update without an IP) = false, want true")
	}
}

func TestAddrFilterSequence(t *testing.T) {
	type step struct {
		name string
		u    netlink.AddrUpdate
		want bool // ignored
	}
	add := func(cidr string, link, flags, preferred int) netlink.AddrUpdate {
		return netlink.AddrUpdate{LinkAddress: ipNet(t, cidr), LinkIndex: link, NewAddr: true,
			Flags: flags, PreferedLft: preferred, ValidLft: forever}
	}
	del := func(cidr string, link int) netlink.AddrUpdate {
		return netlink.AddrUpdate{LinkAddress: ipNet(t, cidr), LinkIndex: link, NewAddr: false}
	}
	refreshed := add("2001:db8::10/64", 2, unix.IFA_F_PERMANENT, 1800)
	refreshed.ValidLft = 3600
	steps := []step{
		{"new IPv6 address, tentative", add("2001:db8::10/64", 2, unix.IFA_F_TENTATIVE, forever), false},
		{"same message again", add("2001:db8::10/64", 2, unix.IFA_F_TENTATIVE, forever), true},
		{"DAD completed: tentative cleared", add("2001:db8::10/64", 2, unix.IFA_F_PERMANENT, forever), false},
		{"lifetime refresh only", add("2001:db8::10/64", 2, unix.IFA_F_PERMANENT, 3600), true},
		{"another lifetime refresh", refreshed, true},
		{"deprecated: preferred lifetime 0", add("2001:db8::10/64", 2, unix.IFA_F_PERMANENT, 0), false},
		{"deprecated again", add("2001:db8::10/64", 2, unix.IFA_F_PERMANENT, 0), true},
		{"same address on another link", add("2001:db8::10/64", 3, unix.IFA_F_PERMANENT, 0), false},
		{"same address, other prefix length", add("2001:db8::10/128", 2, unix.IFA_F_PERMANENT, 0), false},
		{"new IPv4 address", add("192.0.2.10/24", 2, unix.IFA_F_PERMANENT, forever), false},
		{"IPv4 repeated", add("192.0.2.10/24", 2, unix.IFA_F_PERMANENT, forever), true},
		{"IPv4 deleted", del("192.0.2.10/24", 2), false},
		{"IPv4 added again after the delete", add("192.0.2.10/24", 2, unix.IFA_F_PERMANENT, forever), false},
		{"IPv4 deleted twice", del("192.0.2.10/24", 2), false},
		{"IPv4 delete repeated", del("192.0.2.10/24", 2), false},
	}
	var f addrFilter
	for i, s := range steps {
		if got := f.Ignore(s.u); got != s.want {
			t.Errorf("step %d (%s): Ignore = %v, want %v", i, s.name, got, s.want)
		}
	}
	f.Reset()
	if f.Ignore(add("2001:db8::10/64", 2, unix.IFA_F_PERMANENT, 0)) {
		t.Error("after Reset: a known address was ignored; messages may have been lost, want it passed")
	}
}

func TestRouteFilter(t *testing.T) {
	route := func(table int, dst string, mod func(*netlink.RouteUpdate)) netlink.RouteUpdate {
		u := netlink.RouteUpdate{Type: unix.RTM_NEWROUTE, Route: netlink.Route{
			Table: table, Type: unix.RTN_UNICAST, Protocol: unix.RTPROT_BOOT, LinkIndex: 2}}
		if dst != "" {
			n := ipNet(t, dst)
			n.IP = n.IP.Mask(n.Mask)
			u.Dst = &n
		}
		if mod != nil {
			mod(&u)
		}
		return u
	}
	deleted := func(u *netlink.RouteUpdate) { u.Type = unix.RTM_DELROUTE }
	tests := []struct {
		name   string
		tables map[int]bool
		u      netlink.RouteUpdate
		want   bool // ignored
	}{
		{name: "main table default route", u: route(unix.RT_TABLE_MAIN, "", nil), want: false},
		{name: "main table default route 0.0.0.0/0", u: route(unix.RT_TABLE_MAIN, "0.0.0.0/0", nil), want: false},
		{name: "main table default route deleted", u: route(unix.RT_TABLE_MAIN, "", deleted), want: false},
		{name: "main table IPv6 prefix", u: route(unix.RT_TABLE_MAIN, "2001:db8::/64", nil), want: false},
		{name: "local table", u: route(unix.RT_TABLE_LOCAL, "192.0.2.10/32", func(u *netlink.RouteUpdate) { u.Route.Type = unix.RTN_LOCAL }), want: false},
		{name: "default table", u: route(unix.RT_TABLE_DEFAULT, "", nil), want: false},
		{name: "table 0 (unspecified)", u: route(0, "", nil), want: false},
		{name: "IPv4 link-local prefix passes", u: route(unix.RT_TABLE_MAIN, "169.254.0.0/16", nil), want: false},
		{name: "table 100 not used by a rule", u: route(100, "", nil), want: true},
		{name: "table 100 used by a rule", tables: map[int]bool{100: true}, u: route(100, "", nil), want: false},
		{name: "table 101 while 100 is used", tables: map[int]bool{100: true}, u: route(101, "", nil), want: true},
		{name: "IPv4 multicast destination", u: route(unix.RT_TABLE_MAIN, "224.0.0.0/4", nil), want: true},
		{name: "IPv6 multicast destination", u: route(unix.RT_TABLE_MAIN, "ff00::/8", nil), want: true},
		{name: "IPv6 link-local destination", u: route(unix.RT_TABLE_MAIN, "fe80::/64", nil), want: true},
		{name: "cloned (cached) route", u: route(unix.RT_TABLE_MAIN, "198.51.100.1/32", func(u *netlink.RouteUpdate) { u.Flags = unix.RTM_F_CLONED }), want: true},
		{name: "broadcast route", u: route(unix.RT_TABLE_LOCAL, "192.0.2.255/32", func(u *netlink.RouteUpdate) { u.Route.Type = unix.RTN_BROADCAST }), want: true},
		{name: "broadcast route deleted", u: route(unix.RT_TABLE_LOCAL, "192.0.2.255/32", func(u *netlink.RouteUpdate) { u.Route.Type = unix.RTN_BROADCAST; deleted(u) }), want: true},
		{name: "multicast route type", u: route(unix.RT_TABLE_LOCAL, "", func(u *netlink.RouteUpdate) { u.Route.Type = unix.RTN_MULTICAST }), want: true},
		{name: "anycast route", u: route(unix.RT_TABLE_LOCAL, "2001:db8::/128", func(u *netlink.RouteUpdate) { u.Route.Type = unix.RTN_ANYCAST }), want: true},
		{name: "unreachable route", u: route(unix.RT_TABLE_MAIN, "", func(u *netlink.RouteUpdate) { u.Route.Type = unix.RTN_UNREACHABLE }), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := routeFilter{Tables: tt.tables}
			if got := f.Ignore(tt.u); got != tt.want {
				t.Errorf("Ignore(%+v) = %v, want %v", tt.u, got, tt.want)
			}
		})
	}
}

func TestLinkFilterSequence(t *testing.T) {
	const upRunning = unix.IFF_UP | unix.IFF_RUNNING | unix.IFF_LOWER_UP | unix.IFF_BROADCAST | unix.IFF_MULTICAST
	link := func(msgType uint16, index int32, flags uint32, name string, oper netlink.LinkOperState, master int) netlink.LinkUpdate {
		return netlink.LinkUpdate{
			IfInfomsg: nl.IfInfomsg{IfInfomsg: unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: index, Flags: flags}},
			Header:    unix.NlMsghdr{Type: msgType},
			Link:      &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: int(index), Name: name, OperState: oper, MasterIndex: master}},
		}
	}
	newLink := func(index int32, flags uint32, name string, oper netlink.LinkOperState, master int) netlink.LinkUpdate {
		return link(unix.RTM_NEWLINK, index, flags, name, oper, master)
	}
	steps := []struct {
		name string
		u    netlink.LinkUpdate
		want bool // ignored
	}{
		{"new link", newLink(3, upRunning, "eth0", netlink.OperUp, 0), false},
		{"same state again (statistics refresh)", newLink(3, upRunning, "eth0", netlink.OperUp, 0), true},
		{"irrelevant flag (promiscuous)", newLink(3, upRunning|unix.IFF_PROMISC, "eth0", netlink.OperUp, 0), true},
		{"oper state down (carrier lost)", newLink(3, upRunning&^(unix.IFF_RUNNING|unix.IFF_LOWER_UP), "eth0", netlink.OperDown, 0), false},
		{"oper state down again", newLink(3, upRunning&^(unix.IFF_RUNNING|unix.IFF_LOWER_UP), "eth0", netlink.OperDown, 0), true},
		{"oper state up", newLink(3, upRunning, "eth0", netlink.OperUp, 0), false},
		{"oper state change alone", newLink(3, upRunning, "eth0", netlink.OperDormant, 0), false},
		{"administratively down", newLink(3, unix.IFF_BROADCAST, "eth0", netlink.OperDormant, 0), false},
		{"up again", newLink(3, upRunning, "eth0", netlink.OperUp, 0), false},
		{"renamed", newLink(3, upRunning, "wan0", netlink.OperUp, 0), false},
		{"enslaved", newLink(3, upRunning, "wan0", netlink.OperUp, 7), false},
		{"another link", newLink(4, upRunning, "eth1", netlink.OperUp, 0), false},
		{"deleted", link(unix.RTM_DELLINK, 3, upRunning, "wan0", netlink.OperUp, 7), false},
		{"deleted again", link(unix.RTM_DELLINK, 3, upRunning, "wan0", netlink.OperUp, 7), false},
		{"index reused with the same state", newLink(3, upRunning, "wan0", netlink.OperUp, 7), false},
		{"other link unaffected", newLink(4, upRunning, "eth1", netlink.OperUp, 0), true},
	}
	var f linkFilter
	for i, s := range steps {
		if got := f.Ignore(s.u); got != s.want {
			t.Errorf("step %d (%s): Ignore = %v, want %v", i, s.name, got, s.want)
		}
	}
	f.Reset()
	if f.Ignore(newLink(4, upRunning, "eth1", netlink.OperUp, 0)) {
		t.Error("after Reset: a known link state was ignored, want it passed")
	}
}
