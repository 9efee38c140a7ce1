package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// A kubelet without --cloud-provider=external replaces the whole address list on every status
// sync. The agent notices the repeated reverts, names the kubelet in a Warning that points to the
// flag, and backs off exponentially instead of fighting; once the kubelet stops, it writes again.
func TestRevertingWriterIsNotFought(t *testing.T) {
	e := newEnv(t, "fight")
	kubelet := []corev1.NodeAddress{harness.Addr(in, "10.0.0.5"), harness.Addr(hn, "fight")}
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: kubelet})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8", "--overwrite-backoff=2s", "--overwrite-backoff-max=8s")
	ours := []corev1.NodeAddress{harness.Addr(in, "10.0.0.5"), harness.Addr(ext, "192.0.2.10"), harness.Addr(hn, "fight")}
	e.waitAddresses(ours)

	// The fake kubelet reverts every 500 ms for 20 s (a real one: every 10 s, forever).
	ctx := context.Background()
	nodes := e.cp.Admin.CoreV1().Nodes()
	end := time.Now().Add(20 * time.Second)
	reverts := 0
	for time.Now().Before(end) { // measured window: 20 s of reverts
		n, err := nodes.Get(ctx, e.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if harness.FormatAddrs(n.Status.Addresses) != harness.FormatAddrs(kubelet) {
			n.Status.Addresses = kubelet
			if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"}); err == nil {
				reverts++
			}
		}
		time.Sleep(500 * time.Millisecond) // measured window: the fake kubelet's revert period
	}
	writes := e.statusWrites()
	// Without back-off the agent would rewrite after every revert: about 40 times in 20 s. With
	// rewrites after 0, 0, 2, 4, 8, 8 s ... it can write at most about 8 times.
	if writes > 10 {
		t.Fatalf("agent wrote %d times in 20 s against a reverting writer (%d reverts): it fights", writes, reverts)
	}
	if writes < 3 {
		t.Fatalf("agent wrote only %d times: it should keep trying, slowly", writes)
	}
	if got := a.Metric("nodeaddr_overwrites_total"); got < 3 {
		t.Fatalf("nodeaddr_overwrites_total = %v, want at least 3", got)
	}
	ev := e.cp.Events(t, e.node, "AddressesOverwritten")
	if len(ev) == 0 || ev[0].Type != corev1.EventTypeWarning {
		t.Fatalf("no AddressesOverwritten Warning event: %+v", ev)
	}
	if msg := ev[0].Message; !strings.Contains(msg, "kubelet") || !strings.Contains(msg, "--cloud-provider=external") {
		t.Fatalf("event message %q does not name the kubelet and its flag", msg)
	}
	// The kubelet stopped: the agent's next attempt sticks.
	e.cp.WaitNode(t, e.node, 30*time.Second, "agent's addresses restored", func(n *corev1.Node) bool {
		return harness.FormatAddrs(n.Status.Addresses) == harness.FormatAddrs(ours)
	})
	t.Logf("reverts %d, agent writes %d, overwrites %v", reverts, writes, a.Metric("nodeaddr_overwrites_total"))
}
