package inspect

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func checkNodeOf(name string, internal ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range internal {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func checkAgent(name, node string, ready bool) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
}

func TestCheckInstall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodes  []corev1.Node
		agents []corev1.Pod
		ok     bool
		lines  []string
	}{
		{"every node ready with an InternalIP", []corev1.Node{checkNodeOf("b", "10.0.0.2", "fd00::2"), checkNodeOf("a", "10.0.0.1")},
			[]corev1.Pod{checkAgent("nodeaddr-a", "a", true), checkAgent("nodeaddr-b", "b", true)}, true, []string{
				"a: ok: agent kube-system/nodeaddr-a ready, InternalIP 10.0.0.1",
				"b: ok: agent kube-system/nodeaddr-b ready, InternalIP 10.0.0.2,fd00::2",
			}},
		{"a rolling update: the ready pod counts", []corev1.Node{checkNodeOf("a", "10.0.0.1")},
			[]corev1.Pod{checkAgent("nodeaddr-new", "a", false), checkAgent("nodeaddr-old", "a", true)}, true, []string{
				"a: ok: agent kube-system/nodeaddr-old ready, InternalIP 10.0.0.1",
			}},
		{"no agent, not ready, no InternalIP", []corev1.Node{checkNodeOf("a"), checkNodeOf("b", "10.0.0.2"), checkNodeOf("c")},
			[]corev1.Pod{checkAgent("nodeaddr-b", "b", false), checkAgent("nodeaddr-c", "c", true)}, false, []string{
				"a: FAIL: no agent pod on it (is the DaemonSet's node selector or affinity narrower than the check's?); no InternalIP (kubectl -n default get events --field-selector involvedObject.name=a)",
				"b: FAIL: agent kube-system/nodeaddr-b not ready (kubectl -n kube-system logs nodeaddr-b; its /readyz says why)",
				"c: FAIL: no InternalIP (kubectl -n default get events --field-selector involvedObject.name=c)",
			}},
		{"no node selected", nil, []corev1.Pod{checkAgent("nodeaddr-a", "a", true)}, false, []string{
			"no Node matches the node selector: nothing to check",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := CheckInstall(tc.nodes, tc.agents)
			if c.OK != tc.ok || !slices.Equal(c.Lines, tc.lines) {
				t.Errorf("CheckInstall = %v %q, want %v %q", c.OK, c.Lines, tc.ok, tc.lines)
			}
		})
	}
}
