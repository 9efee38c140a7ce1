package publisher

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// benchNode is a typical dual-stack Node as nodeaddr leaves it: the kubelet's InternalIPs, nodeaddr's
// ExternalIPs, the Hostname.
var benchNode = []corev1.NodeAddress{
	{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
	{Type: corev1.NodeInternalIP, Address: "fd00::5"},
	{Type: corev1.NodeExternalIP, Address: "192.0.2.10"},
	{Type: corev1.NodeExternalIP, Address: "2001:db8::10"},
	{Type: corev1.NodeHostName, Address: "n1"},
}

// BenchmarkMerge measures what reconcile does on every wake-up (each informer event, each resync):
// Merge, then compare with the Node's list.
func BenchmarkMerge(b *testing.B) {
	managed := []resolver.AddressType{resolver.ExternalIP}
	same := []resolver.Address{
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("192.0.2.10")},
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("2001:db8::10")},
	}
	moved := []resolver.Address{
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("192.0.2.99")},
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("2001:db8::10")},
	}
	bothManaged := []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}
	bothSame := append([]resolver.Address{
		{Type: resolver.InternalIP, IP: netip.MustParseAddr("10.0.0.5")},
		{Type: resolver.InternalIP, IP: netip.MustParseAddr("fd00::5")},
	}, same...)
	for _, bc := range []struct {
		name    string
		managed []resolver.AddressType
		desired []resolver.Address
		noop    bool
	}{
		{"no-op/external-dual-stack", managed, same, true},
		{"no-op/internal+external-dual-stack", bothManaged, bothSame, true},
		{"change/external-ipv4", managed, moved, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if got := slices.Equal(merge(benchNode, bc.managed, bc.desired), benchNode); got != bc.noop {
				b.Fatalf("Merge no-op = %v, want %v", got, bc.noop)
			}
			b.ReportAllocs()
			for b.Loop() {
				next := merge(benchNode, bc.managed, bc.desired)
				if slices.Equal(next, benchNode) != bc.noop {
					b.Fatal("unexpected result")
				}
			}
		})
	}
}

// BenchmarkAddressesPatch measures building the JSON patch of one write (test + replace).
func BenchmarkAddressesPatch(b *testing.B) {
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: benchNode}}
	node.ResourceVersion = "12345"
	next := slices.Clone(benchNode)
	next[2].Address = "192.0.2.99"
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := addressesPatch(node, next); err != nil {
			b.Fatal(err)
		}
	}
}
