// Package publisher keeps the managed entries of one Node's status.addresses equal to the desired
// state with preconditioned writes, and removes the uninitialized taint once they are right.
package publisher

import (
	"net/netip"
	"slices"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// primaryFamily is the family of the Node's first InternalIP, IPv4 when there is none.
func primaryFamily(addrs []corev1.NodeAddress) resolver.Family {
	for _, a := range addrs {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				return resolver.FamilyOf(ip)
			}
		}
	}
	return resolver.IPv4
}

// merge returns the Node's address list with the managed types replaced by desired (docs/merging.md):
// the desired entries of a type (primary family first) stand where its first old entry stood, a new
// InternalIP goes at the front and a new ExternalIP after the last InternalIP, unmanaged entries
// keep their order, and duplicates are dropped (the API server rejects them). The primary family
// is that of the Node's first InternalIP (resultPrimary when InternalIP is managed).
func merge(current []corev1.NodeAddress, managed []resolver.AddressType, desired []resolver.Address) []corev1.NodeAddress {
	want := make(map[corev1.NodeAddressType][]corev1.NodeAddress, len(managed))
	isManaged := make(map[corev1.NodeAddressType]bool, len(managed))
	for _, t := range managed {
		isManaged[corev1.NodeAddressType(t)] = true
	}
	primary := primaryFamily(current)
	if isManaged[corev1.NodeInternalIP] {
		primary = resultPrimary(desired, primary)
	}
	ordered := slices.Clone(desired)
	rank := func(a resolver.Address) int { // the primary family first
		if resolver.FamilyOf(a.IP) == primary {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(ordered, func(a, b resolver.Address) int { return rank(a) - rank(b) })
	for _, a := range ordered {
		t := corev1.NodeAddressType(a.Type)
		if isManaged[t] {
			want[t] = append(want[t], corev1.NodeAddress{Type: t, Address: a.IP.String()})
		}
	}

	out := make([]corev1.NodeAddress, 0, len(current)+len(desired))
	placed := make(map[corev1.NodeAddressType]bool, len(managed))
	for _, a := range current {
		if !isManaged[a.Type] {
			out = append(out, a)
			continue
		}
		if !placed[a.Type] {
			placed[a.Type] = true
			out = append(out, want[a.Type]...)
		}
	}
	if t := corev1.NodeInternalIP; isManaged[t] && !placed[t] {
		out = slices.Insert(out, 0, want[t]...)
	}
	if t := corev1.NodeExternalIP; isManaged[t] && !placed[t] {
		at := 0
		for i, a := range out {
			if a.Type == corev1.NodeInternalIP {
				at = i + 1
			}
		}
		out = slices.Insert(out, at, want[t]...)
	}
	return dedupe(out)
}

// resultPrimary is the family of the first InternalIP merge will write: the current primary if a
// desired InternalIP has it, else that of the first desired InternalIP, else IPv4. Ordering by the
// current primary instead would make the next merge reorder the written list, and write again.
func resultPrimary(desired []resolver.Address, primary resolver.Family) resolver.Family {
	next, found := resolver.IPv4, false
	for _, a := range desired {
		if a.Type != resolver.InternalIP {
			continue
		}
		f := resolver.FamilyOf(a.IP)
		if f == primary {
			return primary
		}
		if !found {
			next, found = f, true
		}
	}
	return next
}

func dedupe(in []corev1.NodeAddress) []corev1.NodeAddress {
	seen := make(map[corev1.NodeAddress]bool, len(in))
	out := in[:0]
	for _, a := range in {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// managedOnly returns the entries of addrs whose type is managed, in order.
func managedOnly(addrs []corev1.NodeAddress, managed []resolver.AddressType) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, a := range addrs {
		if slices.Contains(managed, resolver.AddressType(a.Type)) {
			out = append(out, a)
		}
	}
	return out
}

// withoutUninitialized returns taints without the uninitialized taint, and whether it was there.
func withoutUninitialized(taints []corev1.Taint) ([]corev1.Taint, bool) {
	out := slices.DeleteFunc(append([]corev1.Taint{}, taints...), func(t corev1.Taint) bool { // never nil
		return t.Key == cloudproviderapi.TaintExternalCloudProvider
	})
	return out, len(out) < len(taints)
}
