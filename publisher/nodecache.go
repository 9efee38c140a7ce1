package publisher

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

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
