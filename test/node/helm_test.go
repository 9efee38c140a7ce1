package node

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// TestHelmChart is scenarios 7 and 8 for Helm: the chart, installed on a fresh real node with the
// user's image and API server endpoint as values, gives what the kustomize base gives (the
// defaults' addresses, the taint removed, the agent Ready through the real probes); `helm
// uninstall` then leaves the addresses and the kubelet's writes keep succeeding.
func TestHelmChart(t *testing.T) {
	// Built before the node registers: the figures time the install, not Helm's own build.
	harness.MustBuildHelm(t)
	w := newWorld(t, worldOptions{})
	if !t.Run("7-helm-install", w.helmInstall) {
		return
	}
	t.Run("7b-helm-test", w.helmTest)
	t.Run("8-helm-uninstall", w.helmUninstall)
}

func (w *world) helm(args ...string) string {
	w.t.Helper()
	return w.run(harness.MustBuildHelm(w.t), append([]string{"--kubeconfig", w.admin}, args...)...)
}

func (w *world) helmInstall(t *testing.T) {
	w.t = t
	start := time.Now()
	w.helm("install", "nodeaddr", filepath.Join(harness.RepoDir(), "deploy", "helm", "nodeaddr"),
		"--namespace", "kube-system",
		"--set", "image.repository="+w.baseImage(), "--set", "image.tag="+agentImageTag,
		"--set", "apiServer.host=127.0.0.1", "--set", fmt.Sprintf("apiServer.port=%d", w.c.CP.Port))
	harness.Eventually(w.t, 3*time.Minute, 100*time.Millisecond, "the agent pod Ready", func() (bool, string) { p := w.agentPod(); return p != nil && podReady(p), podSeen(p) })
	w.waitAddresses(expectedAddresses(w.node.Name))
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, "the taint removed", func() (bool, string) {
		taints := harness.TaintKeys(w.node.Node(w.t))
		return !slices.Contains(taints, uninitialized), fmt.Sprintf("taints %v", taints)
	})
	removed := w.taintRemovedAt()
	// Read again once the taint is gone: nothing may have changed the addresses since.
	if got := w.node.Node(w.t).Status.Addresses; !reflect.DeepEqual(got, expectedAddresses(w.node.Name)) {
		t.Errorf("addresses after the taint was removed %v, want %v", got, expectedAddresses(w.node.Name))
	}
	report(t, "install→taint removed %s (register→taint removed %s, Helm built before), addresses as the kustomize base",
		removed.Sub(start).Round(time.Millisecond), removed.Sub(w.registeredAt()).Round(time.Millisecond))
}

func (w *world) helmUninstall(t *testing.T) {
	w.t = t
	before := w.node.Node(w.t).Status.Addresses
	mark := time.Now()
	nw := w.watchNode()
	w.helm("uninstall", "nodeaddr", "--namespace", "kube-system", "--wait")
	harness.Eventually(w.t, 2*time.Minute, 100*time.Millisecond, "the agent pod gone", func() (bool, string) { p := w.agentPod(); return p == nil, podSeen(p) })
	gone := time.Now()
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, "two kubelet lease renewals after the uninstall", func() (bool, string) {
		n := w.kubeletWrites(gone).ok["leases"]
		return n >= 2, fmt.Sprintf("%d renewals", n)
	})
	assertSteady(t, nw.finish(), before)
	kw := w.kubeletWrites(mark)
	if len(kw.failed) > 0 {
		t.Errorf("kubelet writes failed during/after the uninstall: %v", kw.failed)
	}
	report(t, "addresses kept (%d), kubelet writes since uninstall: %v ok, %d failed", len(before), kw.ok, len(kw.failed))
}

// helmTest runs the chart's `helm test` hook on the real node: nodeaddr --check-install in a Pod
// of its own (host network, its read-only ServiceAccount) passes for the node the agent
// initialized. (Without --logs: this world's API server does not reach the kubelet's port; the
// hardened world of TestRenumberingDay does.)
func (w *world) helmTest(t *testing.T) {
	w.t = t
	start := time.Now()
	out := w.helm("test", "nodeaddr", "--namespace", "kube-system", "--timeout", "3m")
	if !regexp.MustCompile(`Phase:\s+Succeeded`).MatchString(out) {
		t.Errorf("helm test did not succeed:\n%s", out)
	}
	report(t, "helm test (nodeaddr --check-install in the hook pod) passed in %s", time.Since(start).Round(100*time.Millisecond))
}
