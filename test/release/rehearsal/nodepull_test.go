package rehearsal

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The real node's uplink, from the documentation ranges, inside the test's namespace only.
const (
	nodeV4, nodeGatewayV4 = "192.0.2.10", "192.0.2.1"
	nodeV6, nodeGatewayV6 = "2001:db8::10", "2001:db8::1"
	uninitializedTaint    = "node.cloudprovider.kubernetes.io/uninitialized"
)

// runPulledOnRealNode starts one real node (containerd + kubelet in a test netns, harness) whose
// containerd trusts the rehearsal registry's CA through certs.d/HOST/hosts.toml and reaches the
// registry through a relay of its port on the netns's loopback. Only the pause image is imported:
// the agent comes from `kubectl apply -k` of the overlay pinning REGISTRY/nodeaddr@DIGEST, so the
// kubelet pulls the published index by digest. The Node gets its addresses and loses the
// uninitialized taint, and containerd lists the image by that digest.
func runPulledOnRealNode(t *testing.T, reg *registry, pub published) {
	name := fmt.Sprintf("rn-%x", randBytes(3))
	c := harness.StartNodeCluster(t, name)
	ns := harness.NewNetns(t, "node")
	router := harness.NewNetns(t, "rtr")
	ns.Link("eth0", router, "r-eth0")
	ns.IP("addr", "add", nodeV4+"/24", "dev", "eth0")
	ns.IP("route", "add", "default", "via", nodeGatewayV4, "dev", "eth0")
	ns.IP("-6", "addr", "add", nodeV6+"/64", "dev", "eth0", "nodad")
	ns.IP("-6", "route", "add", "default", "via", nodeGatewayV6, "dev", "eth0")

	// containerd runs in the node's netns: the registry's port on the host's loopback is relayed to
	// the same port on the netns's loopback, where the certificate's 127.0.0.1 still holds.
	port := reg.Host[strings.LastIndex(reg.Host, ":")+1:]
	var p int
	fmt.Sscan(port, &p)
	ns.Relay(p, reg.Host)
	certsD := filepath.Join(c.CP.Dir, "certs.d")
	if err := os.MkdirAll(filepath.Join(certsD, reg.Host), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(certsD, reg.Host, "hosts.toml"), fmt.Sprintf(`server = "https://%[1]s"

[host."https://%[1]s"]
  capabilities = ["pull", "resolve"]
  ca = %[2]q
`, reg.Host, reg.CAFile))

	node := c.StartNode(ns, harness.NodeOptions{RegistryConfigPath: certsD})
	node.RecordNetns(router.Name)
	before := imageRefs(t, node)

	// The user's overlay: the image pinned by digest, and the API server's real endpoint (the relay
	// on the node's loopback; no kube-proxy serves the kubernetes Service VIP here).
	overlay := pinnedOverlay(t, pub, fmt.Sprintf(`patches:
  - target: {kind: DaemonSet, name: nodeaddr}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: "%d"}
`, c.CP.Port))
	kc := harness.Kubeconfig(t, t.TempDir(), fmt.Sprintf("https://127.0.0.1:%d", c.CP.Port), c.CP.AdminToken)
	start := time.Now()
	harness.Run(t, "", harness.MustBuild(t).Kubectl, "--kubeconfig", kc, "apply", "--server-side", "-k", overlay)

	want := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: nodeV4},
		{Type: corev1.NodeInternalIP, Address: nodeV6},
		{Type: corev1.NodeHostName, Address: name},
	}
	n := c.CP.WaitNode(t, name, 3*time.Minute, "addresses published and taint removed", func(n *corev1.Node) bool {
		return slices.Equal(n.Status.Addresses, want) && !slices.Contains(harness.TaintKeys(n), uninitializedTaint)
	})
	t.Logf("pulled by digest and converged in %s: addresses %v, taints %v", time.Since(start).Round(100*time.Millisecond),
		n.Status.Addresses, harness.TaintKeys(n))

	// containerd's CRI images: the pinned reference by the index digest, pulled, not imported.
	ref := pinnedImage(pub)
	digest := ref[strings.Index(ref, "@")+1:]
	ls := ctrImages(t, node)
	found := false
	for _, line := range strings.Split(ls, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if f[0] == ref {
			found = true
			if f[2] != digest {
				t.Errorf("containerd lists %s with digest %s, want %s", ref, f[2], digest)
			}
		}
	}
	if !found {
		t.Errorf("containerd does not list %s:\n%s", ref, ls)
	}
	// Before the overlay only the pause image was there (imported under its name and its id).
	for _, r := range before {
		if !strings.Contains(r, "pause") && !strings.HasPrefix(r, "sha256:") {
			t.Errorf("image %s in containerd before the agent was applied (only the pause image may be imported)", r)
		}
	}
	if len(before) == 0 {
		t.Errorf("no image in containerd before the agent was applied: the pause image should be imported")
	}
	for _, r := range imageRefs(t, node) {
		if strings.Contains(r, "nodeaddr") && !strings.Contains(r, "pause") && r != ref {
			t.Errorf("unexpected nodeaddr image %s in containerd (an import?); want only %s", r, ref)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(node.Dir, "containerd.log")); !strings.Contains(string(log), "PullImage") {
		t.Errorf("containerd's log shows no PullImage")
	}
}

// imageRefs lists the references in the node's containerd (namespace k8s.io).
func imageRefs(t *testing.T, n *harness.RealNode) []string {
	return strings.Fields(ctrImages(t, n, "-q"))
}

// ctrImages is the standard output of `ctr -n k8s.io images ls` on the node's containerd (on
// cgroup v1 ctr warns on stderr, which harness.RealNode.Ctr mixes in).
func ctrImages(t *testing.T, n *harness.RealNode, args ...string) string {
	t.Helper()
	cmd := exec.Command(n.C.Bins.Ctr, append([]string{"--address", n.Socket, "-n", "k8s.io", "images", "ls"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ctr images ls: %v: %s", err, stderr.String())
	}
	return string(out)
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
