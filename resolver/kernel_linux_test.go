package resolver

import (
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodeaddr/nodeaddr/internal/netnstest"
)

// TestMain runs the package's tests inside a throwaway network namespace (see netnstest); the kernel
// tests below skip when it could not be made.
func TestMain(m *testing.M) { os.Exit(netnstest.Main(m)) }

// Targets outside every test network: only looked up with RTM_GETROUTE, never sent anything.
var (
	kTarget4 = netip.MustParseAddr("198.51.100.1")
	kTarget6 = netip.MustParseAddr("2001:db8:ffff::1")
)

func resolveKernel(t *testing.T, targets ...netip.Addr) (State, []Skip) {
	t.Helper()
	var ts []Target
	for _, ip := range targets {
		ts = append(ts, Target{Type: ExternalIP, IP: ip})
	}
	st, skips, err := resolveRoutes(Netlink{}, []AddressType{ExternalIP}, ts)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return st, skips
}

func wantResolved(t *testing.T, want []Address, targets ...netip.Addr) {
	t.Helper()
	st, skips := resolveKernel(t, targets...)
	if !slices.Equal(st.Addresses, want) {
		t.Fatalf("resolveRoutes(%v) = %v (skips %+v), want %v", targets, st.Addresses, skips, want)
	}
}

func TestKernelIPv4DefaultRoute(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "r4")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "r4")
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1")

	src, err := Netlink{}.RouteSource(kTarget4)
	if err != nil || src != netip.MustParseAddr("192.0.2.10") {
		t.Fatalf("RouteSource(%s) = %v, %v; want 192.0.2.10", kTarget4, src, err)
	}
	wantResolved(t, []Address{{ExternalIP, netip.MustParseAddr("192.0.2.10"), "r4", 24}}, kTarget4)

	// A secondary address in the same subnet (IFA_F_SECONDARY = 0x01) is how keepalived adds a
	// VIP: skipped even when the route names it as its source, unless --allow-secondary.
	netnstest.IP(t, "addr", "add", "192.0.2.11/24", "dev", "r4")
	netnstest.IP(t, "route", "replace", "default", "via", "192.0.2.1", "src", "192.0.2.11")
	addrs, err := Netlink{}.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(addrs, func(a LocalAddr) bool { return a.IP == netip.MustParseAddr("192.0.2.11") })
	if i < 0 || addrs[i].Flags&ifaSecondary == 0 || addrs[i].Link != "r4" {
		t.Fatalf("192.0.2.11 in %+v: want it on r4 flagged secondary", addrs)
	}
	st, skips := resolveKernel(t, kTarget4)
	if len(st.Addresses) != 0 || len(skips) != 1 || skips[0].Reason != errSecondary.Error() {
		t.Fatalf("Resolve with a secondary route source = %v, skips %+v; want nothing, skipped as secondary", st.Addresses, skips)
	}
	st, _, err = ResolvePolicy(Netlink{}, Policy{Managed: []AddressType{ExternalIP},
		Targets: []Target{{Type: ExternalIP, IP: kTarget4}}, AllowSecondary: true}, State{})
	if err != nil || !slices.Equal(st.Addresses, []Address{{ExternalIP, netip.MustParseAddr("192.0.2.11"), "r4", 24}}) {
		t.Fatalf("Resolve with --allow-secondary = %v, %v; want 192.0.2.11", st.Addresses, err)
	}
}

func TestKernelIPv6DefaultRoute(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "r6")
	netnstest.IP(t, "-6", "addr", "add", "2001:db8::10/64", "dev", "r6", "nodad")
	netnstest.IP(t, "-6", "route", "add", "default", "via", "2001:db8::1", "dev", "r6")

	src, err := Netlink{}.RouteSource(kTarget6)
	if err != nil || src != netip.MustParseAddr("2001:db8::10") {
		t.Fatalf("RouteSource(%s) = %v, %v; want 2001:db8::10", kTarget6, src, err)
	}
	wantResolved(t, []Address{{ExternalIP, netip.MustParseAddr("2001:db8::10"), "r6", 64}}, kTarget6)
}

func TestKernelDualStack(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "rd")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "rd")
	netnstest.IP(t, "-6", "addr", "add", "2001:db8::10/64", "dev", "rd", "nodad")
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1")
	netnstest.IP(t, "-6", "route", "add", "default", "via", "2001:db8::1", "dev", "rd")
	wantResolved(t, []Address{
		{ExternalIP, netip.MustParseAddr("192.0.2.10"), "rd", 24},
		{ExternalIP, netip.MustParseAddr("2001:db8::10"), "rd", 64},
	}, kTarget6, kTarget4)
}

func TestKernelDefaultRouteMoves(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "rma")
	netnstest.Veth(t, "rmb")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "rma")
	netnstest.IP(t, "addr", "add", "203.0.113.10/24", "dev", "rmb")
	netnstest.IP(t, "-6", "addr", "add", "2001:db8:a::10/64", "dev", "rma", "nodad")
	netnstest.IP(t, "-6", "addr", "add", "2001:db8:b::10/64", "dev", "rmb", "nodad")
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1", "metric", "100")
	netnstest.IP(t, "route", "add", "default", "via", "203.0.113.1", "metric", "200")
	netnstest.IP(t, "-6", "route", "add", "default", "via", "2001:db8:a::1", "dev", "rma", "metric", "100")
	netnstest.IP(t, "-6", "route", "add", "default", "via", "2001:db8:b::1", "dev", "rmb", "metric", "200")
	onA := []Address{
		{ExternalIP, netip.MustParseAddr("192.0.2.10"), "rma", 24},
		{ExternalIP, netip.MustParseAddr("2001:db8:a::10"), "rma", 64},
	}
	onB := []Address{
		{ExternalIP, netip.MustParseAddr("203.0.113.10"), "rmb", 24},
		{ExternalIP, netip.MustParseAddr("2001:db8:b::10"), "rmb", 64},
	}
	wantResolved(t, onA, kTarget4, kTarget6)

	// A better default route appears on b.
	netnstest.IP(t, "route", "add", "default", "via", "203.0.113.1", "metric", "50")
	netnstest.IP(t, "-6", "route", "add", "default", "via", "2001:db8:b::1", "dev", "rmb", "metric", "50")
	wantResolved(t, onB, kTarget4, kTarget6)

	// It goes again.
	netnstest.IP(t, "route", "del", "default", "via", "203.0.113.1", "metric", "50")
	netnstest.IP(t, "-6", "route", "del", "default", "via", "2001:db8:b::1", "dev", "rmb", "metric", "50")
	wantResolved(t, onA, kTarget4, kTarget6)

	// The default route on a is deleted: the one on b remains.
	netnstest.IP(t, "route", "del", "default", "via", "192.0.2.1")
	netnstest.IP(t, "-6", "route", "del", "default", "via", "2001:db8:a::1", "dev", "rma")
	wantResolved(t, onB, kTarget4, kTarget6)
}

func TestKernelTentativeIPv6(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "rt")
	netnstest.Sysctl(t, "net.ipv6.conf.rt.accept_dad", "1")
	netnstest.Sysctl(t, "net.ipv6.conf.rt.dad_transmits", "1")
	netnstest.Sysctl(t, "net.ipv6.conf.rt.optimistic_dad", "0")
	netnstest.IP(t, "-6", "addr", "add", "2001:db8:7::10/64", "dev", "rt")
	netnstest.IP(t, "-6", "route", "add", "default", "via", "2001:db8:7::1", "dev", "rt")
	addr := netip.MustParseAddr("2001:db8:7::10")

	st, skips := resolveKernel(t, kTarget6)
	// Checked after the resolution: tentative then means tentative during it (DAD never restarts
	// by itself).
	la := findKernelAddr(t, addr)
	if la.Flags&ifaTentative == 0 {
		t.Fatalf("%s flags %#x: not tentative right after it was added; DAD did not run", addr, la.Flags)
	}
	if len(st.Addresses) != 0 {
		t.Fatalf("Resolve while %s is tentative = %v (skips %+v), want nothing", addr, st.Addresses, skips)
	}

	// DAD takes about a second; poll, do not sleep a fixed time.
	want := []Address{{ExternalIP, addr, "rt", 64}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, skips = resolveKernel(t, kTarget6)
		if len(st.Addresses) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still not resolved after DAD should have completed (skips %+v, flags %#x)",
				addr, skips, findKernelAddr(t, addr).Flags)
		}
	}
	if !slices.Equal(st.Addresses, want) {
		t.Fatalf("Resolve after DAD = %v, want %v", st.Addresses, want)
	}
	if la := findKernelAddr(t, addr); la.Flags&(ifaTentative|ifaDADFailed) != 0 {
		t.Errorf("%s flags %#x after it resolved, want neither tentative nor dadfailed", addr, la.Flags)
	}
}

func findKernelAddr(t *testing.T, ip netip.Addr) LocalAddr {
	t.Helper()
	addrs, err := Netlink{}.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.IP == ip {
			return a
		}
	}
	t.Fatalf("%s not in the address list %+v", ip, addrs)
	return LocalAddr{}
}

func TestKernelNoRoute(t *testing.T) {
	netnstest.Require(t)
	for _, dst := range []netip.Addr{kTarget4, kTarget6} {
		src, err := Netlink{}.RouteSource(dst)
		if err != nil || src.IsValid() {
			t.Errorf("RouteSource(%s) without a route = %v, %v; want the zero Addr and no error", dst, src, err)
		}
	}
	st, skips := resolveKernel(t, kTarget4, kTarget6)
	if len(st.Addresses) != 0 || len(skips) != 2 || skips[0].Reason != "no route" || skips[1].Reason != "no route" {
		t.Errorf("Resolve without routes = %v, skips %+v; want nothing, two \"no route\" skips", st.Addresses, skips)
	}
}

func TestKernelRejectRoutes(t *testing.T) {
	netnstest.Require(t)
	// An address exists: the kernel could otherwise pick it as a source.
	netnstest.Veth(t, "rr")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "rr")
	netnstest.IP(t, "-6", "addr", "add", "2001:db8::10/64", "dev", "rr", "nodad")
	for _, typ := range []string{"unreachable", "blackhole", "prohibit"} {
		t.Run(typ, func(t *testing.T) {
			netnstest.IP(t, "route", "add", typ, "default")
			netnstest.IP(t, "-6", "route", "add", typ, "default")
			t.Cleanup(func() {
				netnstest.IP(t, "route", "del", typ, "default")
				netnstest.IP(t, "-6", "route", "del", typ, "default")
			})
			for _, dst := range []netip.Addr{kTarget4, kTarget6} {
				src, err := Netlink{}.RouteSource(dst)
				if err != nil || src.IsValid() {
					t.Errorf("RouteSource(%s) via %s default = %v, %v; want the zero Addr and no error", dst, typ, src, err)
				}
			}
		})
	}
}

func TestKernelPolicyRouting(t *testing.T) {
	netnstest.Require(t)
	netnstest.Veth(t, "rpa")
	netnstest.Veth(t, "rpb")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "rpa")
	netnstest.IP(t, "addr", "add", "203.0.113.10/24", "dev", "rpb")
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1")
	netnstest.IP(t, "route", "add", "default", "via", "203.0.113.1", "table", "100")
	netnstest.IP(t, "rule", "add", "to", "198.51.100.0/24", "table", "100", "priority", "1000")
	t.Cleanup(func() { netnstest.IP(t, "rule", "del", "priority", "1000") })

	tables, err := Netlink{}.RuleTables()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(tables)
	tables = slices.Compact(tables)
	if want := []int{100, unix.RT_TABLE_DEFAULT, unix.RT_TABLE_MAIN, unix.RT_TABLE_LOCAL}; !slices.Equal(tables, want) {
		t.Errorf("RouteTables = %v, want %v", tables, want)
	}
	// The lookup follows the rule into table 100.
	wantResolved(t, []Address{{ExternalIP, netip.MustParseAddr("203.0.113.10"), "rpb", 24}}, kTarget4)
}
