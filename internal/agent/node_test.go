package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/resolver"
)

var _ NodeClient = (*kube.Client)(nil)

// What the resolver takes from the Node: its pod CIDRs, its addresses of the managed types, the
// other types' (another writer's) and the kubelet's provided-node-ip annotation.
func TestResolverInput(t *testing.T) {
	external := []resolver.AddressType{resolver.ExternalIP}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
			{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, {Type: corev1.NodeHostName, Address: nodeName}}}}
	v := resolverInputOf(node, external)
	want := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	if !slices.Equal(v.PodCIDRs, want) {
		t.Errorf("pod CIDRs %v, want %v", v.PodCIDRs, want)
	}
	if got := fmt.Sprint(v.Addresses); got != "[ExternalIP=203.0.113.9]" {
		t.Errorf("addresses %s, want the managed type only", got)
	}
	if got := fmt.Sprint(v.Unmanaged); got != "[InternalIP=10.0.0.5]" {
		t.Errorf("unmanaged %s, want the kubelet's InternalIP", got)
	}
	if v.ProvidedNodeIP != "" {
		t.Errorf("provided node IP %q without the annotation", v.ProvidedNodeIP)
	}
	node.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.5", "example.com/other": "x"}
	if got := resolverInputOf(node, external).ProvidedNodeIP; got != "10.0.0.5" {
		t.Errorf("provided node IP %q, want the annotation's 10.0.0.5", got)
	}
	n := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.2.0/24"}}
	if got := resolverInputOf(n, external).PodCIDRs; !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}) {
		t.Errorf("pod CIDRs from spec.podCIDR: %v", got)
	}
}
