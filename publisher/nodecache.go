package publisher

// The publisher's copy of its Node: the agent's view, or a fresher copy the API server returned.

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// overrideTTL bounds how long a copy the publisher got from the API server itself stands in for the
// informer's: if a relist skipped the resourceVersion our write produced, the informer's copy is
// used again after this long, and a stale precondition there only costs a conflict and a re-read.
const overrideTTL = 30 * time.Second

// nodeCache is the one place the publisher reads its Node from. The rule for which copy is
// current, with resourceVersions treated as opaque strings (compared for equality, never ordered):
//
//   - the agent's view (NodeView: the informer's store) holds the Node as the watch delivered it;
//     it is current by default, and no Node there means the Node does not exist (or has not been
//     seen yet);
//   - a copy the API server returned to us directly (a write's response, a read after a conflict)
//     is newer than anything the informer has delivered so far, so it stands in for the store's
//     copy until the informer delivers that same resourceVersion (it has caught up; what it
//     delivers after that is newer still), delivers a Node with another UID (recreated), holds none
//     (deleted), or overrideTTL has passed.
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

// informed takes each Node the informer delivers, in order: once it delivers the resourceVersion of
// the copy standing in (or another UID), the informer has caught up and its store is current again,
// whatever it delivers next.
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
