package verdict

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

var t0 = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)

func node(name string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func pod(nodeName string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u", Controller: new(true)}}},
		Spec:   corev1.PodSpec{NodeName: nodeName, HostNetwork: true},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func with(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod { f(p); return p }

func TestDecide(t *testing.T) {
	a := node("a", "10.0.0.2", "fd00::2")
	const grace = time.Minute
	in := func(p *corev1.Pod, n *corev1.Node, changed time.Time) Input {
		return Input{Pod: p, Node: n, Changed: changed, Now: t0, Grace: grace, Enabled: true}
	}
	past := t0.Add(-2 * grace)
	tests := []struct {
		name   string
		in     Input
		reason string
		at     time.Time
		old    []string
	}{
		{"current addresses", in(pod("a", "10.0.0.2", "fd00::2"), a, past), NotStale, time.Time{}, nil},
		{"an IPv4-mapped current address", in(pod("a", "::ffff:10.0.0.2"), a, past), NotStale, time.Time{}, nil},
		{"the old IPv4 address, grace over", in(pod("a", "10.0.0.1", "fd00::2"), a, past), Evict, t0, []string{"10.0.0.1"}},
		{"only status.podIP", in(with(pod("a"), func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.1" }), a, past), Evict, t0, []string{"10.0.0.1"}},
		{"within the grace", in(pod("a", "10.0.0.1"), a, t0.Add(-10*time.Second)), Grace, t0.Add(50 * time.Second), []string{"10.0.0.1"}},
		{"the grace just over", in(pod("a", "10.0.0.1"), a, t0.Add(-grace)), Evict, t0, []string{"10.0.0.1"}},
		{"change time unknown: counted from now", in(pod("a", "10.0.0.1"), a, time.Time{}), Grace, t0.Add(grace), []string{"10.0.0.1"}},
		{"PDB refused, retry later", func() Input {
			i := in(pod("a", "10.0.0.1"), a, past)
			i.RetryAt, i.Refusal = t0.Add(5*time.Second), "Cannot evict pod as it would violate the pod's disruption budget."
			return i
		}(), PDBBlocked, t0.Add(5 * time.Second), []string{"10.0.0.1"}},
		{"PDB refused, retry due", func() Input {
			i := in(pod("a", "10.0.0.1"), a, past)
			i.RetryAt, i.Refusal = t0, "refused"
			return i
		}(), Evict, t0, []string{"10.0.0.1"}},
		{"a budget allows no disruption, retry time unknown (kubectl nodeaddr stale)", func() Input {
			i := in(pod("a", "10.0.0.1"), a, past)
			i.Refusal = "PodDisruptionBudget ns/b allows no disruption"
			return i
		}(), PDBBlocked, time.Time{}, []string{"10.0.0.1"}},
		{"static pod", in(with(pod("a", "10.0.0.1"), func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "a", Controller: new(true)}}
		}), a, past), StaticPod, time.Time{}, []string{"10.0.0.1"}},
		{"no controller", in(with(pod("a", "10.0.0.1"), func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }), a, past), NoController, time.Time{}, []string{"10.0.0.1"}},
		{"opted out", in(with(pod("a", "10.0.0.1"), func(p *corev1.Pod) {
			p.Annotations = map[string]string{vocab.RemediationAnnotation: vocab.RemediationDisabled}
		}), a, past), OptedOut, time.Time{}, []string{"10.0.0.1"}},
		{"another annotation value is no opt-out", in(with(pod("a", "10.0.0.1"), func(p *corev1.Pod) {
			p.Annotations = map[string]string{vocab.RemediationAnnotation: "enabled"}
		}), a, past), Evict, t0, []string{"10.0.0.1"}},
		{"terminating", in(with(pod("a", "10.0.0.1"), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }), a, past), Terminating, time.Time{}, []string{"10.0.0.1"}},
		{"remediation off", func() Input { i := in(pod("a", "10.0.0.1"), a, past); i.Enabled = false; return i }(), Off, time.Time{}, []string{"10.0.0.1"}},
		// A compromised node b writes its own addresses: pods of node a are compared with a only.
		{"another node's addresses are never compared", in(pod("a", "10.0.0.2"), node("b", "10.9.9.9"), past), NotStale, time.Time{}, nil},
		{"no Node", in(pod("a", "10.0.0.1"), nil, past), NotStale, time.Time{}, nil},
		{"a Node with no IP", in(pod("a", "10.0.0.1"), node("a"), past), NotStale, time.Time{}, nil},
		{"not yet started", in(pod("a"), a, past), NotStale, time.Time{}, nil},
		{"pod network", in(with(pod("a", "10.244.0.5"), func(p *corev1.Pod) { p.Spec.HostNetwork = false }), a, past), NotStale, time.Time{}, nil},
		{"succeeded", in(with(pod("a", "10.0.0.1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), a, past), NotStale, time.Time{}, nil},
		{"failed", in(with(pod("a", "10.0.0.1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), a, past), NotStale, time.Time{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.in)
			if v.Reason != tt.reason || !v.At.Equal(tt.at) || !slices.Equal(v.Old, tt.old) || v.Stale != (tt.reason != NotStale) {
				t.Errorf("got %s at %v old %v stale %v (%s), want %s at %v old %v", v.Reason, v.At, v.Old, v.Stale, v.Message, tt.reason, tt.at, tt.old)
			}
			if v.Evicts() != (tt.reason == Evict) {
				t.Errorf("Evicts() = %v", v.Evicts())
			}
		})
	}
}

func TestAddressesChanged(t *testing.T) {
	n := node("a", "10.0.0.2")
	if _, ok := AddressesChanged(n); ok {
		t.Fatal("a Node no agent wrote has a change time")
	}
	ts := metav1.NewTime(t0)
	n.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubelet", Subresource: "status", Time: &metav1.Time{Time: t0.Add(time.Hour)}},
		{Manager: vocab.FieldManager, Subresource: "", Time: &metav1.Time{Time: t0.Add(time.Hour)}},
		{Manager: vocab.FieldManager, Subresource: "status", Time: &ts},
	}
	if got, ok := AddressesChanged(n); !ok || !got.Equal(t0) {
		t.Errorf("AddressesChanged = %v, %v; want %v (the agent's status entry)", got, ok, t0)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Reason: Evict}, "evicting now"},
		{Verdict{Reason: Grace, At: t0.Add(30 * time.Second)}, "will be evicted at 2026-12-06T03:00:30Z (in 30s)"},
		{Verdict{Reason: PDBBlocked, At: t0.Add(5 * time.Second)}, "eviction refused (PDB), retried at 2026-12-06T03:00:05Z (in 5s)"},
		{Verdict{Reason: StaticPod, Message: "m"}, "not evicted (StaticPod): m"},
		{Verdict{Reason: PDBBlocked, Message: "eviction refused, retried with backoff: PodDisruptionBudget ns/b allows no disruption"},
			"eviction refused, retried with backoff: PodDisruptionBudget ns/b allows no disruption"},
	} {
		if got := tc.v.Describe(t0); got != tc.want {
			t.Errorf("Describe(%s) = %q, want %q", tc.v.Reason, got, tc.want)
		}
	}
}
