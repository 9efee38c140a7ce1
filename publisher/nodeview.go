package publisher

import (
	"net/netip"
	"slices"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// NodeView is the agent's one read-only view of its Node: the copy its informer holds. Node returns
// nil while the Node does not exist or has not been seen; callers must not modify what it returns.
type NodeView interface {
	Node() *corev1.Node
}

// NewNodeView returns the view of the Node called name in store (an informer's store).
func NewNodeView(store cache.Store, name string) NodeView { return storeView{store, name} }

type storeView struct {
	store cache.Store
	name  string
}

func (v storeView) Node() *corev1.Node {
	o, ok, err := v.store.GetByKey(v.name)
	if err != nil || !ok {
		return nil
	}
	n, _ := o.(*corev1.Node)
	return n
}

// ResolverInput is what a resolution takes from n: its pod CIDRs, its addresses of the managed types
// and of the others, in status order, and the kubelet's provided-node-ip annotation.
func ResolverInput(n *corev1.Node, managed []resolver.AddressType) resolver.NodeInput {
	var unmanaged []resolver.AddressType
	for _, t := range []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP} {
		if !slices.Contains(managed, t) {
			unmanaged = append(unmanaged, t)
		}
	}
	return resolver.NodeInput{PodCIDRs: podCIDRs(n), Addresses: inStatusOrder(n.Status.Addresses, managed, nil),
		Unmanaged: inStatusOrder(n.Status.Addresses, unmanaged, nil), ProvidedNodeIP: n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]}
}

// podCIDRs returns the Node's pod CIDRs (spec.podCIDRs, else spec.podCIDR), skipping bad ones.
func podCIDRs(n *corev1.Node) []netip.Prefix {
	list := n.Spec.PodCIDRs
	if len(list) == 0 && n.Spec.PodCIDR != "" {
		list = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, c := range list {
		if p, err := resolver.ParsePrefix(c); err == nil {
			out = append(out, p)
		}
	}
	return out
}
