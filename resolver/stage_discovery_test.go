package resolver

import (
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeDiscovery answers from a map; set changes an answer and signals C, as the Discoverer does.
type fakeDiscovery struct {
	v4Only  bool // no IPv6 server
	mu      sync.Mutex
	mapped  map[Family]netip.Addr
	sources map[Family]netip.Addr
	updates int
	c       chan struct{}
}

func (f *fakeDiscovery) Update(s map[Family]netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sources = maps.Clone(s)
	f.updates++
}

func (f *fakeDiscovery) Mapped(fam Family) (netip.Addr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.mapped[fam]
	return a, ok
}

func (f *fakeDiscovery) C() <-chan struct{} { return f.c }

func (f *fakeDiscovery) Covers(fam Family) bool { return fam == IPv4 || !f.v4Only }

func (f *fakeDiscovery) set(fam Family, a netip.Addr) {
	f.mu.Lock()
	if f.mapped == nil {
		f.mapped = map[Family]netip.Addr{}
	}
	f.mapped[fam] = a
	f.mu.Unlock()
	select {
	case f.c <- struct{}{}:
	default:
	}
}

func TestWithDiscovery(t *testing.T) {
	ip := netip.MustParseAddr
	bothSources := map[Family]netip.Addr{IPv4: ip("10.0.1.10"), IPv6: ip("fd00::10")}
	managed := []AddressType{InternalIP, ExternalIP}
	routed := State{Managed: managed, Addresses: []Address{
		{Type: InternalIP, IP: ip("10.0.1.10"), Interface: "eth0", PrefixLen: 24},
		{Type: InternalIP, IP: ip("fd00::10"), Interface: "eth0", PrefixLen: 64},
		{Type: ExternalIP, IP: ip("10.0.1.10"), Interface: "eth0", PrefixLen: 24},
		{Type: ExternalIP, IP: ip("fd00::10"), Interface: "eth0", PrefixLen: 64},
	}}
	for _, tc := range []struct {
		name    string
		v4Only  bool
		mapped  map[Family]netip.Addr
		in      State
		want    string
		sources map[Family]netip.Addr // what Update must be given: every family's route source
	}{
		{"only IPv4 servers: IPv6 keeps its route source", true, map[Family]netip.Addr{IPv4: ip("203.0.113.10")}, routed,
			"[InternalIP=10.0.1.10 InternalIP=fd00::10 ExternalIP=203.0.113.10 ExternalIP=fd00::10]", bothSources},
		{"both families discovered", false, map[Family]netip.Addr{IPv4: ip("203.0.113.10"), IPv6: ip("2001:db8::10")}, routed,
			"[InternalIP=10.0.1.10 InternalIP=fd00::10 ExternalIP=203.0.113.10 ExternalIP=2001:db8::10]", bothSources},
		{"nothing discovered yet: no ExternalIP, never the private route source", false, nil, routed,
			"[InternalIP=10.0.1.10 InternalIP=fd00::10]", bothSources},
		{"IPv4 only discovered", false, map[Family]netip.Addr{IPv4: ip("203.0.113.10")}, routed,
			"[InternalIP=10.0.1.10 InternalIP=fd00::10 ExternalIP=203.0.113.10]", bothSources},
		{"no IPv6 route: a discovered IPv6 address is not published", false, map[Family]netip.Addr{IPv4: ip("203.0.113.10"), IPv6: ip("2001:db8::10")},
			State{Managed: managed, Addresses: routed.Addresses[:3]},
			"[InternalIP=10.0.1.10 InternalIP=fd00::10 ExternalIP=203.0.113.10]", map[Family]netip.Addr{IPv4: ip("10.0.1.10")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDiscovery{mapped: tc.mapped, v4Only: tc.v4Only}
			got := WithDiscovery(d, tc.in)
			if s := got.String(); s != tc.want {
				t.Errorf("state %s, want %s", s, tc.want)
			}
			if !maps.Equal(d.sources, tc.sources) {
				t.Errorf("Update(%v), want the route sources %v", d.sources, tc.sources)
			}
			for _, a := range got.Addresses {
				if a.Type == ExternalIP && a.IP == tc.mapped[FamilyOf(a.IP)] && a.PrefixLen != 0 {
					t.Errorf("discovered %s has prefix length %d (of the private address)", a, a.PrefixLen)
				}
			}
		})
	}
}

// The loop publishes no ExternalIP until discovery answers, then the discovered one at once (C),
// and follows a change of the discovered address without any kernel event.
func TestLoopWithDiscovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &fakeDiscovery{c: make(chan struct{}, 1)}
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Discovery: d}, nil)
		lt.sleep(time.Second)
		d.set(IPv4, ip("203.0.113.10"))
		lt.sleep(time.Second)
		d.set(IPv4, ip("203.0.113.20"))
		lt.sleep(time.Second)
		var got []string
		for _, p := range lt.sink.all() {
			got = append(got, p.state.String())
		}
		want := []string{"[]", "[ExternalIP=203.0.113.10]", "[ExternalIP=203.0.113.20]"}
		if !slices.Equal(got, want) {
			t.Errorf("published %q, want %q", got, want)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.updates != 3 || d.sources[IPv4] != src4 {
			t.Errorf("Update called %d times with %v, want 3 times with the route source %s", d.updates, d.sources, src4)
		}
	})
}
