package publisher

// The Publisher's view of its Node: what the informer delivers, which copy is current, and
// whether another writer changed what nodeaddr wrote.

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// observe takes a Node from the informer.
func (p *Publisher) observe(o any) {
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.mu.Lock()
	if newer(n, p.node) {
		p.node = n
		p.checkOverwrite(n)
	}
	cidrs := podCIDRs(p.node)
	send := p.cfg.OnNode != nil && (!p.podCIDRsSent || !slices.Equal(cidrs, p.podCIDRs))
	var view resolver.NodeView
	if send {
		p.podCIDRs, p.podCIDRsSent = cidrs, true
		view = p.nodeView(p.node)
	}
	p.mu.Unlock()
	if send {
		if len(cidrs) > 0 {
			p.log.Info("node's pod CIDRs", "pod_cidrs", fmt.Sprint(cidrs))
		}
		p.cfg.OnNode(view)
	}
	p.obs.OnTaint(hasUninitialized(n))
	p.wake()
}

// nodeView is what the resolver needs to know of n.
func (p *Publisher) nodeView(n *corev1.Node) resolver.NodeView {
	return resolver.NodeView{PodCIDRs: podCIDRs(n), Addresses: InStatusOrder(n.Status.Addresses, p.cfg.Managed, nil)}
}

// checkOverwrite counts a change of our managed entries made by someone else after our last write.
// Caller holds mu.
func (p *Publisher) checkOverwrite(n *corev1.Node) {
	if p.written == nil || p.reverted || n.ResourceVersion == p.writeRV || !newerRV(n.ResourceVersion, p.writeRV) {
		return
	}
	got := Managed(n.Status.Addresses, p.cfg.Managed)
	if p.inflight != nil && slices.Equal(got, p.inflight) {
		// The echo of our own write, arriving before its response, or of one that failed on our
		// side (a timeout) although the API server applied it: it is what we wrote.
		p.written, p.writeRV, p.inflight = got, n.ResourceVersion, nil
		return
	}
	if !slices.Equal(got, p.written) {
		p.reverted = true
		p.obs.OnOverwrite()
		delay := p.fight.Revert(time.Now())
		p.obs.OnOverwriteBackoff(delay)
		who := lastStatusWriter(n, p.cfg.FieldManager)
		p.log.Warn("another writer changed the managed addresses", "reason", "overwritten",
			"writer", who, "ours", fmt.Sprint(p.written), "theirs", fmt.Sprint(got), "rewrite_in", delay)
		p.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, ReasonAddressesOverwritten,
			"%s replaced the addresses nodeaddr wrote (%v with %v); if it is the kubelet, run it with --cloud-provider=external",
			who, p.written, got)
	}
}

// lastStatusWriter names the most recent other manager of status fields, from managedFields.
func lastStatusWriter(n *corev1.Node, self string) string {
	var who string
	var at time.Time
	for _, m := range n.ManagedFields {
		if m.Manager == self || m.Subresource != "status" {
			continue
		}
		if m.Time != nil && !m.Time.Time.Before(at) {
			who, at = m.Manager, m.Time.Time
		}
	}
	if who == "" {
		return "another writer"
	}
	return who
}

func (p *Publisher) forget(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.mu.Lock()
	p.node, p.written, p.writeRV, p.reverted, p.inflight = nil, nil, "", false, nil
	p.mu.Unlock()
	p.ready.Store(false)
	p.log.Warn("node deleted, waiting for it to be created again")
}

func hasUninitialized(n *corev1.Node) bool {
	_, found := WithoutUninitialized(n.Spec.Taints)
	return found
}

// newer reports whether a is a later observation of the Node than b. resourceVersions are opaque
// strings by contract; the API server backed by etcd issues increasing integers, which is what this
// relies on, with "different" as the fallback.
func newer(a, b *corev1.Node) bool {
	if a == nil {
		return false
	}
	if b == nil || a.UID != b.UID {
		return true
	}
	return newerRV(a.ResourceVersion, b.ResourceVersion)
}

func newerRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}
