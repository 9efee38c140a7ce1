package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// vagrantHost numbers e's namespace as a Vagrant VM: the NAT interface with the default route
// (10.0.2.15 on every VM), the host-only network the control plane is on.
func (e *env) vagrantHost(hostOnly string) {
	e.uplink("eth0", "10.0.2.15/24", "10.0.2.2", 100)
	e.uplink("eth1", hostOnly, "", 0)
}

// The default InternalIP target on a real API server, with the agent's own token and RBAC: the
// kubernetes EndpointSlice's address (192.168.56.10, routed through the host-only eth1) gives the
// InternalIP, and the NAT address is no ExternalIP (private: --external-ip-scope=global, the
// default, publishes only a globally routable one). A fresh Node gets it in one write, not
// the NAT address first (the agent waits for its first list of the slice); on a cluster where the
// slice appears later, the Node moves once from the fallback's NAT address to it.
func TestAPIServerTargetDefault(t *testing.T) {
	late := newEnv(t, "api-late")
	in := corev1.NodeInternalIP
	late.cp.CreateNode(t, harness.NodeSpec{Name: late.node, Taints: []corev1.Taint{harness.Uninitialized}})
	late.vagrantHost("192.168.56.12/24")
	late.start()
	late.waitAddresses([]corev1.NodeAddress{harness.Addr(in, "10.0.2.15")}) // no slice yet: the fallback, 8.8.8.8's route
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.168.56.10"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	if _, err := late.cp.Admin.DiscoveryV1().EndpointSlices("default").Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	late.waitAddresses([]corev1.NodeAddress{harness.Addr(in, "192.168.56.12")})
	if w := late.statusWrites(); w != 2 {
		t.Errorf("%s: %d status writes, want 2 (the fallback, then the API server's route)", late.node, w)
	}

	fresh := newEnvOn(t, late.cp, "api-fresh")
	fresh.cp.CreateNode(t, harness.NodeSpec{Name: fresh.node, Taints: []corev1.Taint{harness.Uninitialized}})
	fresh.vagrantHost("192.168.56.11/24")
	fresh.start()
	fresh.waitAddresses([]corev1.NodeAddress{harness.Addr(in, "192.168.56.11")})
	if w := fresh.statusWrites(); w != 1 {
		t.Errorf("%s: %d status writes, want 1 (the API server's route at once, no NAT address first)", fresh.node, w)
	}
}
