package node

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// TestFreshNodeOldestRelease runs scenario 1 (a fresh node, the shipped kustomize base, the
// defaults' addresses, the taint removed, then a Deployment's pod scheduled) on a whole cluster of
// the oldest supported release: kube-apiserver, kube-controller-manager,
// kube-scheduler and the kubelet are all harness.NodeVersions[0], since a 1.30 kubelet against a
// 1.37 API server is outside the supported version skew. containerd, runc and the CNI plugins are
// the newest node's (CRI v1).
func TestFreshNodeOldestRelease(t *testing.T) {
	// Beside the 5-minute windows of TestRealNode and TestKubeletWithoutCloudProvider.
	t.Parallel()
	version := harness.NodeVersions[0]
	if version == harness.KubernetesVersion {
		t.Fatalf("harness.NodeVersions %v has no older release than %s", harness.NodeVersions, version)
	}
	w := newWorld(t, worldOptions{version: version})
	components := checkRelease(t, w, version)
	if t.Run("1-fresh-node-shipped-defaults", w.freshNode) {
		report(t, "%s; Node addresses %v", components, w.node.Node(w.t).Status.Addresses)
	}
}

// checkRelease fails unless every Kubernetes component of w's cluster is version: the kubelet by
// the version its Node reports, kube-controller-manager and kube-scheduler by --version, and the
// API server by the k8s.io/kubernetes module linked into it (it is built without the release's
// version stamp, see test/matrix). It returns what it saw, for the scenario's line.
func checkRelease(t *testing.T, w *world, version string) string {
	t.Helper()
	info := w.node.Node(w.t).Status.NodeInfo
	if info.KubeletVersion != version {
		t.Fatalf("Node's kubeletVersion %q, want %s", info.KubeletVersion, version)
	}
	for _, bin := range []string{w.c.Bins.ControllerManager, w.c.Bins.Scheduler} {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "Kubernetes "+version {
			t.Fatalf("%s --version: %q %v, want Kubernetes %s", bin, out, err, version)
		}
	}
	if err := harness.CheckLinks(harness.MustBuildAPIServer(t, version), version); err != nil {
		t.Fatal(err)
	}
	return "kube-apiserver, kube-controller-manager, kube-scheduler, kubelet " + version +
		", runtime " + info.ContainerRuntimeVersion
}
