package resolver

// Stage 5, the equal-ExternalIP rule (--external-ip-equal-internal), local-ccm's.

import "slices"

// withoutExternalEqualInternal drops every ExternalIP of s equal to an InternalIP the Node will
// carry: s's when nodeaddr manages InternalIP, else another writer's (others). Such an ExternalIP
// makes consumers believe the node is reachable from outside. It applies only when nodeaddr
// manages ExternalIP and keep is false.
func withoutExternalEqualInternal(keep bool, others []Address, s State) State {
	s.DroppedEqual = false
	if keep || !slices.Contains(s.Managed, ExternalIP) {
		return s
	}
	internal := others
	if slices.Contains(s.Managed, InternalIP) {
		internal = s.Addresses
	}
	equal := func(a Address) bool {
		return a.Type == ExternalIP && slices.ContainsFunc(internal, func(i Address) bool {
			return i.Type == InternalIP && i.IP.Unmap() == a.IP.Unmap()
		})
	}
	if !slices.ContainsFunc(s.Addresses, equal) {
		return s
	}
	w := s.why()
	for _, a := range s.Addresses {
		if equal(a) {
			w.passOver(ExternalIP, FamilyOf(a.IP), "dropped: equals an InternalIP (--external-ip-equal-internal=drop)")
		}
	}
	s.Addresses = slices.DeleteFunc(slices.Clone(s.Addresses), equal)
	s.Explanation, s.DroppedEqual = w, true
	return s
}
