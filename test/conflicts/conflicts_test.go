package conflicts

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

const (
	condType      = "NodeAddressConflict"
	reasonAnother = "AddressListedByAnotherNode"
	reasonNone    = "NoAddressConflict"
	eventConflict = "NodeAddressConflict"
	eventResolved = "NodeAddressConflictResolved"
	nodePolicy    = "nodeaddr-conflicts-node"
	natIP         = "10.0.2.15" // VirtualBox's NAT address, on every VM
	// window is the detector's --move-window: long enough that a loaded machine's detector
	// decides on an overlap well inside it (the move test holds one shorter than it).
	window = 10 * time.Second
)

// world is a control plane with deploy/'s and the component's RBAC and policies, and the detector.
type world struct {
	cp       *harness.ControlPlane
	detector *harness.Approver
	token    kubernetes.Interface // the detector's ServiceAccount token
}

func newWorld(t *testing.T) *world {
	cp := harness.StartControlPlane(t)
	ctx := context.Background()
	cp.ApplyRBAC(t)
	if err := cp.ApplyPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	component := filepath.Join(harness.RepoDir(), "deploy", "components", "address-conflicts")
	for _, f := range []string{"rbac.yaml", "policy.yaml"} {
		if err := cp.ApplyManifest(ctx, filepath.Join(component, f)); err != nil {
			t.Fatal(err)
		}
	}
	return &world{cp: cp, token: tokenClient(t, cp, cp.ServiceAccountToken(t, "nodeaddr-conflicts"))}
}

func tokenClient(t *testing.T, cp *harness.ControlPlane, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: cp.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// node creates a Node listing ips as InternalIP, as its kubelet would.
func (w *world) node(t *testing.T, name string, ips ...string) {
	t.Helper()
	w.cp.CreateNode(t, harness.NodeSpec{Name: name, Addresses: addresses(name, ips...)})
}

func addresses(name string, ips ...string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, ip := range ips {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
}

// renumber gives a Node new InternalIPs, as its kubelet or agent would (again on a conflict with
// the detector's write of the condition).
func (w *world) renumber(t *testing.T, name string, ips ...string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := w.cp.Node(t, name)
		n.Status.Addresses = addresses(name, ips...)
		_, err := w.cp.Admin.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("renumber %s: %v", name, err)
	}
}

// ready gives a Node the Ready condition True, as its kubelet would.
func (w *world) ready(t *testing.T, name string) {
	t.Helper()
	n := w.cp.Node(t, name)
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := w.cp.Admin.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func condition(n *corev1.Node) *corev1.NodeCondition {
	for i, c := range n.Status.Conditions {
		if c.Type == condType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// waitCondition waits until node's condition has status and reason and a message containing msg.
func (w *world) waitCondition(t *testing.T, node string, status corev1.ConditionStatus, reason, msg string) {
	t.Helper()
	w.waitConditionWithin(t, 30*time.Second, node, status, reason, msg)
}

// waitConditionWithin is waitCondition failing after within.
func (w *world) waitConditionWithin(t *testing.T, within time.Duration, node string, status corev1.ConditionStatus, reason, msg string) {
	t.Helper()
	w.cp.WaitNode(t, node, within, fmt.Sprintf("%s %s %s %q", condType, status, reason, msg), func(n *corev1.Node) bool {
		c := condition(n)
		return c != nil && c.Status == status && c.Reason == reason && strings.Contains(c.Message, msg)
	})
}

// detectorPatches counts the detector's completed patches of node's status.
func (w *world) detectorPatches(t *testing.T, node string) int {
	t.Helper()
	evs, err := w.cp.Audit(harness.ConflictsUser)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Verb == "patch" && e.ObjectRef != nil && e.ObjectRef.Resource == "nodes" && e.ObjectRef.Name == node &&
			e.Stage == "ResponseComplete" && e.ResponseStatus != nil && e.ResponseStatus.Code == 200 {
			n++
		}
	}
	return n
}

// insideWindow counts the detector's decisions on node that found a claim inside the move window
// (its debug log line): proof that a decision ran while an overlap lasted.
func (w *world) insideWindow(node string) int {
	n := 0
	for _, l := range strings.Split(w.detector.Logs(), "\n") {
		if strings.Contains(l, "inside the move window") && strings.Contains(l, " node="+node+" ") {
			n++
		}
	}
	return n
}

// waitInsideWindow waits until the detector has decided on node, inside the move window, more
// than seen times.
func (w *world) waitInsideWindow(t *testing.T, node string, seen int) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, 20*time.Millisecond, "a decision on "+node+" inside the move window", func() (bool, string) {
		return w.insideWindow(node) > seen, lastLines(w.detector.Logs(), 5)
	})
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// Two Nodes given one InternalIP are both marked, each naming the other, with a Warning Event; a
// swap of addresses whose overlap, seen by a decision, is shorter than the move window marks
// nobody; an overlap longer than the window marks the newcomer (the holder, Ready, listed it long
// before: TestIncumbentNotMarked); the conflict clears when one Node changes.
func TestConflictDetectedMovedAndCleared(t *testing.T) {
	w := newWorld(t)
	w.node(t, "vm-1", natIP)
	w.node(t, "vm-2", natIP)
	w.node(t, "c", "192.0.2.3")
	w.node(t, "d", "192.0.2.4")
	w.node(t, "e", "198.51.100.8")
	w.node(t, "f", "198.51.100.9")
	w.detector = harness.StartConflicts(t, w.cp, "--move-window="+window.String(), "--log-level=debug")

	w.waitCondition(t, "vm-1", corev1.ConditionTrue, reasonAnother, natIP+" is also listed by Node vm-2")
	w.waitCondition(t, "vm-2", corev1.ConditionTrue, reasonAnother, natIP+" is also listed by Node vm-1")
	for node, other := range map[string]string{"vm-1": "vm-2", "vm-2": "vm-1"} {
		ev := w.cp.WaitEvents(t, node, eventConflict, 1, 10*time.Second)[0]
		if ev.Type != corev1.EventTypeWarning || ev.Source.Component != "nodeaddr-conflicts" || !strings.Contains(ev.Message, "Node "+other) {
			t.Errorf("Event about %s: %s %s from %q: %q", node, ev.Type, ev.Reason, ev.Source.Component, ev.Message)
		}
	}
	harness.Eventually(t, 10*time.Second, 50*time.Millisecond, "gauges 1 address, 2 nodes", func() (bool, string) {
		a, n := w.detector.Metric("nodeaddr_conflicts_addresses"), w.detector.Metric("nodeaddr_conflicts_nodes")
		return a == 1 && n == 2, fmt.Sprintf("addresses %v nodes %v", a, n)
	})
	checkConflictsGolden(t, w.detector)

	// c and d swap addresses, one after the other, inside the window: a move. The overlap lasts
	// until a decision has seen it (the queue cannot merge it away) and for half the window (a
	// detector whose window were shorter than that would flag c meanwhile).
	seen := w.insideWindow("c")
	w.renumber(t, "c", "192.0.2.3", "192.0.2.4")
	overlap := time.Now()
	w.waitInsideWindow(t, "c", seen)
	time.Sleep(time.Until(overlap.Add(window / 2))) // holds the input, asserts nothing
	w.renumber(t, "d", "192.0.2.3")
	w.renumber(t, "c", "192.0.2.4")
	// A sentinel conflict begun after the swap is flagged after the swap's window has ended: two
	// Nodes that had addresses renumbered onto one (Nodes joining with it would be flagged at once).
	w.renumber(t, "e", "198.51.100.10")
	w.renumber(t, "f", "198.51.100.10")
	w.waitCondition(t, "f", corev1.ConditionTrue, reasonAnother, "198.51.100.10 is also listed by Node e")
	for _, n := range []string{"c", "d"} {
		if c := condition(w.cp.Node(t, n)); c != nil || w.detectorPatches(t, n) != 0 {
			t.Errorf("Node %s after a swap inside the window: condition %v, %d patches by the detector", n, c, w.detectorPatches(t, n))
		}
	}
	// c lists d's address again and keeps it past the window: a conflict, on c, naming d (d listed
	// it since the swap, more than the window before: the Ready incumbent is not marked).
	w.renumber(t, "c", "192.0.2.4", "192.0.2.3")
	w.waitCondition(t, "c", corev1.ConditionTrue, reasonAnother, "192.0.2.3 is also listed by Node d")
	if c, p := condition(w.cp.Node(t, "d")), w.detectorPatches(t, "d"); c != nil || p != 0 {
		t.Errorf("Node d, the incumbent: condition %v, %d patches by the detector, want none", c, p)
	}
	w.renumber(t, "c", "192.0.2.4")
	w.waitCondition(t, "c", corev1.ConditionFalse, reasonNone, "")

	// vm-2 gets its own address: both clear, with a Normal Event each.
	w.renumber(t, "vm-2", "10.0.2.16")
	w.waitCondition(t, "vm-1", corev1.ConditionFalse, reasonNone, "")
	w.waitCondition(t, "vm-2", corev1.ConditionFalse, reasonNone, "")
	for _, n := range []string{"vm-1", "vm-2"} {
		if ev := w.cp.WaitEvents(t, n, eventResolved, 1, 10*time.Second)[0]; ev.Type != corev1.EventTypeNormal {
			t.Errorf("resolution Event about %s is %s", n, ev.Type)
		}
		if got := w.detectorPatches(t, n); got != 2 {
			t.Errorf("detector patched %s %d times, want 2 (flag, clear)", n, got)
		}
	}
	// At most one LIST of Nodes (the informer's first; none when it streams the initial list in
	// its watch), no GET, however many changes.
	evs, err := w.cp.AuditSince(harness.ConflictsUser, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]int{}
	for _, e := range evs {
		if e.ObjectRef == nil || e.ObjectRef.Resource != "nodes" || e.Verb == "patch" {
			continue
		}
		if e.Verb == "watch" && e.Stage == "ResponseStarted" || e.Verb != "watch" && e.Stage == "ResponseComplete" {
			reads[e.Verb]++
		}
	}
	if reads["list"] > 1 || reads["get"] > 0 || reads["watch"] < 1 || len(reads) > 2 {
		t.Errorf("the detector read Nodes %v, want at most one list, one watch and nothing else", reads)
	}
	t.Logf("the detector's reads of Nodes: %v", reads)
}

// denied asserts err is a 403 from the detector's node policy (policy) or from RBAC.
func denied(t *testing.T, what string, err error, byPolicy bool) {
	t.Helper()
	switch {
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: %v, want 403 Forbidden", what, err)
	case byPolicy && !strings.Contains(err.Error(), nodePolicy):
		t.Errorf("%s: %v, want the denial of %s", what, err, nodePolicy)
	}
}

// The detector's token changes its condition and nothing else of a Node; an agent's token cannot
// write the condition, on another Node or its own.
func TestDetectorAndAgentRights(t *testing.T) {
	w := newWorld(t)
	w.node(t, "a", "192.0.2.1")
	w.node(t, "b", "192.0.2.2")
	ctx := context.Background()
	// Only the not-ready taint that admission adds to a created Node.
	if taints := w.cp.Node(t, "a").Spec.Taints; len(taints) != 1 || taints[0].Key != "node.kubernetes.io/not-ready" {
		t.Fatalf("Node a's taints at creation: %v", taints)
	}
	status := func(cs kubernetes.Interface, node, patch string) error {
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		return err
	}
	own := `{"status":{"conditions":[{"type":"NodeAddressConflict","status":"False","reason":"NoAddressConflict","message":"x"}]}}`
	// The policy takes a moment to be enforced: wait until a change of addresses (each time
	// another: an unchanged Node passes) is denied.
	w.node(t, "probe", "192.0.2.100")
	probe := 100
	harness.Eventually(t, 10*time.Second, 100*time.Millisecond, "policy "+nodePolicy+" enforced", func() (bool, string) {
		probe++
		err := status(w.token, "probe", fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.%d"}]}}`, probe))
		return apierrors.IsForbidden(err), fmt.Sprint(err)
	})
	if err := status(w.token, "a", own); err != nil {
		t.Fatalf("the detector's own condition: %v", err)
	}
	for _, tc := range []struct {
		what, patch string
	}{
		{"addresses", `{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.2"}]}}`},
		{"a label through status", `{"metadata":{"labels":{"x":"y"}}}`},
		{"an annotation through status", `{"metadata":{"annotations":{"nodeaddr.io/addresses":"192.0.2.2"}}}`},
		{"the Ready condition", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"x"}]}}`},
		{"another condition", `{"status":{"conditions":[{"type":"NetworkUnavailable","status":"True","reason":"X","message":"x"}]}}`},
		{"its condition with another reason", `{"status":{"conditions":[{"type":"NodeAddressConflict","status":"True","reason":"Other","message":"x"}]}}`},
		{"its condition Unknown", `{"status":{"conditions":[{"type":"NodeAddressConflict","status":"Unknown","reason":"NoAddressConflict","message":"x"}]}}`},
	} {
		denied(t, "detector writes "+tc.what, status(w.token, "a", tc.patch), true)
	}
	// The Node itself (labels, taints): RBAC grants no write.
	for what, patch := range map[string]string{
		"a label":  `{"metadata":{"labels":{"x":"y"}}}`,
		"a taint":  `{"spec":{"taints":[{"key":"x","effect":"NoSchedule"}]}}`,
		"cordoned": `{"spec":{"unschedulable":true}}`,
	} {
		_, err := w.token.CoreV1().Nodes().Patch(ctx, "a", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		denied(t, "detector writes "+what+" on the Node", err, false)
	}
	if err := w.token.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("detector deletes a Node: %v", err)
	}
	// Agents: the base policy keeps each to its own Node's addresses and nodeaddr's annotations.
	agent := tokenClient(t, w.cp, w.cp.AgentToken(t, "b"))
	for _, node := range []string{"a", "b"} {
		if err := status(agent, node, own); !apierrors.IsForbidden(err) {
			t.Errorf("the agent of b writes the condition on %s: %v, want 403", node, err)
		}
	}
	n := w.cp.Node(t, "a")
	if n.Labels["x"] != "" || n.Annotations["nodeaddr.io/addresses"] != "" || len(n.Spec.Taints) != 1 || n.Spec.Unschedulable || condition(n) == nil || condition(n).Message != "x" {
		t.Errorf("Node a changed: labels %v taints %v condition %v", n.Labels, n.Spec.Taints, condition(n))
	}
}

// A NotReady Node (its kubelet gone) still lists the address DHCP gave a new node: both are marked,
// the new Node with the reason that names the stale one; deleting the stale Node clears it.
func TestStaleNode(t *testing.T) {
	w := newWorld(t)
	w.node(t, "old", "192.0.2.50")
	n := w.cp.Node(t, "old")
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
		Message: "Kubelet stopped posting node status.", LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := w.cp.Admin.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.detector = harness.StartConflicts(t, w.cp, "--move-window="+window.String())
	w.node(t, "new", "192.0.2.50")
	w.waitCondition(t, "new", corev1.ConditionTrue, "AddressListedByNotReadyNode", "192.0.2.50 is also listed by Node old (NotReady)")
	w.waitCondition(t, "old", corev1.ConditionTrue, reasonAnother, "192.0.2.50 is also listed by Node new")
	if err := w.cp.Admin.CoreV1().Nodes().Delete(context.Background(), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitCondition(t, "new", corev1.ConditionFalse, reasonNone, "")
	// Nothing but the condition changed on the new Node.
	if a := w.cp.Node(t, "new").Status.Addresses; len(a) != 2 || a[0].Address != "192.0.2.50" {
		t.Errorf("the new Node's addresses changed: %v", a)
	}
}

// A node listing another Node's address (a compromised node, or a clone registered long after its
// template) gets only its own Node marked: node-a has listed X since before the detector started;
// node-b's agent lists X on node-b, the one write its rights allow. Past the window node-b has the
// condition naming node-a and the Warning Event; node-a, Ready, has neither; the gauges count the
// conflict.
func TestIncumbentNotMarked(t *testing.T) {
	const x = "192.0.2.80"
	w := newWorld(t)
	w.node(t, "node-a", x)
	w.ready(t, "node-a")
	w.node(t, "node-b", "192.0.2.81")
	w.node(t, "s-1", "198.51.100.81")
	w.node(t, "s-2", "198.51.100.82")
	w.detector = harness.StartConflicts(t, w.cp, "--move-window="+window.String())
	agent := tokenClient(t, w.cp, w.cp.AgentToken(t, "node-b"))
	body := `{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.81"},{"type":"InternalIP","address":"` + x +
		`"},{"type":"Hostname","address":"node-b"}]}}`
	if err := harness.MergePatch("node-b", "status", body).Do(context.Background(), agent); err != nil {
		t.Fatalf("node-b's agent lists %s: %v", x, err)
	}
	// A sentinel conflict begun after node-b's claim is flagged after node-a would have been: two
	// Nodes that had addresses renumbered onto one (not joining: the window applies).
	w.renumber(t, "s-1", "198.51.100.80")
	w.renumber(t, "s-2", "198.51.100.80")
	w.waitCondition(t, "node-b", corev1.ConditionTrue, reasonAnother, x+" is also listed by Node node-a")
	w.waitCondition(t, "s-2", corev1.ConditionTrue, reasonAnother, "198.51.100.80 is also listed by Node s-1")
	ev := w.cp.WaitEvents(t, "node-b", eventConflict, 1, 10*time.Second)[0]
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "Node node-a") {
		t.Errorf("Event about node-b: %s %q, want a Warning naming node-a", ev.Type, ev.Message)
	}
	harness.Eventually(t, 10*time.Second, 50*time.Millisecond, "gauges 2 addresses, 3 nodes (node-b, s-1, s-2)", func() (bool, string) {
		a, n := w.detector.Metric("nodeaddr_conflicts_addresses"), w.detector.Metric("nodeaddr_conflicts_nodes")
		return a == 2 && n == 3, fmt.Sprintf("addresses %v nodes %v", a, n)
	})
	if c, p := condition(w.cp.Node(t, "node-a")), w.detectorPatches(t, "node-a"); c != nil || p != 0 {
		t.Errorf("node-a, the victim: condition %v, %d patches by the detector, want none", c, p)
	}
	if evs := w.cp.Events(t, "node-a", eventConflict); len(evs) != 0 {
		t.Errorf("Events about node-a: %v, want none", evs)
	}
	checkPluginStatus(t, w.cp, "node-b", x+" is also listed by Node node-a", "node-a")
}

// checkPluginStatus runs `kubectl nodeaddr status` (the harness-built plugin) with the admin's
// kubeconfig: -o json gives the flagged Node its conflict and the attention address-conflict, and
// the clean one neither; -o wide shows the conflict in the CONFLICT column.
func checkPluginStatus(t *testing.T, cp *harness.ControlPlane, flagged, msg, clean string) {
	t.Helper()
	kubeconfig := harness.Kubeconfig(t, t.TempDir(), cp.Config.Host, cp.AdminToken)
	run := func(args ...string) string {
		out, err := exec.Command(harness.MustBuildPlugin(t), append(args, "--kubeconfig", kubeconfig)...).Output()
		if err != nil {
			t.Fatalf("kubectl-nodeaddr %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	var l struct {
		Items []inspect.NodeStatus `json:"items"`
	}
	out := run("status", flagged, clean, "-o", "json")
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Items) != 2 {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	for _, s := range l.Items {
		conflicted := slices.Contains(s.Attention, inspect.AttentionAddressConflict)
		switch s.Node {
		case flagged:
			if s.Conflict != msg || !conflicted {
				t.Errorf("status of %s: conflict %q, attention %v; want %q and %s", s.Node, s.Conflict, s.Attention, msg, inspect.AttentionAddressConflict)
			}
		case clean:
			if s.Conflict != "" || conflicted {
				t.Errorf("status of %s: conflict %q, attention %v; want none", s.Node, s.Conflict, s.Attention)
			}
		}
	}
	out = run("status", flagged, "-o", "wide")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	sep := regexp.MustCompile(`\s{2,}`)
	if len(lines) != 2 {
		t.Fatalf("status -o wide %s:\n%s", flagged, out)
	}
	header, row := sep.Split(strings.TrimSpace(lines[0]), -1), sep.Split(strings.TrimSpace(lines[1]), -1)
	if header[len(header)-1] != "CONFLICT" || row[len(row)-1] != msg {
		t.Errorf("status -o wide %s: last column %q = %q, want CONFLICT = %q\n%s", flagged, header[len(header)-1], row[len(row)-1], msg, out)
	}
	t.Logf("kubectl nodeaddr status -o wide %s:\n%s", flagged, out)
}
