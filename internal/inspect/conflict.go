package inspect

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// AttentionAddressConflict: the conflict detector marks the Node (its condition
// vocab.ConditionAddressConflict is True): another Node lists one of its addresses.
const AttentionAddressConflict = "address-conflict"

// conflictOf is the message of n's vocab.ConditionAddressConflict condition while it is True
// (which address, which other Node), "" otherwise.
func conflictOf(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == vocab.ConditionAddressConflict && c.Status == corev1.ConditionTrue {
			if c.Message == "" {
				return c.Reason
			}
			return c.Message
		}
	}
	return ""
}
