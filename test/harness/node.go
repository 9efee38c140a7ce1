package harness

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RealNode is a real Kubernetes node inside a network namespace the test created: containerd (with
// runc and the CNI plugins) and the kubelet run in the namespace, so the pods on the host network
// are in it too and a test can renumber the node's uplink without touching the machine's network.
// All state lives under Dir, a short directory (unix socket paths are limited to 107 bytes).
type RealNode struct {
	T    testing.TB
	C    *NodeCluster
	NS   *Netns
	Dir  string
	Name string
	// Socket is containerd's CRI endpoint; Registered is when the kubelet's Node appeared.
	Socket     string
	Registered time.Time

	id                  string
	containerd, kubelet *proc
	registryConfigPath  string
}

// NodeOptions shape the kubelet.
type NodeOptions struct {
	// Name is the Node's name: the cluster's Name if empty, else one of ClusterOptions.Nodes.
	Name string
	// PodNetwork "flannel" starts the node with no CNI configuration: flannel writes its subnet
	// file once it runs on the node, and WriteFlannelCNI writes what flannel's CNI plugin would
	// (the node stays NotReady until then). Empty: cniConfig's bridge, written at start.
	PodNetwork string
	// KubeletArgs are extra kubelet flags (e.g. --node-ip).
	KubeletArgs []string
	// NoCloudProvider starts the kubelet without --cloud-provider=external.
	NoCloudProvider bool
	// Images are docker-archive tarballs imported into containerd before the kubelet starts.
	Images []string
	// ServerTLSBootstrap makes the kubelet request its serving certificate with a CSR.
	ServerTLSBootstrap bool
	// RegistryConfigPath, if set, is containerd's CRI registry config_path: a certs.d directory of
	// HOST:PORT/hosts.toml files (a private registry's CA), for images the node pulls.
	RegistryConfigPath string
}

// PauseImage is the sandbox image containerd is pinned to (built locally, test/cmd/pause).
const PauseImage = "nodeaddr.test/pause:e2e"

// StartNode starts containerd and the kubelet of c.Name in ns, waits until the Node is registered,
// and tears everything down (pods, shims, mounts, cgroups, CNI state) when t ends, even on failure.
// The namespace must already have its uplink: the kubelet reads its addresses at start.
func (c *NodeCluster) StartNode(ns *Netns, o NodeOptions) *RealNode {
	t := c.T
	t.Helper()
	sweepNodeLeftovers(c.Bins)
	dir, err := os.MkdirTemp("", "rn")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	name := cmp.Or(o.Name, c.Name)
	if c.KubeletTokens[name] == "" {
		t.Fatalf("Node %s has no kubelet token: name it in ClusterOptions.Nodes", name)
	}
	n := &RealNode{T: t, C: c, NS: ns, Dir: dir, Name: name, id: filepath.Base(dir), registryConfigPath: o.RegistryConfigPath}
	n.Socket = filepath.Join(dir, "c.sock")
	t.Cleanup(n.teardown)
	n.RecordNetns(ns.Name)
	// The API server is on the host's loopback: relay its port into the namespace's loopback, so
	// the kubelet and the pods reach it at 127.0.0.1:Port as on a control-plane node.
	ns.Relay(c.CP.Port, fmt.Sprintf("127.0.0.1:%d", c.CP.Port))
	if c.egress != nil {
		c.egress.setNode(ns)
	}
	n.startContainerd(o.PodNetwork == "")
	pause := filepath.Join(dir, "pause.tar")
	if err := WriteImage(pause, PauseImage, c.Bins.Pause, "/pause", PauseUser, []string{"/pause"}); err != nil {
		t.Fatal(err)
	}
	for _, img := range append([]string{pause}, o.Images...) {
		n.Ctr("images", "import", img)
	}
	n.startKubelet(o)
	n.Registered = n.waitRegistered()
	// Decoding happens before registration: the log says by now whether the config fit the release.
	if log, _ := os.ReadFile(filepath.Join(dir, "kubelet.log")); strings.Contains(string(log), lenientDecoding) {
		t.Fatalf("kubelet %s ignored fields of its config:\n%s", c.Version, grepLines(string(log), lenientDecoding))
	}
	return n
}

// RecordNetns notes network namespaces the node uses, so that the next run deletes them if this
// one is killed before its cleanups.
func (n *RealNode) RecordNetns(names ...string) {
	f, err := os.OpenFile(filepath.Join(n.Dir, "netns"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.T.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, strings.Join(names, " "))
}

// Ctr runs ctr against this node's containerd in the k8s.io namespace (the CRI's).
func (n *RealNode) Ctr(args ...string) string {
	n.T.Helper()
	out, err := exec.Command(n.C.Bins.Ctr, append([]string{"--address", n.Socket, "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		n.T.Fatalf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nsenter runs name inside the node's namespace. Not `ip netns exec`: that remounts /sys, which
// hides the cgroup mounts from the kubelet ("failed to find cgroup mounts").
func (n *RealNode) nsenter(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--net=/var/run/netns/" + n.NS.Name, "--", name}, args...)...)
	// containerd finds the shim on PATH; the shim finds runc through the runtime options.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(n.C.Bins.Containerd)+":"+os.Getenv("PATH"))
	return cmd
}

func (n *RealNode) startContainerd(withCNI bool) {
	t := n.T
	t.Helper()
	cfg := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(n.containerdConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	if withCNI {
		n.writeCNI(n.cniConfig())
	}
	p, err := startLogged(n.nsenter(n.C.Bins.Containerd, "--config", cfg), filepath.Join(n.Dir, "containerd.log"))
	if err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	n.containerd = p
	if err := Poll(30*time.Second, 100*time.Millisecond, "containerd serving", func() (bool, string) {
		err := exec.Command(n.C.Bins.Ctr, "--address", n.Socket, "version").Run()
		if err == nil {
			return true, ""
		}
		select {
		case <-p.done:
			t.Fatalf("containerd exited: %v\n%s", p.err, tailFile(filepath.Join(n.Dir, "containerd.log"), 20))
		default:
		}
		return false, "ctr version: " + err.Error()
	}); err != nil {
		t.Fatalf("%v\n%s", err, tailFile(filepath.Join(n.Dir, "containerd.log"), 20))
	}
}

// containerdConfig is config v3 with every path under Dir. restrict_oom_score_adj: root here lacks
// CAP_SYS_RESOURCE, and runc fails every sandbox that would lower oom_score_adj. NRI is off (its
// socket is a fixed host path).
func (n *RealNode) containerdConfig() string {
	for _, d := range []string{"net.d", "cni", "opt", "pods", "kubelet"} {
		os.MkdirAll(filepath.Join(n.Dir, d), 0o755)
	}
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs", "io.containerd.mount-handler.v1.erofs", "io.containerd.snapshotter.v1.blockfile"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins.'io.containerd.internal.v1.opt']
  path = %[5]q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[6]q
%[11]s[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[7]q
        Root = %[8]q
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[9]q]
    conf_dir = %[10]q
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
`, filepath.Join(n.Dir, "root"), filepath.Join(n.Dir, "st"), n.Socket, n.Socket+".ttrpc",
		filepath.Join(n.Dir, "opt"), NormalizeImage(PauseImage), n.C.Bins.Runc, n.runcRoot(),
		n.C.Bins.CNIDir, filepath.Join(n.Dir, "net.d"), n.registryConfig())
}

// registryConfig is the CRI images plugin's registry section when the node has a certs.d
// directory (NodeOptions.RegistryConfigPath), else nothing.
func (n *RealNode) registryConfig() string {
	if n.registryConfigPath == "" {
		return ""
	}
	return fmt.Sprintf("  [plugins.'io.containerd.cri.v1.images'.registry]\n    config_path = %q\n", n.registryConfigPath)
}

// writeCNI writes the node's CNI configuration; containerd watches the directory, so a node
// started without one becomes Ready once it is written.
func (n *RealNode) writeCNI(conflist string) {
	if err := os.WriteFile(filepath.Join(n.Dir, "net.d", "10-node.conflist"), []byte(conflist), 0o644); err != nil {
		n.T.Fatal(err)
	}
}

func (n *RealNode) runcRoot() string { return filepath.Join(n.Dir, "runc") }

// cniNetwork names this node's pod network; libcni keeps its cache under /var/lib/cni/results
// with this name in each file (no setting moves it), which teardown removes.
func (n *RealNode) cniNetwork() string { return "nodeaddr-" + n.id }

// cniConfig: a bridge with host-local IPAM (state under Dir) from a private range inside the node's
// namespace. No IP masquerade: there is nowhere to masquerade to. Besides the bridge's subnet the
// pods route only the Service network (the API server's --service-cluster-ip-range) through the
// node (PodGateway), where kube-proxy carries ClusterIPs to their endpoints: no default route.
// In a DualStack cluster each pod also gets an address from PodCIDR6 and a route to ServiceCIDR6
// (the bridge plugin then turns IPv6 forwarding on in the node's namespace: an uplink that takes its
// addresses from router advertisements needs accept_ra=2).
func (n *RealNode) cniConfig() string {
	ranges, routes := `[{"subnet": "10.244.0.0/24"}]`, `{"dst": "10.96.0.0/16"}`
	if n.C.Options.DualStack {
		ranges += fmt.Sprintf(`, [{"subnet": %q}]`, PodCIDR6)
		routes += fmt.Sprintf(`, {"dst": %q}`, ServiceCIDR6)
	}
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [%s],
            "routes": [%s]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}`, n.cniNetwork(), filepath.Join(n.Dir, "cni"), ranges, routes)
}

func (n *RealNode) startKubelet(o NodeOptions) {
	t := n.T
	t.Helper()
	root := filepath.Join(n.Dir, "kubelet")
	cfg := filepath.Join(n.Dir, "kubelet.yaml")
	config := n.kubeletConfig()
	if o.ServerTLSBootstrap || n.C.Options.Hardened {
		config += "serverTLSBootstrap: true\n"
	}
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	makeCgroups(n.id)
	kc := writeKubeconfig(t, filepath.Join(n.Dir, "kubelet.kubeconfig"),
		fmt.Sprintf("https://127.0.0.1:%d", n.C.CP.Port), n.C.KubeletTokens[n.Name], n.C.CP.CAFile)
	// --cert-dir is not under --root-dir by default (/var/lib/kubelet/pki): two nodes on one
	// machine would share, and swap, their serving certificates.
	args := []string{"--config=" + cfg, "--kubeconfig=" + kc, "--root-dir=" + root,
		"--cert-dir=" + filepath.Join(n.Dir, "pki"), "--hostname-override=" + n.Name, "--v=2"}
	if !o.NoCloudProvider {
		args = append(args, "--cloud-provider=external")
	}
	args = append(args, o.KubeletArgs...)
	p, err := startLogged(n.nsenter(n.C.Bins.Kubelet, args...), filepath.Join(n.Dir, "kubelet.log"))
	if err != nil {
		t.Fatalf("start kubelet: %v", err)
	}
	n.kubelet = p
}

// kubeletConfig is what worked on these machines: cgroup v1 allowed (KEP 5573), cgroupfs, no QoS
// cgroups or node-allocatable enforcement, no swap check; every path under Dir. Image GC and disk
// eviction are off: the images were imported and cannot be pulled again. Only fields the release
// knows: failCgroupV1 arrived in 1.31 (a 1.30 kubelet allows cgroup v1 anyway), and a field the
// release does not know makes its kubelet fall back to lenient decoding (checked after start).
func (n *RealNode) kubeletConfig() string {
	failCgroupV1 := ""
	if Minor(n.C.Version) >= 31 {
		failCgroupV1 = "failCgroupV1: false\n"
	}
	// A hardened cluster's API server authenticates to the kubelet with a client certificate.
	clientCA := ""
	if n.C.Options.Hardened {
		clientCA = fmt.Sprintf(", x509: {clientCAFile: %q}", n.C.SignerFile)
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
%[4]scgroupDriver: cgroupfs
cgroupsPerQOS: false
cgroupRoot: /%[1]s
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://%[2]s
podLogsDir: %[3]q
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}%[5]s}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "0%%", "nodefs.available": "0%%", "imagefs.available": "0%%", "nodefs.inodesFree": "0%%"}
resolvConf: /etc/resolv.conf
`, n.id, n.Socket, filepath.Join(n.Dir, "pods"), failCgroupV1, clientCA)
}

// lenientDecoding is what the kubelet logs when its --config has a field its release does not
// know (pkg/kubelet/kubeletconfig/util/codec, 1.30 to 1.37): it then ignores the field.
const lenientDecoding = "Using lenient decoding as strict decoding failed"

// waitRegistered waits for the kubelet's Node and returns its creation time.
func (n *RealNode) waitRegistered() time.Time {
	t := n.T
	t.Helper()
	var created time.Time
	if err := Poll(2*time.Minute, 200*time.Millisecond, "Node "+n.Name+" registered", func() (bool, string) {
		node, err := n.C.CP.Admin.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err == nil {
			created = node.CreationTimestamp.Time
			return true, ""
		}
		select {
		case <-n.kubelet.done:
			t.Fatalf("kubelet exited before registering: %v\n%s", n.kubelet.err, tailFile(filepath.Join(n.Dir, "kubelet.log"), 30))
		default:
		}
		return false, err.Error()
	}); err != nil {
		t.Fatalf("%v\n%s", err, tailFile(filepath.Join(n.Dir, "kubelet.log"), 30))
	}
	return created
}

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Node reads the Node object; t is the calling (sub)test, which a failed read fails.
func (n *RealNode) Node(t testing.TB) *corev1.Node { return n.C.CP.Node(t, n.Name) }
