package agent

// The agent's side of its Node: the one informer (its objects trimmed), the read-only view every
// reader shares, and what the resolver takes from the Node.

import (
	"context"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// NodeClient is the part of client-go's typed NodeInterface the agent uses (internal/kube): list
// and watch for its informer, get and patch for the publisher's writes.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// newNodeInformer returns an informer on the one Node called name, its objects trimmed (trimNode),
// built without an informer factory (which links every group's informers). report, if not nil,
// receives the outcome of every list and watch request while ctx is alive: in watch-list mode the
// reflector retries a refused connection in place and never calls the WatchErrorHandler.
func newNodeInformer(nodes NodeClient, name string, report func(error)) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	observe := func(ctx context.Context, err error) {
		if report != nil && ctx.Err() == nil {
			report(err)
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			l, err := nodes.List(ctx, o)
			observe(ctx, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			w, err := nodes.Watch(ctx, o)
			observe(ctx, err)
			return w, err
		},
	}
	// The client says whether it can serve streaming lists (fake clientsets cannot).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, nodes),
		&corev1.Node{}, 0, cache.Indexers{})
	// SetTransform fails only once the informer has started.
	_ = inf.SetTransform(trimTransform)
	return inf
}

// trimTransform is the informer's TransformFunc: its objects are not shared yet, so trimming is
// safe. It drops what no reader of the Node uses (status.images, managedFields' field sets); the
// publisher's writes are patches of single fields, so nothing trimmed is ever written back.
func trimTransform(o any) (any, error) {
	if n, ok := o.(*corev1.Node); ok {
		n.Status.Images = nil
		for i := range n.ManagedFields {
			n.ManagedFields[i].FieldsV1 = nil
		}
	}
	return o, nil
}

// nodeView is the agent's one read-only view of its Node: the copy its informer holds. Node
// returns nil while the Node does not exist or has not been seen; callers must not modify what it
// returns. The publisher reads through it too (publisher.NodeView).
type nodeView struct {
	store cache.Store
	name  string
}

func (v *nodeView) Node() *corev1.Node {
	o, ok, err := v.store.GetByKey(v.name)
	if err != nil || !ok {
		return nil
	}
	n, _ := o.(*corev1.Node)
	return n
}

// resolverInputOf is what a resolution takes from n: its pod CIDRs, its addresses of the managed
// types and of the others, in status order, and the kubelet's provided-node-ip annotation.
func resolverInputOf(n *corev1.Node, managed []resolver.AddressType) resolver.NodeInput {
	unmanaged := slices.DeleteFunc([]resolver.AddressType{resolver.InternalIP, resolver.ExternalIP},
		func(t resolver.AddressType) bool { return slices.Contains(managed, t) })
	return resolver.NodeInput{PodCIDRs: podCIDRs(n), Addresses: statusAddresses(n, managed),
		Unmanaged: statusAddresses(n, unmanaged), ProvidedNodeIP: n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]}
}

// statusAddresses lists n's addresses of types, in status order.
func statusAddresses(n *corev1.Node, types []resolver.AddressType) []resolver.Address {
	var out []resolver.Address
	for _, na := range n.Status.Addresses {
		t := resolver.AddressType(na.Type)
		if ip, err := netip.ParseAddr(na.Address); err == nil && slices.Contains(types, t) {
			out = append(out, resolver.Address{Type: t, IP: ip.Unmap()})
		}
	}
	return out
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
