//go:build bench

package scale

// TestConflicts5000: the address conflict detector (`nodeaddr conflicts`, the real binary with its
// own ServiceAccount token, the component's RBAC and policies) over NODEADDR_CONFLICTS_NODES Nodes
// (5 000): the time to sync, a renumbering of 10% of the Nodes that swaps addresses between pairs
// (a move: no condition written), then conflicts made one write each (the detection: the
// detector's patches after the move window), then Nodes joining with an address an existing Node
// lists (clones: flagged with no window), its requests (no LIST per change) and its memory.

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestConflicts5000(t *testing.T) {
	n := envInt(t, "NODEADDR_CONFLICTS_NODES", 5000)
	window := envDuration(t, "NODEADDR_CONFLICTS_WINDOW", 5*time.Second)
	conflicts, joins := 20, 20
	if n < 200 || n > 65535 {
		t.Fatalf("NODEADDR_CONFLICTS_NODES=%d: want 200..65535", n)
	}
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("conflict-%05d", i)
	}
	cp := harness.StartControlPlane(t)
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
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if err := createNodes(ctx, admin, names, 16); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Nodes created in %v", n, time.Since(created).Round(time.Millisecond))
	// The sentinels: two Nodes with addresses of their own, renumbered onto one after the swap.
	sentinel := []string{"sentinel-a", "sentinel-b"}
	for i, s := range sentinel {
		cp.CreateNode(t, harness.NodeSpec{Name: s, Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.200.0.%d", i+1)}}})
	}
	start := time.Now()
	det := harness.StartConflicts(t, cp, "--move-window="+window.String())
	synced := time.Since(start)
	rss, heap := det.Metric("process_resident_memory_bytes")/(1<<20), det.Metric("go_memstats_heap_inuse_bytes")/(1<<20)
	t.Logf("detector ready (informer synced) %v after start; RSS %.1f MiB, heap in use %.1f MiB", synced.Round(time.Millisecond), rss, heap)

	ip := func(i int) string { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String() }
	setIP := func(node, addr string) (time.Time, error) {
		var at time.Time
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			nd, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			nd.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}, {Type: corev1.NodeHostName, Address: node}}
			_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{FieldManager: "kubelet"})
			at = time.Now()
			return err
		})
		return at, err
	}

	// The renumbering: 10% of the Nodes, in pairs, swap addresses (a takes b's, then b takes a's).
	pairs := n / 20
	swap := time.Now()
	if err := parallel(pairs, 16, func(i int) error {
		a, b := 2*i, 2*i+1
		if _, err := setIP(names[a], ip(b)); err != nil {
			return err
		}
		_, err := setIP(names[b], ip(a))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("renumbering: %d Nodes swapped addresses in %v", 2*pairs, time.Since(swap).Round(time.Millisecond))
	// A sentinel conflict begun after the swap is flagged once every swap's window has ended: two
	// Nodes renumbered onto one address (a renumbering waits the window; Nodes joining with it
	// would be flagged at once).
	for _, s := range sentinel {
		if _, err := setIP(s, "10.200.0.100"); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, 2*time.Minute, 50*time.Millisecond, "sentinels flagged", func() (bool, string) {
		return flagged(t, cp, sentinel[0]) && flagged(t, cp, sentinel[1]), ""
	})
	patched := detectorPatches(t, cp, swap)
	if len(patched) != 2 || patched[sentinel[0]].IsZero() || patched[sentinel[1]].IsZero() {
		t.Fatalf("after the renumbering the detector patched %v, want only the two sentinels", keys(patched))
	}

	// Conflicts: Node n-1-k (not renumbered) takes address k (k < conflicts), which Node k^1 has
	// listed since the swap, more than the window before (the sentinels waited it out), and Ready
	// (no Ready condition counts as Ready): the incumbent. Only the newcomer n-1-k is flagged
	// (docs/conflicts.md, "Who is marked").
	var mu sync.Mutex
	wrote := map[string]time.Time{}
	conflictStart := time.Now()
	if err := parallel(conflicts, 4, func(k int) error {
		at, err := setIP(names[n-1-k], ip(k))
		mu.Lock()
		wrote[names[n-1-k]] = at
		mu.Unlock()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The gauge, not the audit log (a read of the whole log per poll would load the API server's
	// machine while it is being measured).
	harness.Eventually(t, 2*time.Minute, 50*time.Millisecond, fmt.Sprintf("%d Nodes flagged", conflicts), func() (bool, string) {
		v := det.Metric("nodeaddr_conflicts_nodes")
		return v == float64(2+conflicts), fmt.Sprintf("%v flagged", v)
	})
	var reaction []time.Duration
	for node, at := range detectorPatches(t, cp, conflictStart) {
		reaction = append(reaction, at.Sub(wrote[node])-window)
	}
	slices.Sort(reaction)
	js := join(t, cp, admin, joins, func(k int) (string, string) { return names[n/2+k], ip(n/2 + k) })
	harness.Eventually(t, 2*time.Minute, 50*time.Millisecond, fmt.Sprintf("%d Nodes flagged", 2+conflicts+joins), func() (bool, string) {
		v := det.Metric("nodeaddr_conflicts_nodes")
		return v == float64(2+conflicts+joins), fmt.Sprintf("%v flagged", v)
	})
	joining := joinTimes(t, cp, js, window)
	rss, heap = det.Metric("process_resident_memory_bytes")/(1<<20), det.Metric("go_memstats_heap_inuse_bytes")/(1<<20)
	reqs := countRequestsBy(t, cp, harness.ConflictsUser, start, time.Now())
	t.Logf("detection (write → detector's patch, minus the %v window), %d Nodes: p50 %v, max %v", window, len(reaction),
		reaction[len(reaction)/2].Round(time.Millisecond), reaction[len(reaction)-1].Round(time.Millisecond))
	t.Logf("joins (create → the detector's patch, no window), %d Nodes: p50 %v, max %v", len(joining),
		joining[len(joining)/2].Round(time.Millisecond), joining[len(joining)-1].Round(time.Millisecond))
	t.Logf("gauges: %v nodes, %v addresses; RSS %.1f MiB, heap in use %.1f MiB", det.Metric("nodeaddr_conflicts_nodes"),
		det.Metric("nodeaddr_conflicts_addresses"), rss, heap)
	t.Logf("the detector's requests over the run: %v", reqs)
	for k := range reqs {
		if strings.HasPrefix(k, "list nodes") && reqs[k] > 1 || strings.HasPrefix(k, "get nodes") {
			t.Errorf("the detector read Nodes beyond its informer: %v", reqs)
		}
	}
	if want := 2 + conflicts + joins; reqs["patch nodes/status"] != want {
		t.Errorf("the detector patched %d times, want %d (the sentinels, the newcomers and the joined Nodes)", reqs["patch nodes/status"], want)
	}
}

// joined is a Node created listing the address of holder, and when its create was sent.
type joined struct {
	node, holder, addr string
	at                 time.Time
}

// join creates k Nodes join-NN, each listing the address of holder(i) in the create (as a kubelet
// registers its Node with its status): clones of a template, a second VM on a NAT address. Their
// claims are their first: no move window. Should the API server drop status on create, the
// addresses follow in an update: from none to some, a first claim as well.
func join(t *testing.T, cp *harness.ControlPlane, admin kubernetes.Interface, k int, holder func(i int) (string, string)) []joined {
	t.Helper()
	out := make([]joined, k)
	if err := parallel(k, 4, func(i int) error {
		h, addr := holder(i)
		name := fmt.Sprintf("join-%02d", i)
		nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: addr}, {Type: corev1.NodeHostName, Address: name}}}}
		out[i] = joined{node: name, holder: h, addr: addr, at: time.Now()}
		created, err := admin.CoreV1().Nodes().Create(context.Background(), nd, metav1.CreateOptions{FieldManager: "kubelet"})
		if err != nil || len(created.Status.Addresses) > 0 {
			return err
		}
		created.Status.Addresses = nd.Status.Addresses
		_, err = admin.CoreV1().Nodes().UpdateStatus(context.Background(), created, metav1.UpdateOptions{FieldManager: "kubelet"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// joinTimes asserts each joined Node flagged naming its holder, and patched once, the holders
// (Ready, listing the address since before the detector started: the incumbents) neither; it
// returns the times from each create to the detector's patch, sorted. A join flagged later than
// the window would be one the window applied to.
func joinTimes(t *testing.T, cp *harness.ControlPlane, js []joined, window time.Duration) []time.Duration {
	t.Helper()
	first := js[0].at
	for _, j := range js {
		if j.at.Before(first) {
			first = j.at
		}
	}
	patched := detectorPatches(t, cp, first)
	var out []time.Duration
	for _, j := range js {
		c := conflictCondition(cp.Node(t, j.node))
		if want := j.addr + " is also listed by Node " + j.holder; c == nil || c.Status != corev1.ConditionTrue || c.Message != want {
			t.Errorf("joined Node %s: condition %v, want True %q", j.node, c, want)
		}
		if c := conflictCondition(cp.Node(t, j.holder)); c != nil {
			t.Errorf("Node %s, the incumbent of %s: condition %v, want none", j.holder, j.node, c)
		}
		if _, ok := patched[j.holder]; ok {
			t.Errorf("the detector patched %s, the incumbent of %s", j.holder, j.node)
		}
		at, ok := patched[j.node]
		if !ok {
			t.Fatalf("the detector did not patch %s (patched %v)", j.node, keys(patched))
		}
		out = append(out, at.Sub(j.at))
	}
	slices.Sort(out)
	if window > 0 && out[len(out)-1] >= window {
		t.Errorf("a joined Node flagged %v after its create, not before the %v window: the window applied", out[len(out)-1], window)
	}
	return out
}

func conflictCondition(n *corev1.Node) *corev1.NodeCondition {
	for i, c := range n.Status.Conditions {
		if c.Type == "NodeAddressConflict" {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func flagged(t *testing.T, cp *harness.ControlPlane, node string) bool {
	for _, c := range cp.Node(t, node).Status.Conditions {
		if c.Type == "NodeAddressConflict" && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// detectorPatches is when the detector first patched each Node's status since since.
func detectorPatches(t *testing.T, cp *harness.ControlPlane, since time.Time) map[string]time.Time {
	t.Helper()
	evs, err := cp.AuditSince(harness.ConflictsUser, since)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, e := range evs {
		if e.Verb == "patch" && e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Subresource == "status" {
			if at, ok := out[e.ObjectRef.Name]; !ok || e.StageTimestamp.Before(at) {
				out[e.ObjectRef.Name] = e.StageTimestamp
			}
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
