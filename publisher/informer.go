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

// NewNodeInformer returns an informer on the one Node called name, its objects trimmed (trimNode),
// built without an informer factory (which links every group's informers). report, if not nil,
// receives the outcome of every list and watch request while ctx is alive: in watch-list mode the
// reflector retries a refused connection in place and never calls the WatchErrorHandler.
func NewNodeInformer(nodes NodeClient, name string, report func(error)) cache.SharedIndexInformer {
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
