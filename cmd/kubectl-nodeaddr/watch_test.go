package main

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNextPending: --watch wakes up when the next pending CSR crosses --pending-after (a second late:
// creation times have second precision), not before and not for answered CSRs.
func TestNextPending(t *testing.T) {
	now := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	c := func(age time.Duration, answered bool) certificatesv1.CertificateSigningRequest {
		r := certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if answered {
			r.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied}}
		}
		return r
	}
	tests := []struct {
		csrs []certificatesv1.CertificateSigningRequest
		want time.Duration
		ok   bool
	}{
		{nil, 0, false},
		{[]certificatesv1.CertificateSigningRequest{c(time.Minute, false), c(3*time.Minute, false)}, 2*time.Minute + time.Second, true},
		{[]certificatesv1.CertificateSigningRequest{c(10*time.Minute, false), c(4*time.Minute, true)}, 0, false},
	}
	for i, tt := range tests {
		if got, ok := nextPending(tt.csrs, now, 5*time.Minute); got != tt.want || ok != tt.ok {
			t.Errorf("%d: %v %v, want %v %v", i, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNodeChanged: --watch re-evaluates on a Node's addresses or kubelet port, not on its heartbeats.
func TestNodeChanged(t *testing.T) {
	a := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}}
	heartbeat := a.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	renumbered := a.DeepCopy()
	renumbered.Status.Addresses[0].Address = "10.0.0.2"
	port := a.DeepCopy()
	port.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	if nodeChanged(a, heartbeat) || !nodeChanged(a, renumbered) || !nodeChanged(a, port) {
		t.Errorf("heartbeat %v, renumbered %v, port %v", nodeChanged(a, heartbeat), nodeChanged(a, renumbered), nodeChanged(a, port))
	}
}
