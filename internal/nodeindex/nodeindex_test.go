package nodeindex

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

// Every IP of a Node's status is a key, whatever its type, once, IPv4-mapped IPv6 unmapped;
// names and DNS entries are keys of the name index, lower case without the trailing dot.
func TestIndex(t *testing.T) {
	a := node("A", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.2.15"},
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "::ffff:10.0.2.15"},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "2001:db8::1"},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: "Host-A."})
	b := node("b", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "10.0.2.15"},
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "not-an-ip"})
	if got := fmt.Sprint(IPs(a)); got != "[10.0.2.15 2001:db8::1]" {
		t.Errorf("IPs(a) = %s", got)
	}
	if got, _ := NodeNames(a); !slices.Equal(got, []string{"a", "host-a"}) {
		t.Errorf("NodeNames(a) = %v", got)
	}
	idx := New([]*corev1.Node{a, b})
	for ip, want := range map[string][]string{"10.0.2.15": {"A", "b"}, "::ffff:10.0.2.15": {"A", "b"}, "2001:db8::1": {"A"}, "192.0.2.1": nil} {
		var got []string
		for _, n := range ByIP(idx, netip.MustParseAddr(ip)) {
			got = append(got, n.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("ByIP(%s) = %v, want %v", ip, got, want)
		}
	}
}
