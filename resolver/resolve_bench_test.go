package resolver

import (
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// tableKernel is a read-only Kernel for benchmarks. Unlike fakeKernel it takes no lock and does not
// copy the address list, so the figures are those of Resolve itself and not of the fake.
type tableKernel struct {
	routes map[netip.Addr]netip.Addr
	addrs  []LocalAddr
}

func (k tableKernel) RouteSource(dst netip.Addr) (netip.Addr, error) { return k.routes[dst], nil }
func (k tableKernel) Addresses() ([]LocalAddr, error)                { return k.addrs, nil }

// busyHost returns a dual-stack host with n local addresses (link-local, container bridges, VIPs) of
// which the two route sources come last, so every lookup scans the whole list.
func busyHost(n int, targets []Target) tableKernel {
	src4, src6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	k := tableKernel{routes: map[netip.Addr]netip.Addr{}}
	for i := range n - 2 {
		a := LocalAddr{LinkIndex: 3 + i/4, Link: fmt.Sprintf("veth%d", i/4), PreferredLft: 0xFFFFFFFF}
		switch i % 4 {
		case 0:
			a.IP = netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})
		case 1:
			a.IP = netip.AddrFrom16([16]byte{0xfe, 0x80, 14: byte(i >> 8), 15: byte(i)})
			a.Scope = unix.RT_SCOPE_LINK
		case 2:
			a.IP = netip.AddrFrom16([16]byte{0xfd, 0x00, 0x02, 0x44, 14: byte(i >> 8), 15: byte(i)})
		case 3:
			a.IP = netip.AddrFrom4([4]byte{172, 17, byte(i >> 8), byte(i)})
		}
		k.addrs = append(k.addrs, a)
	}
	k.addrs = append(k.addrs,
		LocalAddr{IP: src4, LinkIndex: 2, Link: "eth0", PreferredLft: 0xFFFFFFFF},
		LocalAddr{IP: src6, LinkIndex: 2, Link: "eth0", Flags: unix.IFA_F_PERMANENT, PreferredLft: 0xFFFFFFFF})
	for _, t := range targets {
		if FamilyOf(t.IP) == IPv4 {
			k.routes[t.IP] = src4
		} else {
			k.routes[t.IP] = src6
		}
	}
	return k
}

func BenchmarkResolve(b *testing.B) {
	ext := []Target{
		{Type: ExternalIP, IP: netip.MustParseAddr("8.8.8.8")},
		{Type: ExternalIP, IP: netip.MustParseAddr("2001:4860:4860::8888")},
	}
	both := append([]Target{
		{Type: InternalIP, IP: netip.MustParseAddr("10.0.0.1")},
		{Type: InternalIP, IP: netip.MustParseAddr("fd00::1")},
	}, ext...)
	for _, bc := range []struct {
		name    string
		managed []AddressType
		targets []Target
	}{
		{"external-dual-stack-50-addrs", []AddressType{ExternalIP}, ext},
		{"internal+external-dual-stack-50-addrs", []AddressType{InternalIP, ExternalIP}, both},
	} {
		b.Run(bc.name, func(b *testing.B) {
			k := busyHost(50, bc.targets)
			st, _, err := resolveRoutes(k, bc.managed, bc.targets)
			if err != nil || len(st.Addresses) != len(bc.targets) {
				b.Fatalf("Resolve = %v, %v; want %d addresses", st, err, len(bc.targets))
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := resolveRoutes(k, bc.managed, bc.targets); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStateEqual is the check Publish makes on every resolution (a periodic resync resolves the
// same state again and must cost nothing downstream).
func BenchmarkStateEqual(b *testing.B) {
	s := State{Managed: []AddressType{InternalIP, ExternalIP}, Addresses: []Address{
		{InternalIP, netip.MustParseAddr("10.0.0.5"), "eth0", 0},
		{InternalIP, netip.MustParseAddr("fd00::5"), "eth0", 0},
		{ExternalIP, netip.MustParseAddr("192.0.2.10"), "eth1", 0},
		{ExternalIP, netip.MustParseAddr("2001:db8::10"), "eth1", 0},
	}}
	o := s.Normalize()
	b.ReportAllocs()
	for b.Loop() {
		if !s.Equal(o) {
			b.Fatal("not equal")
		}
	}
}
