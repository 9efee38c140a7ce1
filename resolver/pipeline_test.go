package resolver

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func lines(s State) string {
	var out []string
	for _, l := range s.Explanation {
		out = append(out, l.String())
	}
	return strings.Join(out, "\n")
}

// Each stage explains what it changed, after the selection's lines: STUN's mapped ExternalIP
// replaces the route source, a family STUN has no answer for yet is not published, and the
// ExternalIP equal to the InternalIP is dropped.
func TestOnceExplainsEveryStage(t *testing.T) {
	v6 := ip("2001:db8::10")
	k := &fakeKernel{routes: map[netip.Addr]netip.Addr{target4: src4, ip("2001:db8::1"): v6},
		addrs: []LocalAddr{local(src4.String()), local(v6.String())}}
	p := Policy{Managed: []AddressType{InternalIP, ExternalIP},
		Targets: []Target{{Type: InternalIP, IP: target4}, {Type: ExternalIP, IP: target4}, {Type: ExternalIP, IP: ip("2001:db8::1")}}}
	d := &fakeDiscovery{mapped: map[Family]netip.Addr{IPv4: ip("203.0.113.10")}}
	s, err := Once(k, p, d, NodeInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "[InternalIP=192.0.2.10 ExternalIP=203.0.113.10]"; got != want {
		t.Errorf("state %s, want %s", got, want)
	}
	want := strings.Join([]string{
		"InternalIP IPv4 192.0.2.10 (route to 198.51.100.1): chosen",
		"InternalIP IPv6: " + NoTarget,
		"ExternalIP IPv4 192.0.2.10 (route to 198.51.100.1): replaced by 203.0.113.10",
		"ExternalIP IPv6 2001:db8::10 (route to 2001:db8::1): not published: STUN discovery has no mapped address yet",
		"ExternalIP IPv4 203.0.113.10 (STUN discovery): chosen: the mapped address replaces the route source",
	}, "\n")
	if got := lines(s); got != want {
		t.Errorf("explanation:\n%s\nwant:\n%s", got, want)
	}

	// Without discovery, the equal rule drops the IPv4 ExternalIP.
	s, err = Once(k, p, nil, NodeInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "[InternalIP=192.0.2.10 ExternalIP=2001:db8::10]"; got != want {
		t.Errorf("state %s, want %s", got, want)
	}
	if got := lines(s); !strings.Contains(got, "ExternalIP IPv4 192.0.2.10 (route to 198.51.100.1): dropped: equals an InternalIP (--external-ip-equal-internal=drop)") {
		t.Errorf("explanation without the drop:\n%s", got)
	}
}

// The hold-down explains the address it keeps.
func TestHoldDownExplainsTheHeldAddress(t *testing.T) {
	h := holdDown{Grace: 5 * time.Second}
	managed := []AddressType{ExternalIP}
	h.Apply(at(0), State{Managed: managed, Addresses: []Address{addr(ExternalIP, "192.0.2.10")}})
	gone := State{Managed: managed, Explanation: []Explained{{Type: "ExternalIP", Family: "IPv4", From: "route to 198.51.100.1", Reason: "no route to target"}}}
	s, _ := h.Apply(at(1000), gone)
	want := "ExternalIP IPv4 (route to 198.51.100.1): no route to target\n" +
		"ExternalIP IPv4 192.0.2.10 (previous address): held during removal grace (the loop's hold-down)"
	if got := lines(s); got != want {
		t.Errorf("explanation:\n%s\nwant:\n%s", got, want)
	}
	if len(gone.Explanation) != 1 {
		t.Errorf("the input's explanation grew: %v", gone.Explanation)
	}
}
