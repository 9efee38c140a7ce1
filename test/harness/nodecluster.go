package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// NodeCluster is a control plane as a real cluster runs it: kube-apiserver with the Node authorizer
// and NodeRestriction admission, kube-controller-manager (its controllers under their own
// ServiceAccounts, the root CA published to every namespace) and kube-scheduler, all on the host's
// loopback. One Node, Name, may join it (StartNode): its kubelet token is issued before the API
// server starts, as system:node:Name in system:nodes.
type NodeCluster struct {
	T    testing.TB
	CP   *ControlPlane
	Bins NodeBinaries
	// Version is the release of every Kubernetes component: kube-apiserver, kube-controller-manager,
	// kube-scheduler and the kubelet (KubernetesVersion, or an older one of NodeVersions).
	Version string
	// Name is the (first) Node's name; KubeletToken authenticates its kubelet, KubeProxyToken
	// kube-proxy (system:kube-proxy, bound to system:node-proxier by the default RBAC).
	Name, KubeletToken, KubeProxyToken string
	// KubeletTokens is every Node's kubelet token by name: Name's and Options.Nodes'.
	KubeletTokens map[string]string
	Options       ClusterOptions
	// SignerFile is the CA kube-controller-manager signs CSRs with.
	SignerFile string

	kcm, scheduler *proc
	signer         tls.Certificate
	egress         *egressProxy
}

// NodeControllers are the kube-controller-manager controllers a one-node cluster needs: the
// DaemonSet and Deployment machinery, node lifecycle (Ready, taints), the ServiceAccount token and
// root CA publisher (in-cluster clients), and the garbage collector (uninstall deletes pods).
var NodeControllers = []string{
	"daemonset-controller", "deployment-controller", "replicaset-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "garbage-collector-controller",
	"serviceaccount-controller", "serviceaccount-token-controller", "root-ca-certificate-publisher-controller",
	// Signs approved CSRs (the kubelet's serving certificate with serverTLSBootstrap); the tests
	// approve them, as an operator's approver would.
	"certificatesigningrequest-signing-controller",
	// A Service's EndpointSlices, which kube-proxy programs (the NodePort scenario).
	"endpointslice-controller",
	// Deletes what a deleted namespace held: the e2e framework deletes each spec's namespace and
	// does not wait, and a second run on the same cluster needs the first run's pods gone (the
	// HostPort spec binds the same host ports every time).
	"namespace-controller",
}

// StartNodeCluster starts the control plane for Node name. Everything stops when t ends.
func StartNodeCluster(t testing.TB, name string) *NodeCluster {
	t.Helper()
	return StartNodeClusterVersion(t, name, KubernetesVersion)
}

// StartNodeClusterVersion is StartNodeCluster with every Kubernetes component of release version
// (built on first use; etcd, containerd, runc and the CNI plugins are the same for every release).
func StartNodeClusterVersion(t testing.TB, name, version string) *NodeCluster {
	t.Helper()
	return StartNodeClusterWith(t, name, version, ClusterOptions{})
}

// StartNodeClusterWith is StartNodeClusterVersion shaped by o.
func StartNodeClusterWith(t testing.TB, name, version string, o ClusterOptions) *NodeCluster {
	t.Helper()
	RequireNode(t)
	bins := MustBuild(t)
	bins.APIServer = MustBuildAPIServer(t, version)
	nb, err := BuildNodeVersion(os.Stderr, version)
	if err != nil {
		t.Fatalf("build node %s: %v", version, err)
	}
	cp, err := NewControlPlane(bins, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cp.ExtraArgs = []string{"--enable-admission-plugins=NodeRestriction"}
	if o.DualStack {
		// Replaces NewControlPlane's single-family range (the last occurrence of the flag wins).
		cp.ExtraArgs = append(cp.ExtraArgs, "--service-cluster-ip-range=10.96.0.0/16,"+ServiceCIDR6)
	}
	c := &NodeCluster{T: t, CP: cp, Bins: nb, Version: version, Name: name, Options: o}
	tokens := map[string]string{}
	users := map[string]string{
		"system:kube-controller-manager": "",
		"system:kube-scheduler":          "",
		"system:kube-proxy":              "",
	}
	for _, n := range append([]string{name}, o.Nodes...) {
		users["system:node:"+n] = "system:nodes"
	}
	for user, group := range users {
		var groups []string
		if group != "" {
			groups = append(groups, group)
		}
		if tokens[user], err = cp.AddToken(user, groups...); err != nil {
			t.Fatal(err)
		}
	}
	c.KubeletToken = tokens["system:node:"+name]
	c.KubeletTokens = map[string]string{}
	for _, n := range append([]string{name}, o.Nodes...) {
		c.KubeletTokens[n] = tokens["system:node:"+n]
	}
	c.KubeProxyToken = tokens["system:kube-proxy"]
	signer, signerKey, err := writeSigningCA(cp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c.SignerFile = signer
	if o.Hardened {
		c.harden(signer, signerKey)
	}
	t.Cleanup(func() {
		c.kcm.stop()
		c.scheduler.stop()
		cp.Stop()
		if t.Failed() {
			for _, f := range []string{"kube-apiserver.log", "kube-controller-manager.log", "kube-scheduler.log"} {
				t.Logf("last lines of %s:\n%s", f, tailFile(filepath.Join(cp.Dir, f), 30))
			}
		}
	})
	if err := cp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", cp.Port)
	kcmConfig := writeKubeconfig(t, filepath.Join(cp.Dir, "kcm.kubeconfig"), server, tokens["system:kube-controller-manager"], cp.CAFile)
	controllers, ipam := slices.Concat(NodeControllers, o.Controllers), []string(nil)
	if o.ClusterCIDR != "" {
		controllers = append(slices.Clone(controllers), "node-ipam-controller")
		ipam = []string{"--allocate-node-cidrs=true", "--cluster-cidr=" + o.ClusterCIDR, "--node-cidr-mask-size=24"}
	}
	c.kcm = c.start("kube-controller-manager", exec.Command(nb.ControllerManager, append([]string{
		"--kubeconfig=" + kcmConfig, "--secure-port=0", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--controllers=" + strings.Join(controllers, ","),
		"--root-ca-file=" + cp.CAFile,
		"--service-account-private-key-file=" + filepath.Join(cp.Dir, "sa.key"),
		"--cluster-signing-cert-file=" + signer, "--cluster-signing-key-file=" + signerKey,
		"--node-monitor-grace-period=40s", "--v=1"}, ipam...)...))
	schedConfig := writeKubeconfig(t, filepath.Join(cp.Dir, "scheduler.kubeconfig"), server, tokens["system:kube-scheduler"], cp.CAFile)
	c.scheduler = c.start("kube-scheduler", exec.Command(nb.Scheduler,
		"--kubeconfig="+schedConfig, "--secure-port=0", "--leader-elect=false", "--v=1"))
	return c
}

func (c *NodeCluster) start(name string, cmd *exec.Cmd) *proc {
	c.T.Helper()
	p, err := startLogged(cmd, filepath.Join(c.CP.Dir, name+".log"))
	if err != nil {
		c.T.Fatalf("start %s: %v", name, err)
	}
	return p
}

// writeSigningCA writes a throwaway CA for kube-controller-manager's CSR signer.
func writeSigningCA(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodeaddr-test-signer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "signer.crt"), filepath.Join(dir, "signer.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

// writeKubeconfig writes a token kubeconfig that verifies the API server with caFile.
func writeKubeconfig(t testing.TB, path, server, token, caFile string) string {
	t.Helper()
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority: %q}
users:
- name: u
  user: {token: %q}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server, caFile, token)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// RequireNode is RequireE2E for the real node, which also needs nsenter and mount tools.
func RequireNode(t testing.TB) {
	t.Helper()
	RequireE2E(t)
	for _, tool := range []string{"nsenter", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			SkipOrFail(t, "real node cannot run: %s not found", tool)
		}
	}
}

// AdminKubeconfig writes a kubeconfig with the control plane's system:masters token and CA (for
// kubectl, e2e.test and the scenarios' own checks) and returns its path.
func (c *NodeCluster) AdminKubeconfig(t testing.TB) string {
	t.Helper()
	return writeKubeconfig(t, filepath.Join(c.CP.Dir, "admin.kubeconfig"), fmt.Sprintf("https://127.0.0.1:%d", c.CP.Port), c.CP.AdminToken, c.CP.CAFile)
}
