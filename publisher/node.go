package publisher

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// onNode takes an added or updated Node from the informer.
func (p *Publisher) onNode(o any) {
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.nodes.informed(n)
	p.mu.Lock()
	ow := p.detect.observe(n, time.Now())
	p.mu.Unlock()
	if ow != nil {
		p.reportOverwrite(ow)
	}
	p.queue.Add()
}

// reportOverwrite logs, counts and records another writer's change of our addresses.
func (p *Publisher) reportOverwrite(ow *overwrite) {
	p.cfg.Metrics.overwritten(ow.delay)
	p.log.Warn("another writer changed the managed addresses", "reason", "overwritten",
		"writer", ow.writer, "ours", fmt.Sprint(ow.ours), "theirs", fmt.Sprint(ow.theirs), "rewrite_in", ow.delay)
	p.cfg.Recorder.Eventf(ow.node, corev1.EventTypeWarning, ReasonAddressesOverwritten,
		"%s replaced the addresses nodeaddr wrote (%v with %v); %s", ow.writer, ow.ours, ow.theirs, overwriteAdvice(ow.node))
}

// overwriteAdvice says how to end a fight over the addresses: a providerID is the sign of a cloud
// controller manager in a hybrid cluster, and there the fix is to keep nodeaddr off that Node.
func overwriteAdvice(n *corev1.Node) string {
	const kubelet = "if it is the kubelet, run it with --cloud-provider=external"
	if id := n.Spec.ProviderID; id != "" {
		return fmt.Sprintf("if it is a cloud controller manager (the Node has providerID %q), run nodeaddr only on "+
			"the Nodes no cloud controller manager manages (docs/hybrid-clusters.md); %s", id, kubelet)
	}
	return kubelet
}

// onUpdate takes an updated Node from the informer, unless its resourceVersion is the old one: the
// relist after a broken watch, which would let a fleet bypass its retry backoff when the server is back.
func (p *Publisher) onUpdate(old, o any) {
	if unchanged(old, o) {
		return
	}
	p.onNode(o)
}

// unchanged reports whether an informer update carries the same Node revision as before.
func unchanged(old, o any) bool {
	on, ok1 := old.(*corev1.Node)
	nn, ok2 := o.(*corev1.Node)
	return ok1 && ok2 && on.ResourceVersion != "" && on.ResourceVersion == nn.ResourceVersion
}

// onDelete takes the Node's deletion from the informer.
func (p *Publisher) onDelete(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.mu.Lock()
	p.detect.forget()
	p.mu.Unlock()
	p.health.ready.Store(false)
	p.log.Warn("node deleted, waiting for it to be created again")
	p.queue.Add()
}

func hasUninitialized(n *corev1.Node) bool {
	_, found := withoutUninitialized(n.Spec.Taints)
	return found
}
