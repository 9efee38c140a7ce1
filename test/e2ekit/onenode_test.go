package e2ekit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The node's uplink, from the documentation range, inside the test's namespaces only.
const uplink, gateway = "192.0.2.10", "192.0.2.1"

// TestFocusListNamesSpecs: every entry of the focus list names at least one spec of the built
// e2e.test (a dry run lists them without a cluster), so a renamed upstream test cannot drop out
// of the list silently.
func TestFocusListNamesSpecs(t *testing.T) {
	harness.RequireE2E(t)
	suite := harness.MustBuildE2E(t).Suite
	focus := append(harness.E2EFocus(), harness.E2EDualStack...)
	out, err := exec.Command(suite, "--ginkgo.dry-run", "--ginkgo.v", "--ginkgo.no-color",
		"--ginkgo.focus="+harness.FocusRegexp(focus), "--ginkgo.skip="+harness.FocusRegexp(harness.E2ESkip)).CombinedOutput()
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, tail(string(out), 15))
	}
	for _, part := range focus {
		if !strings.Contains(string(out), part) {
			t.Errorf("no spec of %s is named %q; the dry run said:\n%s", filepath.Base(suite), part, tail(string(out), 15))
		}
	}
}

// TestOneNode runs the one-node part of the focus list (harness.E2EOneNode) on a hardened one-node
// cluster (the kubelet sets its own InternalIP with --node-ip; kube-proxy; cluster DNS; pods route
// the uplink's address through the node; the test approves the kubelet's serving CSR, as an
// approver would): every spec runs and passes, twice on the same cluster. The two-node part (harness.E2ETwoNodes) is left to
// the two-node cluster: on one node each Granular Checks case skips itself after about 14 s of
// setup (19 of them).
func TestOneNode(t *testing.T) {
	harness.RequireNode(t)
	e2e := harness.MustBuildE2E(t)
	c := harness.StartNodeClusterWith(t, "e2e-"+fmt.Sprint(os.Getpid()%100000), harness.KubernetesVersion,
		harness.ClusterOptions{Hardened: true})
	ns := harness.NewNetns(t, "node")
	router := harness.NewNetns(t, "rtr")
	ns.Link("eth0", router, "r-eth0")
	ns.IP("addr", "add", uplink+"/24", "dev", "eth0")
	ns.IP("route", "add", "default", "via", gateway, "dev", "eth0")
	router.IP("addr", "add", gateway+"/24", "dev", "r-eth0")
	dir := t.TempDir()
	images, err := harness.WriteE2EImages(dir, e2e)
	if err != nil {
		t.Fatal(err)
	}
	dns, err := harness.WriteCoreDNSImage(dir, harness.MustBuildCoreDNS(t))
	if err != nil {
		t.Fatal(err)
	}
	node := c.StartNode(ns, harness.NodeOptions{Images: append(images, dns), NoCloudProvider: true,
		KubeletArgs: []string{"--node-ip=" + uplink}, ClusterDNS: harness.ClusterDNSIP,
		// Pods reach the Node's address and answer clients on it (HostPort, NodePort).
		PodRoutes: []string{uplink + "/32"}})
	node.RecordNetns(router.Name)
	node.ServeKubernetesService()
	node.StartKubeProxy()
	approveServingCSR(t, c)
	waitReady(t, c)
	// Ready means CoreDNS's kubernetes plugin listed the cluster through the kubernetes Service.
	c.DeployClusterDNS()

	// Twice on the same cluster, as before and after a renumbering: the first run's namespaces
	// must be gone (the HostPort spec binds the same host ports each time).
	for _, run := range []string{"first", "second"} {
		res := harness.RunE2E(t, c.AdminKubeconfig(t), harness.E2EOneNode, harness.E2ESkip)
		t.Logf("e2e on one node, %s run: %s", run, res.Summary())
		checkAllPassed(t, res, harness.E2EOneNode)
		if run == "first" {
			t.Logf("passed:\n  %s\nleft to the two-node cluster (harness.E2ETwoNodes): %q", strings.Join(res.Passed, "\n  "), harness.E2ETwoNodes)
		}
	}
}

// checkAllPassed fails t unless exactly one spec per entry of focus ran, and passed.
func checkAllPassed(t *testing.T, res harness.E2EResult, focus []string) {
	t.Helper()
	for name, why := range res.Failed {
		t.Errorf("failed: %s\n%s", name, why)
	}
	for name, why := range res.Skipped {
		t.Errorf("skipped itself on one node: %s: %s", name, firstLine(why))
	}
	if len(res.Passed) != len(focus) {
		t.Errorf("%d specs passed, want %d (one per focus entry):\n%s", len(res.Passed), len(focus), strings.Join(res.Passed, "\n"))
	}
	for _, part := range focus {
		if !containsPart(res.Passed, part) {
			t.Errorf("no spec named %q passed", part)
		}
	}
}

// approveServingCSR approves the kubelet's first kubernetes.io/kubelet-serving CSR: the API server
// of a hardened cluster reaches the kubelet (logs, exec, proxy) only with it.
func approveServingCSR(t *testing.T, c *harness.NodeCluster) {
	t.Helper()
	ctx := context.Background()
	harness.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the kubelet's serving CSR approved", func() (bool, string) {
		list, err := c.CP.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + certv1.KubeletServingSignerName})
		if err != nil || len(list.Items) == 0 {
			return false, fmt.Sprintf("no serving CSR yet (%v)", err)
		}
		csr := &list.Items[0]
		if err := harness.SetCSRCondition(ctx, c.CP.Admin, csr, certv1.CertificateApproved); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// waitReady waits until the Node is Ready without taints (the e2e suite wants it schedulable).
func waitReady(t *testing.T, c *harness.NodeCluster) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, 200*time.Millisecond, "Node "+c.Name+" Ready and untainted", func() (bool, string) {
		n, err := c.CP.Admin.CoreV1().Nodes().Get(context.Background(), c.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v, taints %v", n.Status.Conditions, n.Spec.Taints)
	})
}

func containsPart(names []string, part string) bool {
	for _, n := range names {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
