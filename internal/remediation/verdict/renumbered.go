package verdict

// The second rule of staleness. The kubelet does not reliably keep a hostNetwork pod's podIPs: it
// sets them from the node's current IPs whenever its cached runtime status has none
// (kubelet_pods.go generateAPIPodStatus: "HostNetwork Pods inherit the node IPs as PodIPs"), so a
// pod started on the old address (flannel reads its public address once, at start) may show the
// new one. A pod is therefore also stale when one of its running containers started while its Node
// had an address the Node no longer has. Only the remediator knows the Node's past addresses, from
// what its informer saw (History): after it restarts, and in `kubectl nodeaddr stale`, only the
// podIP rule (StaleIPs) applies.

import (
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// maxEpochs bounds a History: a Node that changed its addresses more often forgets its oldest sets.
const maxEpochs = 8

// Epoch is one of a Node's InternalIP/ExternalIP sets, from when the remediator's informer saw it.
type Epoch struct {
	Since time.Time
	Addrs []netip.Addr // sorted, unique; empty before the agent first published
}

// History is what the remediator saw of one Node's InternalIP/ExternalIP sets, oldest first. The
// first epoch's set is taken to have held since before it was seen (the Node as the remediator
// found it), unless Truncated (older epochs dropped): then nothing is known before it.
type History struct {
	Epochs    []Epoch
	Truncated bool
}

// NodeAddrs is a Node's InternalIP and ExternalIP addresses, sorted and unique.
func NodeAddrs(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// Observe is h after the informer saw n at now: a new epoch when n's set differs from the last one.
func (h History) Observe(n *corev1.Node, now time.Time) History {
	addrs := NodeAddrs(n)
	if k := len(h.Epochs); k > 0 && slices.Equal(h.Epochs[k-1].Addrs, addrs) {
		return h
	}
	h.Epochs = append(slices.Clip(h.Epochs), Epoch{Since: now, Addrs: addrs})
	if k := len(h.Epochs); k > maxEpochs {
		h.Epochs, h.Truncated = slices.Clone(h.Epochs[k-maxEpochs:]), true
	}
	return h
}

// At is the Node's set at t or, when it had none then, the first it had after (the addresses a pod
// started before the agent's first publication took); false when unknown (before a truncated
// history, or no history).
func (h History) At(t time.Time) ([]netip.Addr, bool) {
	if len(h.Epochs) == 0 || (h.Truncated && t.Before(h.Epochs[0].Since)) {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(h.Epochs, t, func(e Epoch, t time.Time) int {
		if e.Since.After(t) {
			return 1
		}
		return -1 // e.Since ≤ t: the epoch in force at t is the last of these
	})
	for i = max(i-1, 0); i < len(h.Epochs)-1 && len(h.Epochs[i].Addrs) == 0; i++ {
	}
	return h.Epochs[i].Addrs, true
}

// Renumbering is why Renumbered calls a pod stale.
type Renumbering struct {
	Container string
	Started   time.Time // its container's state.running.startedAt
	Lost      []string  // the addresses its Node had then and no longer has
}

// Renumbered is the second rule: a running or pending hostNetwork pod of node one of whose running
// containers started while the Node had InternalIP/ExternalIP addresses it no longer has (h: what
// the remediator saw). Not a renumbering: the first addresses published (the Node had none), an
// address added (every one it had remains), a change and back. ok is false when nothing is known
// (h nil: kubectl nodeaddr stale, or a remediator that started after the change).
func Renumbered(p *corev1.Pod, node *corev1.Node, h *History) (r Renumbering, ok bool) {
	if h == nil || p == nil || node == nil || !p.Spec.HostNetwork || p.Spec.NodeName != node.Name ||
		p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Renumbering{}, false
	}
	now := NodeAddrs(node)
	if len(now) == 0 {
		return Renumbering{}, false // nothing to compare with, as in StaleIPs
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil || c.State.Running.StartedAt.IsZero() {
			continue
		}
		started := c.State.Running.StartedAt.Time
		then, known := h.At(started)
		var lost []string
		for _, a := range then {
			if !slices.Contains(now, a) {
				lost = append(lost, a.String())
			}
		}
		if known && len(lost) > 0 {
			return Renumbering{Container: c.Name, Started: started, Lost: lost}, true
		}
	}
	return Renumbering{}, false
}
