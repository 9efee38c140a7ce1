// Package conflicts detects Nodes that list the same address (`nodeaddr conflicts`, one
// leader-elected Deployment for the cluster): it marks each Node involved with the condition
// vocab.ConditionAddressConflict, records a Warning Event naming the other Node(s), exports
// gauges, and clears the condition when the conflict ends. Nothing in Kubernetes flags two Nodes
// with one InternalIP (VirtualBox's NAT gives every VM 10.0.2.15: k0s#1669, k3s#10109), yet the API
// server then reaches the wrong kubelet and the approver leaves every serving CSR naming it
// pending. Calico's calico-node exits instead (checkConflictingNodes, an O(n²) Node LIST;
// calico#13792 proposes a Lease per address): here one Node informer indexed by IP
// (internal/nodeindex) answers "who else lists this address" in O(1) per change, and nothing is
// listed after the informer's first LIST.
//
// The decision is Decide, a pure function of the claims (which Node lists an address since when,
// and whether it is Ready); the controller (controller.go) is the I/O around it.
package conflicts

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// Claim is one Node listing an address.
type Claim struct {
	Node string
	// Since is when the detector first saw the Node list the address; zero when it was listed
	// before the detector started (its first LIST): an old claim, never a move.
	Since time.Time
	// NotReady: the Node's Ready condition is present and not True (its kubelet, and so its
	// agent, stopped reporting). A Node without a Ready condition counts as Ready.
	NotReady bool
	// First: the claim began with the Node's first addresses, as the detector saw them (a Node
	// added after its start already listing addresses, or a Node that listed none and now lists
	// some): a Node joining, with no address of its own it could be moving from.
	First bool
}

// Shared is an address of the Node decided on, with the other Nodes that list it.
type Shared struct {
	Address netip.Addr
	Self    Claim
	Others  []Claim
}

// Conflict is an address the Node shares with other Nodes for longer than the move window.
type Conflict struct {
	Address  netip.Addr
	Nodes    []string // the other Nodes, sorted
	NotReady []string // those of Nodes that are NotReady
}

// Verdict is Decide's answer for one Node.
type Verdict struct {
	Conflicts []Conflict // sorted by address
	// RecheckAt is when a pair still inside the move window leaves it (zero: none): the Node is
	// decided again then, as nothing else may change.
	RecheckAt time.Time
}

// Decide says which of a Node's shared addresses are conflicts at now. Two claims on one address
// are a move, not a conflict, while the newer of the two is younger than window: an address
// leaving Node X and appearing on Node Y within window (a DHCP lease handed to another node, a
// renumbering that swaps addresses, a VIP failing over) is never flagged, as X drops it in time.
// A newer claim that is First (a Node joining with an address another Node lists: a cloned VM, a
// second VM on a NAT address) gets no window: the pair is a conflict at once (window).
// Pairs are judged one by one, so a third Node claiming an address two Nodes already conflict on
// neither clears nor delays the conflict of the first two. A NotReady Node's claim counts like any
// other: its stale entry still misleads the API server and the approver, so both Nodes are
// flagged, with a reason that says which one is stale (Condition).
//
// A Ready incumbent is not flagged (incumbent): when the detector saw the other Node's claim begin
// more than window after this Node's, only the newcomer is, its message naming the incumbent. A
// compromised node that lists a victim's address thus marks only its own Node. Claims of unknown
// age (both listed before the detector started) or within window of each other flag both.
func Decide(shared []Shared, now time.Time, window time.Duration) Verdict {
	var v Verdict
	for _, s := range shared {
		c := Conflict{Address: s.Address}
		for _, o := range s.Others {
			if o.Node == s.Self.Node || incumbent(s.Self, o, window) {
				continue
			}
			if end := moveEnd(s.Self, o, window); now.Before(end) {
				if v.RecheckAt.IsZero() || end.Before(v.RecheckAt) {
					v.RecheckAt = end
				}
				continue
			}
			c.Nodes = append(c.Nodes, o.Node)
			if o.NotReady {
				c.NotReady = append(c.NotReady, o.Node)
			}
		}
		if len(c.Nodes) > 0 {
			slices.Sort(c.Nodes)
			slices.Sort(c.NotReady)
			v.Conflicts = append(v.Conflicts, c)
		}
	}
	slices.SortFunc(v.Conflicts, func(a, b Conflict) int { return a.Address.Compare(b.Address) })
	return v
}

// moveEnd is when the pair's move window ends: window after the newer claim began, or that
// instant itself when the newer claim is First (claims begun together: both must be First).
func moveEnd(a, b Claim, window time.Duration) time.Time {
	if a.Since.Equal(b.Since) {
		if a.First && b.First {
			return a.Since
		}
		return a.Since.Add(window)
	}
	newer := a
	if b.Since.After(a.Since) {
		newer = b
	}
	if newer.First {
		return newer.Since
	}
	return newer.Since.Add(window)
}

// incumbent reports whether self, Ready, listed the address more than window before the detector
// saw other's claim begin (a zero Since, listed before the detector started, is the oldest; a
// zero other.Since is of unknown age and never newer). A detector restart forgets the order: every
// claim it finds is zero, and both Nodes are flagged.
func incumbent(self, other Claim, window time.Duration) bool {
	return !self.NotReady && !other.Since.IsZero() && other.Since.After(self.Since.Add(window))
}

// Others are the other Nodes in the verdict's conflicts, sorted, each once.
func (v Verdict) Others() []string {
	var out []string
	for _, c := range v.Conflicts {
		out = append(out, c.Nodes...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// messageLimit bounds the condition's message (the policy allows 1024 characters).
const messageLimit = 1000

// Condition is the Node's condition for v: status, reason and message. A Node that is itself
// Ready and conflicts only with NotReady Nodes gets vocab.ConflictReasonNotReadyNode (the fix is
// on the stale Node: delete it, or its stale entry); any other conflict
// vocab.ConflictReasonAnotherNode.
func Condition(v Verdict, selfNotReady bool) (corev1.ConditionStatus, string, string) {
	if len(v.Conflicts) == 0 {
		return corev1.ConditionFalse, vocab.ConflictReasonNone, "No other Node lists an address of this Node"
	}
	reason := vocab.ConflictReasonNotReadyNode
	var parts []string
	for _, c := range v.Conflicts {
		if selfNotReady || len(c.NotReady) < len(c.Nodes) {
			reason = vocab.ConflictReasonAnotherNode
		}
		var names []string
		for _, n := range c.Nodes {
			if slices.Contains(c.NotReady, n) {
				n += " (NotReady)"
			}
			names = append(names, n)
		}
		parts = append(parts, fmt.Sprintf("%s is also listed by Node %s", c.Address, strings.Join(names, ", ")))
	}
	msg := strings.Join(parts, "; ")
	if len(msg) > messageLimit {
		msg = strings.ToValidUTF8(msg[:messageLimit-3], "") + "..."
	}
	return corev1.ConditionTrue, reason, msg
}

// Written is what the detector last wrote, or found, as the Node's condition.
type Written struct {
	Status          corev1.ConditionStatus
	Reason, Message string
}

// Plan says whether the condition must be written: never for a Node without the condition and
// without a conflict (a fleet without conflicts costs no write), else when status, reason or
// message differ from current (nil: the Node has no such condition).
func Plan(current *Written, want Written) bool {
	if current == nil {
		return want.Status == corev1.ConditionTrue
	}
	return *current != want
}

// NotReady reports whether n's Ready condition is present and not True.
func NotReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return false
}

// Current is n's vocab.ConditionAddressConflict condition, nil when it has none.
func Current(n *corev1.Node) *Written {
	for _, c := range n.Status.Conditions {
		if c.Type == vocab.ConditionAddressConflict {
			return &Written{Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}
	return nil
}
