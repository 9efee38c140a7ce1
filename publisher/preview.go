package publisher

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// Preview is what the publisher would write for s to a Node that has no addresses and no
// annotations yet (--dry-run): the address list, merged as reconcile merges it, and the annotations
// (an empty value is a removal; nil without specs).
func Preview(s resolver.State, specs []AnnotationSpec) ([]corev1.NodeAddress, map[string]string) {
	merged := merge(nil, s.Managed, s.Addresses)
	if len(specs) == 0 {
		return merged, nil
	}
	out := map[string]string{}
	for k, v := range annotationChanges(nil, specs, inStatusOrder(merged, s.Managed, s.Addresses)) {
		out[k] = v
	}
	return merged, out
}
