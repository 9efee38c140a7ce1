package resolver

import (
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeKernel is a table of routes (target -> source) and local addresses. It is safe for concurrent
// use so a test can change it while a Loop reads it.
type fakeKernel struct {
	mu        sync.Mutex
	routes    map[netip.Addr]netip.Addr
	routeErr  error
	addrs     []LocalAddr
	addrErr   error
	routeGets int
	addrLists int
	// onRouteGet, if set, runs (locked) on every RouteSource call.
	onRouteGet func(*fakeKernel)
}

func (k *fakeKernel) RouteSource(dst netip.Addr) (netip.Addr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.routeGets++
	if k.onRouteGet != nil {
		k.onRouteGet(k)
	}
	if k.routeErr != nil {
		return netip.Addr{}, k.routeErr
	}
	return k.routes[dst], nil
}

func (k *fakeKernel) Addresses() ([]LocalAddr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addrLists++
	if k.addrErr != nil {
		return nil, k.addrErr
	}
	return slices.Clone(k.addrs), nil
}

// set replaces the routes and addresses.
func (k *fakeKernel) set(routes map[netip.Addr]netip.Addr, addrs ...LocalAddr) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.routes, k.addrs = routes, addrs
}

func (k *fakeKernel) setRouteErr(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.routeErr = err
}

const forever = 0xFFFFFFFF

var ip = netip.MustParseAddr

// local returns a usable global address on eth0.
func local(s string) LocalAddr {
	return LocalAddr{IP: ip(s), LinkIndex: 2, Link: "eth0", PreferredLft: forever}
}

func TestUsable(t *testing.T) {
	v4, v6 := local("192.0.2.10"), local("2001:db8::10")
	with := func(a LocalAddr, f func(*LocalAddr)) LocalAddr { f(&a); return a }
	tests := []struct {
		name string
		addr LocalAddr
		want error
	}{
		{"IPv4 global", v4, nil},
		{"IPv6 global", v6, nil},
		{"IPv6 permanent, nodad", with(v6, func(a *LocalAddr) { a.Flags = unix.IFA_F_PERMANENT | unix.IFA_F_NODAD }), nil},
		{"IPv4 secondary (0x01) is usable", with(v4, func(a *LocalAddr) { a.Flags = ifaSecondary }), nil},
		{"IPv6 temporary (0x01)", with(v6, func(a *LocalAddr) { a.Flags = ifaTemporary }), errTemporary},
		{"IPv6 tentative", with(v6, func(a *LocalAddr) { a.Flags = ifaTentative }), errTentative},
		{"IPv4 tentative", with(v4, func(a *LocalAddr) { a.Flags = ifaTentative }), errTentative},
		{"IPv6 DAD failed", with(v6, func(a *LocalAddr) { a.Flags = ifaDADFailed | ifaTentative }), errDADFailed},
		{"IPv6 deprecated flag", with(v6, func(a *LocalAddr) { a.Flags = ifaDeprecated }), errDeprecated},
		{"IPv6 preferred lifetime 0", with(v6, func(a *LocalAddr) { a.PreferredLft = 0 }), errDeprecated},
		{"IPv4 preferred lifetime 0", with(v4, func(a *LocalAddr) { a.PreferredLft = 0 }), errDeprecated},
		{"IPv6 finite preferred lifetime", with(v6, func(a *LocalAddr) { a.PreferredLft = 3600 }), nil},
		{"IPv6 optimistic", with(v6, func(a *LocalAddr) { a.Flags = ifaOptimistic }), errOptimistic},
		{"IPv6 optimistic during DAD", with(v6, func(a *LocalAddr) { a.Flags = ifaOptimistic | ifaTentative }), errTentative},
		{"link scope", with(v6, func(a *LocalAddr) { a.IP = ip("fe80::1"); a.Scope = unix.RT_SCOPE_LINK }), errScope},
		{"host scope", with(v4, func(a *LocalAddr) { a.IP = ip("127.0.0.1"); a.Scope = unix.RT_SCOPE_HOST }), errScope},
		{"site scope", with(v4, func(a *LocalAddr) { a.Scope = unix.RT_SCOPE_SITE }), errScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := usable(tt.addr); !errors.Is(got, tt.want) {
				t.Errorf("usable(%+v) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	t4, t6 := ip("198.51.100.1"), ip("2001:db8:ffff::1")
	src4, src6 := ip("192.0.2.10"), ip("2001:db8::10")
	both := []AddressType{InternalIP, ExternalIP}
	tentative := local("2001:db8::10")
	tentative.Flags = ifaTentative
	tests := []struct {
		name      string
		routes    map[netip.Addr]netip.Addr
		addrs     []LocalAddr
		targets   []Target
		want      []Address
		wantSkips []Skip
	}{
		{
			name:    "IPv4",
			routes:  map[netip.Addr]netip.Addr{t4: src4},
			addrs:   []LocalAddr{local("192.0.2.10")},
			targets: []Target{{Type: ExternalIP, IP: t4}},
			want:    []Address{{ExternalIP, src4, "eth0", 0}},
		},
		{
			name:    "dual stack, sorted IPv4 first",
			routes:  map[netip.Addr]netip.Addr{t4: src4, t6: src6},
			addrs:   []LocalAddr{local("2001:db8::10"), local("192.0.2.10")},
			targets: []Target{{Type: ExternalIP, IP: t6}, {Type: ExternalIP, IP: t4}},
			want:    []Address{{ExternalIP, src4, "eth0", 0}, {ExternalIP, src6, "eth0", 0}},
		},
		{
			name:    "two types from one source",
			routes:  map[netip.Addr]netip.Addr{t4: src4, ip("10.0.0.1"): src4},
			addrs:   []LocalAddr{local("192.0.2.10")},
			targets: []Target{{Type: ExternalIP, IP: t4}, {Type: InternalIP, IP: ip("10.0.0.1")}},
			want:    []Address{{InternalIP, src4, "eth0", 0}, {ExternalIP, src4, "eth0", 0}},
		},
		{
			name:      "no route: nothing, no error",
			routes:    map[netip.Addr]netip.Addr{},
			addrs:     []LocalAddr{local("192.0.2.10")},
			targets:   []Target{{Type: ExternalIP, IP: t4}},
			wantSkips: []Skip{{Target: Target{Type: ExternalIP, IP: t4}, Reason: "no route"}},
		},
		{
			name:      "source not local",
			routes:    map[netip.Addr]netip.Addr{t4: src4},
			addrs:     []LocalAddr{local("192.0.2.11")},
			targets:   []Target{{Type: ExternalIP, IP: t4}},
			wantSkips: []Skip{{Target: Target{Type: ExternalIP, IP: t4}, Source: src4, Reason: "source is not assigned to a local interface"}},
		},
		{
			name:    "tentative source skipped, other family kept",
			routes:  map[netip.Addr]netip.Addr{t4: src4, t6: src6},
			addrs:   []LocalAddr{local("192.0.2.10"), tentative},
			targets: []Target{{Type: ExternalIP, IP: t4}, {Type: ExternalIP, IP: t6}},
			want:    []Address{{ExternalIP, src4, "eth0", 0}},
			wantSkips: []Skip{{Target: Target{Type: ExternalIP, IP: t6}, Source: src6,
				Reason: "tentative (duplicate address detection running)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &fakeKernel{routes: tt.routes, addrs: tt.addrs}
			got, skips, err := resolveRoutes(k, both, tt.targets)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !slices.Equal(got.Managed, both) {
				t.Errorf("Managed = %v, want %v", got.Managed, both)
			}
			if !slices.Equal(got.Addresses, tt.want) {
				t.Errorf("Addresses = %v, want %v", got.Addresses, tt.want)
			}
			if !slices.Equal(skips, tt.wantSkips) {
				t.Errorf("skips = %+v, want %+v", skips, tt.wantSkips)
			}
			if k.addrLists > 1 {
				t.Errorf("listed addresses %d times in one resolution, want at most once", k.addrLists)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	boom := errors.New("netlink: boom")
	targets := []Target{{Type: ExternalIP, IP: ip("198.51.100.1")}}
	routes := map[netip.Addr]netip.Addr{ip("198.51.100.1"): ip("192.0.2.10")}

	k := &fakeKernel{routes: routes, routeErr: boom}
	st, skips, err := resolveRoutes(k, []AddressType{ExternalIP}, targets)
	if !errors.Is(err, boom) {
		t.Errorf("route error: err = %v, want it to wrap %v", err, boom)
	}
	if st.Managed != nil || st.Addresses != nil || skips != nil {
		t.Errorf("route error: got state %+v and skips %v, want nothing", st, skips)
	}

	k = &fakeKernel{routes: routes, addrErr: boom}
	if _, _, err := resolveRoutes(k, []AddressType{ExternalIP}, targets); !errors.Is(err, boom) {
		t.Errorf("address error: err = %v, want it to wrap %v", err, boom)
	}

	// Without a route the addresses are not even listed.
	k = &fakeKernel{addrErr: boom}
	st, _, err = resolveRoutes(k, []AddressType{ExternalIP}, targets)
	if err != nil || len(st.Addresses) != 0 || k.addrLists != 0 {
		t.Errorf("no route: state %v, err %v, %d address lists; want empty, nil, 0", st, err, k.addrLists)
	}
}

// resolveRoutes takes one snapshot of k and returns, for each target, the usable source address of the
// route toward it. A target without a route resolves to nothing. managed lists the types the caller
// manages (targets may be empty for a managed type). It is ResolvePolicy with route sources only and
// the default address filters (IPv4 secondaries and VIPs skipped).
func resolveRoutes(k Kernel, managed []AddressType, targets []Target) (State, []Skip, error) {
	return ResolvePolicy(k, Policy{Managed: managed, Targets: targets}, State{})
}
