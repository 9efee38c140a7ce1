package publisher

// Where the publisher's Node comes from: the API it writes through, the agent's view, and the one
// rule for which copy is current (nodeCache).

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeClient is the part of client-go's typed NodeInterface the publisher uses: a Node's patch and,
// after a conflict, a fresh read (the agent's client, internal/kube).
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// NodeView is how the publisher reads its Node: the agent's one read-only view, the copy its
// informer holds. Node returns nil while the Node does not exist or has not been seen; callers
// must not modify what it returns.
type NodeView interface {
	Node() *corev1.Node
}

// noNode is the view without a Node (Config.Node nil): Publish and Reconcile wait for one.
type noNode struct{}

func (noNode) Node() *corev1.Node { return nil }

// trimNode drops from n, in place, what the publisher never reads (status.images, managedFields'
// field sets), as the agent's informer trims its copies; writes are patches of single fields, so
// nothing trimmed is ever written back.
func trimNode(n *corev1.Node) {
	n.Status.Images = nil
	for i := range n.ManagedFields {
		n.ManagedFields[i].FieldsV1 = nil
	}
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
