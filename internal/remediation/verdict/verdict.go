// Package verdict decides, for one hostNetwork pod and its own Node, whether the pod is stale (its
// status.podIPs are no longer among the Node's addresses, or, as far as the remediator saw, it
// started while the Node had an address it no longer has: renumbered.go) and whether the
// remediator evicts it, when, or why not. It is the one decision `nodeaddr remediator` acts on and `kubectl nodeaddr
// stale` prints. Pure: no I/O, the time is an input.
package verdict

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// Reasons of a verdict: stable names, in the metrics' reason label, Events and `stale`'s output.
const (
	NotStale     = "NotStale"     // every pod IP is one of the Node's addresses (or nothing to compare)
	Evict        = "Evict"        // stale: evict now
	Grace        = "Grace"        // stale: the Node's addresses have not held for the grace yet
	PDBBlocked   = "PDBBlocked"   // stale: the last eviction was refused (429); retried at At
	StaticPod    = "StaticPod"    // stale: a static pod's mirror; evicting it would not restart it
	NoController = "NoController" // stale: no controller would create it again
	OptedOut     = "OptedOut"     // stale: the pod carries nodeaddr.io/remediation=disabled
	Terminating  = "Terminating"  // stale: already being deleted
	Off          = "Off"          // stale: no remediator runs (kubectl nodeaddr stale only)
)

// DefaultGrace is `nodeaddr remediator --grace`'s default (docs/remediation.md says why).
const DefaultGrace = time.Minute

// Reasons lists the reasons of a stale pod, for metrics' labels.
func Reasons() []string {
	return []string{Evict, Grace, PDBBlocked, StaticPod, NoController, OptedOut, Terminating, Off}
}

// Input is what the decision reads about one pod.
type Input struct {
	Pod *corev1.Pod
	// Node is the pod's own Node (spec.nodeName), nil when it does not exist. Only its addresses are
	// compared with the pod's: a node that lies about its addresses can at most get its own pods
	// evicted.
	Node *corev1.Node
	// Changed is when the Node's addresses last changed (zero: unknown, taken as now).
	Changed time.Time
	// History is what the remediator saw of the Node's addresses (nil: nothing, as for kubectl
	// nodeaddr stale; then only the podIP rule applies).
	History *History
	// Refusal is why the last eviction was refused with 429 (a PodDisruptionBudget; "": none was),
	// RetryAt when it may be tried again (zero: unknown, as for kubectl nodeaddr stale, which reads
	// the budgets, not the remediator's memory).
	RetryAt time.Time
	Refusal string
	Now     time.Time
	// Grace is how long the Node's addresses must hold before a stale pod is evicted.
	Grace time.Duration
	// Enabled: a remediator runs (false: kubectl nodeaddr stale found none).
	Enabled bool
}

// Verdict is the decision on one pod.
type Verdict struct {
	Stale  bool
	Reason string
	// At is when the pod will be evicted (Evict: now; Grace: when the grace ends; PDBBlocked: the
	// next attempt); zero for the other reasons.
	At time.Time
	// Old are the pod IPs its Node no longer has, or, when Renumbered, the addresses the Node had
	// when the pod's container started and no longer has.
	Old []string
	// Renumbered: stale by the second rule (its podIPs are the Node's, its container is older).
	Renumbered bool
	// Cause says why the pod is stale, for Events; Message what happens to it.
	Cause   string
	Message string
}

// Evicts reports whether the remediator evicts the pod now.
func (v Verdict) Evicts() bool { return v.Reason == Evict }

// Decide is the verdict on in.Pod.
func Decide(in Input) Verdict {
	v := staleness(in)
	if !v.Stale {
		return v
	}
	p := in.Pod
	changed := in.Changed
	if changed.IsZero() {
		changed = in.Now
	}
	switch owner := metav1.GetControllerOf(p); {
	case !in.Enabled:
		v.Reason, v.Message = Off, "no remediator runs (deploy/components/pod-remediation); delete the pod: "+deleteCommand(p)
	case isMirror(p):
		v.Reason, v.Message = StaticPod, fmt.Sprintf("a static pod: evicting its mirror would not restart it; on node %s, move its manifest out of the kubelet's manifest directory and back", p.Spec.NodeName)
	case p.Annotations[vocab.RemediationAnnotation] == vocab.RemediationDisabled:
		v.Reason, v.Message = OptedOut, fmt.Sprintf("opted out (%s=%s); delete it when it may restart: %s", vocab.RemediationAnnotation, vocab.RemediationDisabled, deleteCommand(p))
	case owner == nil:
		v.Reason, v.Message = NoController, "no controller would create it again; recreate it on the new address yourself"
	case p.DeletionTimestamp != nil:
		v.Reason, v.Message = Terminating, "already being deleted"
	case in.Now.Before(changed.Add(in.Grace)):
		v.Reason, v.At = Grace, changed.Add(in.Grace)
		v.Message = fmt.Sprintf("the Node's addresses changed at %s; evicted once they held for %s", changed.UTC().Format(time.RFC3339), in.Grace)
	case in.Refusal != "" && (in.RetryAt.IsZero() || in.Now.Before(in.RetryAt)):
		v.Reason, v.At = PDBBlocked, in.RetryAt
		v.Message = "eviction refused, retried with backoff: " + in.Refusal
	default:
		v.Reason, v.At = Evict, in.Now
		v.Message = fmt.Sprintf("evicted through the Eviction API (%s %s creates it again)", owner.Kind, owner.Name)
	}
	return v
}

// staleness is the first two fields of the verdict: the podIP rule, else the renumbering rule.
func staleness(in Input) Verdict {
	if old := StaleIPs(in.Pod, in.Node); len(old) > 0 {
		return Verdict{Stale: true, Old: old, Cause: fmt.Sprintf("its status.podIPs %v are no longer the Node's addresses", old)}
	}
	if r, ok := Renumbered(in.Pod, in.Node, in.History); ok {
		return Verdict{Stale: true, Old: r.Lost, Renumbered: true, Cause: fmt.Sprintf(
			"its container %s started at %s, when the Node had %v, which it no longer has (its status.podIPs show the Node's current addresses)",
			r.Container, r.Started.UTC().Format(time.RFC3339), r.Lost)}
	}
	return Verdict{Reason: NotStale}
}

// StaleIPs are the IPs of a running or pending hostNetwork pod that its own Node does not have.
// Nothing is stale of a finished pod, a pod of another Node than node, a Node with no IP address
// (nothing to compare with) or a pod with no IP yet.
func StaleIPs(p *corev1.Pod, node *corev1.Node) []string {
	if p == nil || node == nil || !p.Spec.HostNetwork || p.Spec.NodeName != node.Name ||
		p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	var have []netip.Addr
	for _, a := range node.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			have = append(have, ip.Unmap())
		}
	}
	if len(have) == 0 {
		return nil
	}
	var old []string
	for _, ip := range PodIPs(p) {
		if a, err := netip.ParseAddr(ip); err == nil && slices.Contains(have, a.Unmap()) {
			continue
		}
		old = append(old, ip)
	}
	return old
}

// PodIPs are a pod's status.podIPs (status.podIP when the list is empty).
func PodIPs(p *corev1.Pod) []string {
	var ips []string
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = append(ips, p.Status.PodIP)
	}
	return ips
}

func isMirror(p *corev1.Pod) bool {
	_, ok := p.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func deleteCommand(p *corev1.Pod) string {
	return fmt.Sprintf("kubectl -n %s delete pod %s", p.Namespace, p.Name)
}

// AddressesChanged is when nodeaddr's agent last wrote the Node's status (its managedFields entry:
// the agent writes only on a change, the kubelet's heartbeats are its own entry), whole seconds.
// ok is false when no agent wrote it.
func AddressesChanged(n *corev1.Node) (time.Time, bool) {
	for _, m := range n.ManagedFields {
		if m.Manager == vocab.FieldManager && m.Subresource == "status" && m.Time != nil {
			return m.Time.Time, true
		}
	}
	return time.Time{}, false
}

// Describe is a verdict in one phrase for a table: what will happen, or why not.
func (v Verdict) Describe(now time.Time) string {
	switch v.Reason {
	case Evict:
		return "evicting now"
	case PDBBlocked:
		if v.At.IsZero() {
			return "eviction refused, retried with backoff: " + strings.TrimPrefix(v.Message, "eviction refused, retried with backoff: ")
		}
		return "eviction refused (PDB), retried at " + v.At.UTC().Format(time.RFC3339) + " (in " + v.At.Sub(now).Round(time.Second).String() + ")"
	case Grace:
		return "will be evicted at " + v.At.UTC().Format(time.RFC3339) + " (in " + v.At.Sub(now).Round(time.Second).String() + ")"
	}
	return "not evicted (" + v.Reason + "): " + v.Message
}
