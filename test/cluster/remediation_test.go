package cluster

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// remediationGrace is the remediator's --grace in these scenarios: how long node B's new address
// must hold before its stale pods are evicted. Shorter than the shipped default (docs/remediation.md
// says why that one) so that the renumberings fit in the suite; healBound is how long every
// consumer gets to follow once the grace has passed (an eviction, the new pod, its readiness).
const (
	remediationGrace = 10 * time.Second
	healBound        = remediationGrace + 3*time.Minute
)

// renumberings is how many times node B is renumbered with remediation on: five in `make
// test-cluster` (the p50 and worst docs/renumbering.md gives, overall and per consumer), two in
// make test (each about 25 s).
func renumberings() int {
	if full() {
		return 5
	}
	return 2
}

// full is `make test-cluster`'s whole run (NODEADDR_CLUSTER_FULL set): the focus list also on the
// unremediated cluster, and five renumberings with remediation on.
func full() bool { return os.Getenv("NODEADDR_CLUSTER_FULL") != "" }

// remediate turns remediation on (the pod-remediation component, beside the approver) after the
// renumbering that left node B's hostNetwork pods on its old address: every consumer but the
// frozen one follows without anyone acting, and Kubernetes' own e2e focus list passes. Then node B
// is renumbered renumberings() times, and each
// time every consumer follows; the time from the new address to the last consumer following is
// reported (p50, worst), and per consumer (the column of docs/renumbering.md's table). The
// guarded pod (pdb_test.go) is never evicted, each time reported; it is removed at the end. Then a
// flap shorter than the grace (node B's address away and back) evicts nothing.
func (w *cluster) remediate(t *testing.T, wl workloads) {
	now := ipB2
	applied := time.Now()
	w.kubectlAdmin("apply", "-k", w.overlay(true, remediationGrace))
	defer w.removeGuarded(t)
	if !t.Run("heals-what-the-renumbering-left", func(t *testing.T) {
		all, _ := w.allFollow(t, wl, now, nil, applied)
		t.Logf("remediation on → every consumer following node B's %s: %s", now, all.Round(10*time.Millisecond))
		w.guardedHeld(t, wl)
	}) {
		return
	}
	// Kubernetes' own focus list on the renumbered cluster once remediation healed it: every spec.
	if !t.Run("e2e-after-renumbering", func(t *testing.T) { w.e2e(t, true) }) {
		return
	}
	var took []time.Duration
	var rows []string
	byRow := map[string][]time.Duration{}
	t.Run("renumberings", func(t *testing.T) {
		for i := range renumberings() {
			next := fmt.Sprintf("%s%d", harness.LANPrefix, 32+10*(i%2))
			exits, moved := w.renumber(t, next)
			w.samePodNetworkPods(t, wl)
			all, each := w.allFollow(t, wl, next, exits, moved)
			took = append(took, all)
			for _, r := range each {
				if _, ok := byRow[r.name]; !ok {
					rows = append(rows, r.name)
				}
				byRow[r.name] = append(byRow[r.name], r.after)
			}
			w.proxyAUntouched(t, exits)
			w.guardedHeld(t, wl)
			now = next
			if t.Failed() {
				return
			}
		}
		p50, worst := spread(took)
		t.Logf("%d renumberings of node B by DHCP with remediation on (grace %s): new address → every consumer following: p50 %s, worst %s (each: %v)",
			len(took), remediationGrace, p50, worst, took)
		var table strings.Builder
		fmt.Fprintf(&table, "| consumer of node B's address | with remediation on: p50 | worst |\n|---|---|---|\n")
		for _, r := range rows {
			p50, worst := spread(byRow[r])
			fmt.Fprintf(&table, "| %s | %s | %s |\n", r, p50, worst)
		}
		t.Logf("%d renumberings with remediation on, new address → each consumer following:\n%s", len(took), table.String())
	})
	t.Run("flap-within-grace-evicts-nothing", func(t *testing.T) { w.flap(t, now) })
}

// followed is how long one consumer took to follow.
type followed struct {
	name  string
	after time.Duration
}

// spread is the p50 and the worst of took, rounded to 10 ms.
func spread(took []time.Duration) (p50, worst time.Duration) {
	sorted := slices.Sorted(slices.Values(took))
	return sorted[len(sorted)/2].Round(10 * time.Millisecond), sorted[len(sorted)-1].Round(10 * time.Millisecond)
}

// allFollow waits until every consumer of node B's address but the frozen one uses now (exits:
// kube-proxy's exits before the renumbering, nil when there was none) and returns how long it took
// from since, for all and for each; it fails t with the consumers that did not.
func (w *cluster) allFollow(t *testing.T, wl workloads, now string, exits map[string]int, since time.Time) (time.Duration, []followed) {
	t.Helper()
	var checks []check
	for _, c := range w.checks(wl, now, exits) {
		if !c.frozen && (exits != nil || c.fresh) {
			checks = append(checks, c)
		}
	}
	after, errs := follow(checks, since, healBound)
	var worst time.Duration
	each := make([]followed, len(checks))
	for i, c := range checks {
		if errs[i] != nil {
			t.Errorf("%s did not follow node B's %s with remediation on: %v", c.name, now, errs[i])
		}
		worst = max(worst, after[i])
		each[i] = followed{c.name, after[i]}
	}
	return worst, each
}

// samePodNetworkPods fails t unless the web pods are the ones wl holds: pod-network pods are never
// evicted.
func (w *cluster) samePodNetworkPods(t *testing.T, wl workloads) {
	t.Helper()
	a, b := w.podOn("default", "app=web-a", nodeA), w.podOn("default", "app=web-b", nodeB)
	if a == nil || b == nil || a.UID != wl.webA.UID || b.UID != wl.webB.UID {
		t.Fatalf("the pod-network web pods changed: remediation recreates only hostNetwork pods")
	}
}

// flap moves node B's address away and back within the grace: nothing is evicted (no
// StalePodEvicted Event, node B's hostNetwork pods are the same pods) a grace and more later.
// Node B must have published the flapped address (else there was no flap to ride out) and then
// its address again.
func (w *cluster) flap(t *testing.T, now string) {
	before := len(w.c.CP.Events(t, nodeB, vocab.ReasonStalePodEvicted))
	pods := w.hostNetworkPods(t, nodeB)
	away := harness.LANPrefix + "52"
	_, moved := w.renumber(t, away)
	w.c.CP.WaitNode(t, nodeB, remediationGrace/2, "Node B publishing the flapped address "+away, publishes(away))
	time.Sleep(2*time.Second - time.Since(moved)) // the flap's length, a fixed interval shorter than the grace
	w.renumber(t, now)
	w.c.CP.WaitNode(t, nodeB, remediationGrace/2, "Node B publishing "+now+" again", publishes(now))
	time.Sleep(remediationGrace + 10*time.Second) // longer than the grace: an eviction would have come
	if n := len(w.c.CP.Events(t, nodeB, vocab.ReasonStalePodEvicted)) - before; n != 0 {
		t.Errorf("%d StalePodEvicted Events on node B after a 2 s flap (grace %s)", n, remediationGrace)
	}
	if after := w.hostNetworkPods(t, nodeB); !slices.Equal(after, pods) {
		t.Errorf("node B's hostNetwork pods changed after a 2 s flap: %v, then %v", pods, after)
	}
}

// publishes is true of a Node whose InternalIP is ip.
func publishes(ip string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		return slices.Contains(n.Status.Addresses, harness.Addr(corev1.NodeInternalIP, ip))
	}
}

// hostNetworkPods lists the UIDs of the running hostNetwork pods on node, sorted.
func (w *cluster) hostNetworkPods(t *testing.T, node string) []string {
	t.Helper()
	var uids []string
	for _, sel := range []struct{ ns, label string }{{"default", "app=hostweb"}, {"kube-flannel", "app=flannel"}, {"kube-system", "app.kubernetes.io/name=nodeaddr"}} {
		p := w.podOn(sel.ns, sel.label, node)
		if p == nil {
			t.Fatalf("no running pod %s in %s on %s", sel.label, sel.ns, node)
		}
		if !p.Spec.HostNetwork {
			t.Fatalf("pod %s/%s is not on the host network", p.Namespace, p.Name)
		}
		uids = append(uids, string(p.UID))
	}
	slices.Sort(uids)
	return uids
}
