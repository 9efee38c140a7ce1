package resolver

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestWithAPIServer(t *testing.T) {
	api, err := ParseTargets(InternalIP, "apiserver,8.8.8.8")
	if err != nil {
		t.Fatal(err)
	}
	ext := Target{Type: ExternalIP, IP: ip("8.8.8.8")}
	p := Policy{Targets: append(api, ext)}
	tests := []struct {
		name string
		in   []netip.Addr
		want []Target
	}{
		{"unknown: one placeholder per family stays", nil, []Target{
			{Type: InternalIP, IP: netip.IPv4Unspecified(), APIServer: true}, {Type: InternalIP, IP: netip.IPv6Unspecified(), APIServer: true},
			{Type: InternalIP, IP: ip("8.8.8.8")}, ext}},
		{"each address in its family's place, in order, once; mapped IPv4 unmapped", []netip.Addr{ip("10.0.0.2"), ip("fd00::1"), ip("::ffff:10.0.0.1"), ip("10.0.0.2")}, []Target{
			{Type: InternalIP, IP: ip("10.0.0.2"), APIServer: true}, {Type: InternalIP, IP: ip("10.0.0.1"), APIServer: true},
			{Type: InternalIP, IP: ip("fd00::1"), APIServer: true},
			{Type: InternalIP, IP: ip("8.8.8.8")}, ext}},
		{"IPv4 only: the IPv6 placeholder stays", []netip.Addr{ip("10.0.0.1")}, []Target{
			{Type: InternalIP, IP: ip("10.0.0.1"), APIServer: true}, {Type: InternalIP, IP: netip.IPv6Unspecified(), APIServer: true},
			{Type: InternalIP, IP: ip("8.8.8.8")}, ext}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.WithAPIServer(tt.in).Targets; !slices.Equal(got, tt.want) {
				t.Errorf("WithAPIServer(%v) targets = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	if got := (Policy{Targets: []Target{ext}}).WithAPIServer([]netip.Addr{ip("10.0.0.1")}).Targets; !slices.Equal(got, []Target{ext}) {
		t.Errorf("without an apiserver target: %v, want the targets unchanged", got)
	}
}

// The apiserver target on a Vagrant-style host: eth0 is the NAT interface with the default route
// (10.0.2.15 on every VM), eth1 the host-only network the control plane is on.
func TestAPIServerTarget(t *testing.T) {
	nat, hostOnly, other := on("eth0", "10.0.2.15/24"), on("eth1", "192.168.56.11/24"), on("eth2", "172.16.0.11/24")
	apiserver := ip("192.168.56.10")
	targets, err := ParseTargets(InternalIP, "apiserver,8.8.8.8")
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Managed: []AddressType{InternalIP}, Targets: targets, Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true}}}
	toAPI := map[netip.Addr]netip.Addr{ip("8.8.8.8"): nat.IP, apiserver: hostOnly.IP, ip("172.16.0.10"): other.IP}
	tests := []struct {
		name      string
		apiServer []netip.Addr
		routes    map[netip.Addr]netip.Addr
		prev      string // the previous InternalIP ("": none)
		want      string // the InternalIP ("": none)
		explain   []string
	}{
		{name: "the route to the API server, not the default route", apiServer: []netip.Addr{apiserver}, routes: toAPI,
			want: "192.168.56.11", explain: []string{
				"InternalIP IPv4 192.168.56.11 (route to the API server 192.168.56.10): chosen",
				"InternalIP IPv6 (route to the API server): " + apiServerUnknown,
				"InternalIP IPv6: no accepted candidate: not published"}},
		{name: "addresses unknown: the fallback target", routes: toAPI, want: "10.0.2.15", explain: []string{
			"InternalIP IPv4 (route to the API server): " + apiServerUnknown,
			"InternalIP IPv4 10.0.2.15 (route to 8.8.8.8): chosen",
			"InternalIP IPv6 (route to the API server): " + apiServerUnknown,
			"InternalIP IPv6: no accepted candidate: not published"}},
		{name: "no route to the API server: the fallback target", apiServer: []netip.Addr{apiserver},
			routes: map[netip.Addr]netip.Addr{ip("8.8.8.8"): nat.IP}, want: "10.0.2.15", explain: []string{
				"InternalIP IPv4 (route to the API server 192.168.56.10): no route to target",
				"InternalIP IPv4 10.0.2.15 (route to 8.8.8.8): chosen",
				"InternalIP IPv6 (route to the API server): " + apiServerUnknown,
				"InternalIP IPv6: no accepted candidate: not published"}},
		{name: "the first API server address with a route", apiServer: []netip.Addr{ip("192.0.2.99"), ip("172.16.0.10"), apiserver}, routes: toAPI,
			want: "172.16.0.11"},
		{name: "a previous address that is only the fallback's source gives way (upgrade from 8.8.8.8)",
			apiServer: []netip.Addr{apiserver}, routes: toAPI, prev: "10.0.2.15", want: "192.168.56.11"},
		{name: "a previous address no target routes from stays (failover)",
			apiServer: []netip.Addr{apiserver}, routes: toAPI, prev: "172.16.0.11", want: "172.16.0.11"},
		{name: "the fallback's source stays while the addresses are unknown",
			routes: toAPI, prev: "10.0.2.15", want: "10.0.2.15"},
		{name: "the API server's route source stays while the addresses are unknown (restart)",
			routes: toAPI, prev: "192.168.56.11", want: "192.168.56.11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &fakeKernel{routes: tt.routes, addrs: []LocalAddr{nat, hostOnly, other}}
			prev := State{Managed: p.Managed}
			if tt.prev != "" {
				prev.Addresses = []Address{{Type: InternalIP, IP: ip(tt.prev)}}
			}
			st, _, err := ResolvePolicy(k, p.WithAPIServer(tt.apiServer), prev)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if a, ok := st.Get(InternalIP, IPv4); ok {
				got = a.IP.String()
			}
			if got != tt.want {
				t.Errorf("InternalIP = %q, want %q (explanation %q)", got, tt.want, explained(st))
			}
			if tt.explain != nil && !slices.Equal(explained(st), tt.explain) {
				t.Errorf("explanation:\n%q\nwant\n%q", explained(st), tt.explain)
			}
		})
	}
}

// ResolvePolicy asks the kernel for no route toward a placeholder (the unspecified address).
func TestAPIServerPlaceholderAsksNoRoute(t *testing.T) {
	targets, err := ParseTargets(InternalIP, "apiserver")
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{routes: map[netip.Addr]netip.Addr{netip.IPv4Unspecified(): ip("10.0.0.1")}, addrs: []LocalAddr{on("eth0", "10.0.0.1/24")}}
	st, _, err := ResolvePolicy(k, Policy{Managed: []AddressType{InternalIP}, Targets: targets}, State{})
	if err != nil || len(st.Addresses) != 0 || k.routeGets != 0 {
		t.Errorf("got %v, %v after %d route lookups; want no address and no lookup", st.Addresses, err, k.routeGets)
	}
}

func explained(s State) []string {
	out := make([]string, len(s.Explanation))
	for i, l := range s.Explanation {
		out[i] = l.String()
	}
	return out
}

// The loop resolves again when the API server's addresses change (the agent's EndpointSlice
// informer calls NodeChanged), and the new route source replaces the fallback's.
func TestLoopFollowsTheAPIServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := healthyKernel() // target4 (the fallback) routes from src4 on eth0
		api := ip("10.0.0.1")
		k.routes[api] = ip("10.0.0.10")
		k.addrs = append(k.addrs, on("eth1", "10.0.0.10/24"))
		targets, err := ParseTargets(InternalIP, "apiserver,"+target4.String())
		if err != nil {
			t.Fatal(err)
		}
		node := &fakeNode{seen: true}
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Node: node.get,
			Policy: Policy{Managed: []AddressType{InternalIP}, Targets: targets,
				Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true}}}}, k)
		lt.sleep(time.Second)
		node.set(lt.loop, NodeInput{APIServer: []netip.Addr{api}})
		lt.sleep(time.Second)
		node.set(lt.loop, NodeInput{APIServer: []netip.Addr{api}}) // the same addresses: nothing
		lt.sleep(time.Second)
		var got []string
		for _, p := range lt.sink.all() {
			got = append(got, fmt.Sprintf("%v at %v", p.state, p.at))
		}
		want := []string{"[InternalIP=192.0.2.10] at 0s", "[InternalIP=10.0.0.10] at 1s"}
		if !slices.Equal(got, want) {
			t.Errorf("published\n%q\nwant\n%q", got, want)
		}
	})
}
