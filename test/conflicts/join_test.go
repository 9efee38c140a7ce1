package conflicts

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// A Node joining with an address another Node lists is flagged at the detector's next decision,
// the move window not waited (docs/conflicts.md, "A Node joining"): the window is 60 s and each
// join must be flagged within joinWithin, a behaviour assertion (a window applied to the join
// would fail it), not a measure of speed. vm-2 registers listing vm-1's NAT address (a clone's
// kubelet); vm-3 registers without an IP (a kubelet with --cloud-provider=external) and its agent
// lists the address: both are flagged, each naming vm-1 and the other; vm-1, Ready and listing it
// since before the detector started, is never marked. c, which had an address, renumbered onto
// it, is decided inside the window and not marked before it renumbers back. Each conflict then
// clears.
func TestJoinFlaggedAtOnce(t *testing.T) {
	const (
		joinWindow = 60 * time.Second
		joinWithin = 20 * time.Second
	)
	w := newWorld(t)
	w.node(t, "vm-1", natIP)
	w.ready(t, "vm-1")
	w.node(t, "c", "192.0.2.3")
	w.detector = harness.StartConflicts(t, w.cp, "--move-window="+joinWindow.String(), "--log-level=debug")

	w.node(t, "vm-2", natIP)
	w.waitConditionWithin(t, joinWithin, "vm-2", corev1.ConditionTrue, reasonAnother, natIP+" is also listed by Node vm-1")
	if ev := w.cp.WaitEvents(t, "vm-2", eventConflict, 1, 10*time.Second)[0]; ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "Node vm-1") {
		t.Errorf("Event about vm-2: %s %q, want a Warning naming vm-1", ev.Type, ev.Message)
	}

	w.cp.CreateNode(t, harness.NodeSpec{Name: "vm-3", Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "vm-3"}}})
	agent := tokenClient(t, w.cp, w.cp.AgentToken(t, "vm-3"))
	body := `{"status":{"addresses":[{"type":"InternalIP","address":"` + natIP + `"},{"type":"Hostname","address":"vm-3"}]}}`
	if err := harness.MergePatch("vm-3", "status", body).Do(context.Background(), agent); err != nil {
		t.Fatalf("vm-3's agent lists %s: %v", natIP, err)
	}
	w.waitConditionWithin(t, joinWithin, "vm-3", corev1.ConditionTrue, reasonAnother, natIP+" is also listed by Node vm-1, vm-2")
	w.waitConditionWithin(t, joinWithin, "vm-2", corev1.ConditionTrue, reasonAnother, natIP+" is also listed by Node vm-1, vm-3")

	seen := w.insideWindow("c")
	w.renumber(t, "c", "192.0.2.3", natIP)
	w.waitInsideWindow(t, "c", seen)
	w.renumber(t, "c", "192.0.2.3")

	w.renumber(t, "vm-2", "10.0.2.16")
	w.waitCondition(t, "vm-2", corev1.ConditionFalse, reasonNone, "")
	w.waitCondition(t, "vm-3", corev1.ConditionTrue, reasonAnother, natIP+" is also listed by Node vm-1")
	w.renumber(t, "vm-3", "10.0.2.17")
	w.waitCondition(t, "vm-3", corev1.ConditionFalse, reasonNone, "")
	for _, n := range []string{"vm-1", "c"} {
		if c, p := condition(w.cp.Node(t, n)), w.detectorPatches(t, n); c != nil || p != 0 {
			t.Errorf("Node %s: condition %v, %d patches by the detector, want none", n, c, p)
		}
		if evs := w.cp.Events(t, n, eventConflict); len(evs) != 0 {
			t.Errorf("Events about %s: %v, want none", n, evs)
		}
	}
	// vm-2: flagged naming vm-1, then vm-1 and vm-3, then cleared; vm-3: flagged naming vm-1 and
	// vm-2, then vm-1, then cleared.
	for n, want := range map[string]int{"vm-2": 3, "vm-3": 3} {
		if got := w.detectorPatches(t, n); got != want {
			t.Errorf("detector patched %s %d times, want %d", n, got, want)
		}
	}
}
