package inspect

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// A Node the conflict detector marks shows the condition's message and needs attention; a cleared
// condition (False) shows nothing.
func TestStatusConflict(t *testing.T) {
	agent := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nodeaddr-x", Namespace: "kube-system"}, Spec: corev1.PodSpec{NodeName: "vm-2"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	for _, tc := range []struct {
		name      string
		cond      *corev1.NodeCondition
		conflict  string
		attention []string
	}{
		{"no condition", nil, "", []string{}},
		{"a conflict", &corev1.NodeCondition{Type: vocab.ConditionAddressConflict, Status: corev1.ConditionTrue,
			Reason: vocab.ConflictReasonAnotherNode, Message: "10.0.2.15 is also listed by Node vm-1"},
			"10.0.2.15 is also listed by Node vm-1", []string{AttentionAddressConflict}},
		{"cleared", &corev1.NodeCondition{Type: vocab.ConditionAddressConflict, Status: corev1.ConditionFalse,
			Reason: vocab.ConflictReasonNone, Message: "No other Node lists an address of this Node"}, "", []string{}},
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm-2"}}
		if tc.cond != nil {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, *tc.cond}
		}
		s := Status(n, []corev1.Pod{agent}, nil)
		if s.Conflict != tc.conflict || !slices.Equal(s.Attention, tc.attention) {
			t.Errorf("%s: conflict %q attention %v, want %q %v", tc.name, s.Conflict, s.Attention, tc.conflict, tc.attention)
		}
	}
}
