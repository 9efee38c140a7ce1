package node

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// overwriteWindow and maxWritesInWindow bound a fight with the kubelet: at most maxWritesInWindow
// address writes in the first overwriteWindow.
const (
	overwriteWindow   = 5 * time.Minute
	maxWritesInWindow = 8
)

// TestKubeletWithoutCloudProvider is scenario 4: a kubelet without --cloud-provider=external
// (with --node-ip, so it needs no DNS lookup of its name) rewrites the whole address list on its
// status syncs. nodeaddr sees its addresses (the IPv6 InternalIP the kubelet does not know) reverted,
// names the kubelet in a Warning, and backs off.
func TestKubeletWithoutCloudProvider(t *testing.T) {
	// Mostly an observation window: runs beside TestRealNode's (scenario 5).
	t.Parallel()
	w := newWorld(t, worldOptions{node: harness.NodeOptions{NoCloudProvider: true, KubeletArgs: []string{"--node-ip=" + uplinkV4}}})
	t.Run("4-kubelet-without-cloud-provider", w.noCloudProvider)
}

func (w *world) noCloudProvider(t *testing.T) {
	w.t = t
	name := w.node.Name
	n := w.node.Node(w.t)
	kubeletList := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: uplinkV4}, {Type: corev1.NodeHostName, Address: name}}
	if !reflect.DeepEqual(n.Status.Addresses, kubeletList) || harness.HasTaint(n, uninitialized) {
		t.Fatalf("kubelet without a cloud provider registered %v, taints %v; want %v and no %s",
			n.Status.Addresses, harness.TaintKeys(n), kubeletList, uninitialized)
	}
	w.kubectlAdmin("apply", "-k", w.overlay())
	harness.Eventually(w.t, 3*time.Minute, 100*time.Millisecond, "the agent's first address write", func() (bool, string) { return len(w.statusWrites()) > 0, "none" })
	start := w.statusWrites()[0].Timestamp
	var warning string
	harness.Eventually(w.t, 2*time.Minute, 100*time.Millisecond, "an AddressesOverwritten Warning", func() (bool, string) {
		if evs := w.c.CP.Events(t, name, "AddressesOverwritten"); len(evs) > 0 {
			warning = evs[0].Message
			return true, ""
		}
		return false, "none"
	})
	if !strings.HasPrefix(warning, "kubelet ") || !strings.Contains(warning, "--cloud-provider=external") {
		t.Errorf("AddressesOverwritten %q: want it to name the kubelet and the flag", warning)
	}
	// The window is an observation period; the assertion is on the count of writes in it.
	time.Sleep(time.Until(start.Add(overwriteWindow))) // measured window: the observation period
	writes := 0
	for _, r := range w.statusWrites() {
		if r.Timestamp.Before(start.Add(overwriteWindow)) {
			writes++
		}
	}
	if writes > maxWritesInWindow {
		t.Errorf("%d address writes in %s, want at most %d", writes, overwriteWindow, maxWritesInWindow)
	}
	p := w.agentPod()
	report(t, "%d address writes in %s (bound %d); Warning %q; agent restarts %d",
		writes, overwriteWindow, maxWritesInWindow, warning, p.Status.ContainerStatuses[0].RestartCount)
}

// statusWrites are the agent's successful writes of the Node's status (its addresses).
func (w *world) statusWrites() []auditRecord {
	var out []auditRecord
	for _, r := range w.agentWrites() {
		if r.ObjectRef.Subresource == "status" {
			out = append(out, r)
		}
	}
	return out
}
