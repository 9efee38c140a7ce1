package publisher

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NewNodeInformer returns an informer on the one Node called name, its objects trimmed to what
// nodeaddr reads (trimNode). The agent runs one and hands it to both the publisher (which writes
// the Node) and the resolver loop (which reads the Node's pod CIDRs and addresses). It is built
// directly rather than through an informer factory, which links every API group's informers.
func NewNodeInformer(nodes NodeClient, name string) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return nodes.Watch(ctx, o)
		},
	}
	// The client says whether it can serve streaming lists (fake clientsets cannot).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, nodes),
		&corev1.Node{}, 0, cache.Indexers{})
	// SetTransform fails only once the informer has started.
	_ = inf.SetTransform(trimTransform)
	return inf
}
