package conflicts

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/nodeindex"
)

// onAdd records the Node's claims and queues the Nodes around it. In the initial list they were
// listed before the detector started (old: a conflict found at start is no move); a Node added
// later is joining, its addresses are its first (Claim.First: no move window).
func (c *Controller) onAdd(o any, initial bool) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	ips := nodeindex.IPs(n)
	var b begun
	if !initial {
		b = begun{at: c.cfg.Now(), first: true}
	}
	c.mu.Lock()
	for _, ip := range ips {
		c.since[claimKey{n.Name, ip}] = b
	}
	c.mu.Unlock()
	c.queueAround(n.Name, ips)
}

// onUpdate records the claims a Node gained or lost and queues it with every Node that lists, or
// listed, one of its addresses; a Node whose addresses and readiness did not change (a heartbeat)
// costs a comparison, unless its condition was changed by someone else. The claims of a Node that
// listed no IP before are its first (a kubelet registering without IPs, then the agent's write).
func (c *Controller) onUpdate(oldObj, newObj any) {
	a, ok1 := oldObj.(*corev1.Node)
	b, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	before, after := nodeindex.IPs(a), nodeindex.IPs(b)
	started := begun{at: c.cfg.Now(), first: len(before) == 0}
	c.mu.Lock()
	for _, ip := range after {
		if !slices.Contains(before, ip) {
			c.since[claimKey{b.Name, ip}] = started
		}
	}
	for _, ip := range before {
		if !slices.Contains(after, ip) {
			delete(c.since, claimKey{b.Name, ip})
		}
	}
	conditionChanged := false
	if cur := Current(b); cur != nil {
		w, mine := c.written[b.Name]
		switch {
		case mine && w == *cur:
			delete(c.written, b.Name) // the informer shows what was written
		case mine || !equalWritten(Current(a), cur):
			delete(c.written, b.Name) // someone else wrote it: decide again
			conditionChanged = true
		}
	}
	c.mu.Unlock()
	switch {
	case !slices.Equal(before, after) || NotReady(a) != NotReady(b):
		c.queueAround(b.Name, append(before, after...))
	case conditionChanged:
		c.queue.Add(b.Name)
	}
}

func equalWritten(a, b *Written) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// onDelete forgets the Node and queues the Nodes that listed one of its addresses.
func (c *Controller) onDelete(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	c.forget(n.Name)
	c.queueAround(n.Name, nodeindex.IPs(n))
}

// queueAround queues node and every Node that lists one of ips (one index lookup per address).
func (c *Controller) queueAround(node string, ips []netip.Addr) {
	c.queue.Add(node)
	for _, ip := range ips {
		for _, h := range nodeindex.ByIP(c.nodes.GetIndexer(), ip) {
			c.queue.Add(h.Name)
		}
	}
}

// forget drops what the detector keeps about a Node that is gone.
func (c *Controller) forget(node string) {
	c.mu.Lock()
	for k := range c.since {
		if k.node == node {
			delete(c.since, k)
		}
	}
	delete(c.written, node)
	c.mu.Unlock()
	c.setFlagged(node, Verdict{})
}

// setFlagged records node's conflicting addresses and sets the gauges.
func (c *Controller) setFlagged(node string, v Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(v.Conflicts) == 0 {
		delete(c.flagged, node)
	} else {
		ips := make([]netip.Addr, 0, len(v.Conflicts))
		for _, cf := range v.Conflicts {
			ips = append(ips, cf.Address)
		}
		c.flagged[node] = ips
	}
	addrs := map[netip.Addr]bool{}
	for _, ips := range c.flagged {
		for _, ip := range ips {
			addrs[ip] = true
		}
	}
	c.cfg.Metrics.nodes.Set(float64(len(c.flagged)))
	c.cfg.Metrics.addresses.Set(float64(len(addrs)))
}
