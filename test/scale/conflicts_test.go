//go:build bench

package scale

// TestConflicts5000: the address conflict detector (`nodeaddr conflicts`, the real binary with its
// own ServiceAccount token, the component's RBAC and policies) over NODEADDR_CONFLICTS_NODES Nodes
// (5 000): the time to sync, a renumbering of 10% of the Nodes that swaps addresses between pairs
// (a move: no condition written), then conflicts made one write each (the detection: the
// detector's patches after the move window), its requests (no LIST per change) and its memory.

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
	conflicts := 20
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
	// A sentinel conflict begun after the swap is flagged once every swap's window has ended.
	sentinel := []string{"sentinel-a", "sentinel-b"}
	for _, s := range sentinel {
		cp.CreateNode(t, harness.NodeSpec{Name: s, Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.200.0.1"}}})
	}
	harness.Eventually(t, 2*time.Minute, 50*time.Millisecond, "sentinels flagged", func() (bool, string) {
		return flagged(t, cp, sentinel[0]) && flagged(t, cp, sentinel[1]), ""
	})
	patched := detectorPatches(t, cp, swap)
	if len(patched) != 2 || patched[sentinel[0]].IsZero() || patched[sentinel[1]].IsZero() {
		t.Fatalf("after the renumbering the detector patched %v, want only the two sentinels", keys(patched))
	}

	// Conflicts: Node n-1-k takes Node k's address (k < conflicts; neither was renumbered). Node k,
	// listing it since before the detector started and Ready (no Ready condition counts as Ready),
	// is the incumbent: only the newcomer n-1-k is flagged (docs/conflicts.md, "Who is marked").
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
	rss, heap = det.Metric("process_resident_memory_bytes")/(1<<20), det.Metric("go_memstats_heap_inuse_bytes")/(1<<20)
	reqs := countRequestsBy(t, cp, harness.ConflictsUser, start, time.Now())
	t.Logf("detection (write → detector's patch, minus the %v window), %d Nodes: p50 %v, max %v", window, len(reaction),
		reaction[len(reaction)/2].Round(time.Millisecond), reaction[len(reaction)-1].Round(time.Millisecond))
	t.Logf("gauges: %v nodes, %v addresses; RSS %.1f MiB, heap in use %.1f MiB", det.Metric("nodeaddr_conflicts_nodes"),
		det.Metric("nodeaddr_conflicts_addresses"), rss, heap)
	t.Logf("the detector's requests over the run: %v", reqs)
	for k := range reqs {
		if strings.HasPrefix(k, "list nodes") && reqs[k] > 1 || strings.HasPrefix(k, "get nodes") {
			t.Errorf("the detector read Nodes beyond its informer: %v", reqs)
		}
	}
	if want := 2 + conflicts; reqs["patch nodes/status"] != want {
		t.Errorf("the detector patched %d times, want %d (the sentinels and the newcomers)", reqs["patch nodes/status"], want)
	}
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
