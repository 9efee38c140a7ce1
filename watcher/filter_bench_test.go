package watcher

import (
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// The benchmarks below cover the netlink receive path: every message the kernel sends goes through
// one Ignore call and, if kept, one Signal.Raise. The target is 0 allocs/op, so that a route storm
// (a BGP speaker, a busy CNI) costs CPU only, never garbage.

func benchAddr(s string, newAddr bool) netlink.AddrUpdate {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return netlink.AddrUpdate{
		LinkAddress: net.IPNet{IP: ip, Mask: n.Mask},
		LinkIndex:   2,
		Scope:       unix.RT_SCOPE_UNIVERSE,
		PreferedLft: 0xFFFFFFFF, // forever
		ValidLft:    0xFFFFFFFF,
		NewAddr:     newAddr,
	}
}

func BenchmarkAddrFilterIgnore(b *testing.B) {
	// A router advertisement refreshes lifetimes every few minutes: the kernel re-sends NEWADDR with
	// nothing else changed. Dropped.
	b.Run("repeated-newaddr", func(b *testing.B) {
		var f addrFilter
		u := benchAddr("2001:db8::10/64", true)
		f.Ignore(u)
		b.ReportAllocs()
		for b.Loop() {
			if !f.Ignore(u) {
				b.Fatal("repeated NEWADDR kept")
			}
		}
	})
	// A new address arrives, then goes: both messages are kept. One op is one message.
	b.Run("new-address", func(b *testing.B) {
		var f addrFilter
		add, del := benchAddr("192.0.2.10/24", true), benchAddr("192.0.2.10/24", false)
		f.Ignore(add)
		f.Ignore(del)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			u := add
			if i&1 == 1 {
				u = del
			}
			i++
			if f.Ignore(u) {
				b.Fatal("new address dropped")
			}
		}
	})
	// DAD completes: same address, flags changed. Kept.
	b.Run("flags-changed", func(b *testing.B) {
		var f addrFilter
		tentative, done := benchAddr("2001:db8::10/64", true), benchAddr("2001:db8::10/64", true)
		tentative.Flags = unix.IFA_F_TENTATIVE
		f.Ignore(tentative)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			u := done
			if i&1 == 1 {
				u = tentative
			}
			i++
			if f.Ignore(u) {
				b.Fatal("flag change dropped")
			}
		}
	})
	// Link-local addresses are dropped before any lookup.
	b.Run("link-local", func(b *testing.B) {
		var f addrFilter
		u := benchAddr("fe80::1/64", true)
		b.ReportAllocs()
		for b.Loop() {
			if !f.Ignore(u) {
				b.Fatal("link-local kept")
			}
		}
	})
}

func BenchmarkRouteFilterIgnore(b *testing.B) {
	_, dst, _ := net.ParseCIDR("10.20.0.0/16")
	route := func(table int) netlink.RouteUpdate {
		return netlink.RouteUpdate{Type: unix.RTM_NEWROUTE, Route: netlink.Route{
			LinkIndex: 2, Dst: dst, Gw: net.ParseIP("192.0.2.1"), Table: table,
			Type: unix.RTN_UNICAST, Protocol: unix.RTPROT_BOOT, Scope: unix.RT_SCOPE_UNIVERSE,
		}}
	}
	b.Run("main-table", func(b *testing.B) {
		f := routeFilter{}
		u := route(unix.RT_TABLE_MAIN)
		b.ReportAllocs()
		for b.Loop() {
			if f.Ignore(u) {
				b.Fatal("main-table route dropped")
			}
		}
	})
	// A BGP speaker or a CNI filling its own table (no rule points lookups at it). Dropped.
	b.Run("ignored-table", func(b *testing.B) {
		f := routeFilter{Tables: map[int]bool{100: true}}
		u := route(200)
		b.ReportAllocs()
		for b.Loop() {
			if !f.Ignore(u) {
				b.Fatal("route in an unused table kept")
			}
		}
	})
}

func BenchmarkLinkFilterIgnore(b *testing.B) {
	link := func(oper netlink.LinkOperState) netlink.LinkUpdate {
		attrs := netlink.LinkAttrs{Index: 2, Name: "eth0", OperState: oper,
			Flags: net.FlagUp | net.FlagRunning, RawFlags: unix.IFF_UP | unix.IFF_RUNNING | unix.IFF_LOWER_UP}
		return netlink.LinkUpdate{
			IfInfomsg: nl.IfInfomsg{IfInfomsg: unix.IfInfomsg{Index: 2, Flags: attrs.RawFlags}},
			Header:    unix.NlMsghdr{Type: unix.RTM_NEWLINK},
			Link:      &netlink.Device{LinkAttrs: attrs},
		}
	}
	// Statistics refreshes repeat the known state. Dropped.
	b.Run("repeated", func(b *testing.B) {
		var f linkFilter
		u := link(netlink.OperUp)
		f.Ignore(u)
		b.ReportAllocs()
		for b.Loop() {
			if !f.Ignore(u) {
				b.Fatal("repeated link state kept")
			}
		}
	})
	// Carrier flaps: the operational state alternates. Kept.
	b.Run("state-changed", func(b *testing.B) {
		var f linkFilter
		up, down := link(netlink.OperUp), link(netlink.OperDown)
		f.Ignore(up)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			u := down
			if i&1 == 1 {
				u = up
			}
			i++
			if f.Ignore(u) {
				b.Fatal("link state change dropped")
			}
		}
	})
}

func BenchmarkSignalRaise(b *testing.B) {
	// A burst: the slot is already full, Raise only takes the mutex and finds the channel full.
	b.Run("pending", func(b *testing.B) {
		s := NewSignal()
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			s.Raise(now)
		}
	})
	// The first event of a burst, consumed each time: Raise then Take, as the resolver does.
	b.Run("raise-take", func(b *testing.B) {
		s := NewSignal()
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			s.Raise(now)
			<-s.C()
			s.Take()
		}
	})
}
