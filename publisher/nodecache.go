package publisher

// Where the publisher's Node comes from: the API it uses, the agent's informer (its objects
// trimmed) and view, and the one rule for which copy is current (nodeCache).

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NodeClient is the part of client-go's typed NodeInterface the publisher uses (internal/kube).
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

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

// trimNode drops from n, in place, what the publisher never reads (status.images, managedFields'
// field sets); writes are patches of single fields, so nothing trimmed is ever written back.
func trimNode(n *corev1.Node) {
	n.Status.Images = nil
	for i := range n.ManagedFields {
		n.ManagedFields[i].FieldsV1 = nil
	}
}

// trimTransform is the informer's TransformFunc: its objects are not shared yet, so trimming is safe.
func trimTransform(o any) (any, error) {
	if n, ok := o.(*corev1.Node); ok {
		trimNode(n)
	}
	return o, nil
}

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

// overrideTTL bounds how long a copy from the API server stands in for the informer's (if a relist
// skipped it, a stale precondition only costs a conflict).
const overrideTTL = 30 * time.Second

// nodeCache is the one place the publisher reads its Node from: the agent's view, or a copy the API
// server returned to us (a write's response, a read after a conflict) until the informer delivers
// that same resourceVersion (never ordered), another UID, none, or overrideTTL has passed.
type nodeCache struct {
	view NodeView

	mu       sync.Mutex
	override *corev1.Node
	at       time.Time
}

// get returns the current Node, nil if there is none. Callers must not modify it.
func (c *nodeCache) get() *corev1.Node {
	informed := c.view.Node()
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.override; o != nil {
		switch {
		case informed == nil || informed.UID != o.UID || informed.ResourceVersion == o.ResourceVersion:
		case time.Since(c.at) > overrideTTL:
		default:
			return o
		}
		c.override = nil
	}
	return informed
}

// informed takes each Node the informer delivers, in order: once it delivers the copy standing in
// (or another UID), the informer has caught up.
func (c *nodeCache) informed(n *corev1.Node) {
	c.mu.Lock()
	if o := c.override; o != nil && (n.UID != o.UID || n.ResourceVersion == o.ResourceVersion) {
		c.override = nil
	}
	c.mu.Unlock()
}

// received records a Node the API server returned to us directly.
func (c *nodeCache) received(n *corev1.Node) {
	trimNode(n)
	c.mu.Lock()
	c.override, c.at = n, time.Now()
	c.mu.Unlock()
}
