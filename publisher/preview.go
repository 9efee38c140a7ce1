package publisher

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// Preview is what the publisher would write for s to a Node without addresses and annotations
// (--dry-run); the annotations are nil without specs.
func Preview(s resolver.State, specs []AnnotationSpec) ([]corev1.NodeAddress, map[string]string) {
	merged := merge(nil, s.Managed, s.Addresses)
	if len(specs) == 0 {
		return merged, nil
	}
	out := map[string]string{}
	maps.Copy(out, annotationChanges(nil, specs, inStatusOrder(merged, s.Managed, s.Addresses)))
	return merged, out
}
