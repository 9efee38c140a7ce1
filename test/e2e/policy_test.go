package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

const providedNodeIP = "alpha.kubernetes.io/provided-node-ip"

// The kubelet's --node-ip (the provided-node-ip annotation) is on the host: it is the InternalIP,
// although the route toward the target uses another address, and the taint goes.
func TestPolicyProvidedNodeIPPresent(t *testing.T) {
	e := newEnv(t, "nodeip")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized},
		Annotations: map[string]string{providedNodeIP: "10.0.0.5"},
		Addresses:   []corev1.NodeAddress{harness.Addr(in, "10.0.0.5"), harness.Addr(hn, "nodeip")}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.ns.Link("eth1", e.router, "r-eth1")
	e.ns.IP("addr", "add", "10.0.0.5/24", "dev", "eth1")
	a := e.start("--internal-ip-target=192.0.2.1", "--external-ip-target=none")

	n := e.cp.WaitNode(t, e.node, 30*time.Second, "uninitialized taint removed", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key)
	})
	if got := harness.FormatAddrs(n.Status.Addresses); got != "[InternalIP=10.0.0.5 Hostname=nodeip]" {
		t.Fatalf("addresses = %s, want the provided node IP as InternalIP", got)
	}
	if w := e.statusWrites(); w != 0 {
		t.Fatalf("status writes = %d, want 0 (the kubelet's list already was right)", w)
	}
	if v := a.Metric("nodeaddr_provided_node_ip_missing"); v != 0 {
		t.Fatalf("nodeaddr_provided_node_ip_missing = %v, want 0", v)
	}
	if ev := e.cp.Events(t, e.node, "ProvidedNodeIPNotFound"); len(ev) != 0 {
		t.Fatalf("ProvidedNodeIPNotFound events = %d, want 0", len(ev))
	}
}

// The kubelet's node IP is not on the host: the resolved address is published, the taint stays, a
// Warning Event, a metric and a log line say why. When the address appears it takes over and the
// taint goes.
func TestPolicyProvidedNodeIPAbsent(t *testing.T) {
	e := newEnv(t, "nodeipgone")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized},
		Annotations: map[string]string{providedNodeIP: "10.0.0.99", "example.com/keep": "me"}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.ns.Link("eth1", e.router, "r-eth1")
	a := e.start("--internal-ip-target=192.0.2.1", "--external-ip-target=none")

	e.waitAddresses([]corev1.NodeAddress{harness.Addr(in, "192.0.2.10")})
	a.WaitMetric("nodeaddr_provided_node_ip_missing", 30*time.Second, func(v float64) bool { return v == 1 })
	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, "a ProvidedNodeIPNotFound event", func() (bool, string) {
		return len(e.cp.Events(t, e.node, "ProvidedNodeIPNotFound")) > 0, "none"
	})
	time.Sleep(2 * time.Second) // measured window: a wrong agent would remove the taint or warn again by now
	n := e.cp.Node(t, e.node)
	if !harness.HasTaint(n, harness.Uninitialized.Key) {
		t.Fatal("uninitialized taint removed although the provided node IP is not on the host")
	}
	if ev := e.cp.Events(t, e.node, "ProvidedNodeIPNotFound"); len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning ||
		!strings.Contains(ev[0].Message, "10.0.0.99") || ev[0].Count > 1 {
		t.Fatalf("ProvidedNodeIPNotFound events = %+v, want one Warning naming 10.0.0.99", ev)
	}
	if !strings.Contains(a.Logs(), "provided node IP is not on this host") {
		t.Fatal("no log line about the missing provided node IP")
	}

	// The network manager brings the address up: it becomes the InternalIP and the taint goes.
	e.ns.IP("addr", "add", "10.0.0.99/24", "dev", "eth1")
	n = e.cp.WaitNode(t, e.node, 30*time.Second, "initialized with the provided node IP", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key) && harness.FormatAddrs(n.Status.Addresses) == "[InternalIP=10.0.0.99]"
	})
	if n.Annotations["example.com/keep"] != "me" {
		t.Fatalf("annotations = %v: another annotation was lost", n.Annotations)
	}
	a.WaitMetric("nodeaddr_provided_node_ip_missing", 10*time.Second, func(v float64) bool { return v == 0 })
	if w := e.statusWrites(); w != 2 {
		t.Fatalf("status writes = %d, want 2", w)
	}
}

// A keepalived VIP (a secondary) and a kube-vip /32, even named as the route's source, never become
// the node IP; a CNI bridge is ignored; the published address does not move.
func TestPolicyVIPsAndCNIIgnored(t *testing.T) {
	e := newEnv(t, "vips")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=192.0.2.1", "--internal-ip-interfaces=eth.*,cni.*", "--external-ip-target=none")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(in, "192.0.2.10")})

	e.ns.IP("link", "add", "cni0", "type", "veth", "peer", "name", "cni0p")
	e.ns.IP("link", "set", "cni0", "up")
	e.ns.IP("addr", "add", "10.244.0.1/24", "dev", "cni0")
	e.ns.IP("addr", "add", "192.0.2.100/24", "dev", "eth0") // keepalived
	e.ns.IP("addr", "add", "192.0.2.200/32", "dev", "eth0") // kube-vip
	e.ns.IP("route", "replace", "default", "via", "192.0.2.1", "dev", "eth0", "metric", "100", "src", "192.0.2.100")
	e.ns.IP("route", "replace", "192.0.2.1/32", "dev", "eth0", "src", "192.0.2.200")
	time.Sleep(3 * time.Second) // measured window: a wrong agent would publish a VIP by now
	if got := harness.FormatAddrs(e.cp.Node(t, e.node).Status.Addresses); got != "[InternalIP=192.0.2.10]" {
		t.Fatalf("addresses = %s, want [InternalIP=192.0.2.10]", got)
	}
	if w := e.statusWrites(); w != 1 {
		t.Fatalf("status writes = %d, want 1", w)
	}
	if v := a.Metric(`nodeaddr_resolutions_total{result="success"}`); v < 2 {
		t.Fatalf("resolutions = %v: the agent did not re-resolve after the changes", v)
	}
}

// The Node's current address stays among equal candidates across agent runs: neither --run-once nor
// a restarted agent (a DaemonSet rollout) flips it to the route source. And --run-once, like the
// agent, excludes the Node's pod CIDRs although a CIDR rule prefers them.
func TestPolicyRestartKeepsTheNodesChoice(t *testing.T) {
	e := newEnv(t, "sticky")
	// A previous agent chose eth1's address (equal priority with the route source on eth0).
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{harness.Addr(ext, "198.51.100.20"), harness.Addr(hn, "sticky")}})
	if _, err := e.cp.Admin.CoreV1().Nodes().Patch(t.Context(), e.node, types.MergePatchType,
		[]byte(`{"spec":{"podCIDR":"10.244.0.0/24","podCIDRs":["10.244.0.0/24"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.ns.Link("eth1", e.router, "r-eth1")
	e.ns.IP("addr", "add", "198.51.100.20/24", "dev", "eth1")
	e.ns.Link("eth2", e.router, "r-eth2")
	e.ns.IP("addr", "add", "10.244.0.7/24", "dev", "eth2") // in the pod CIDR, not on a CNI interface
	e.ns.IP("addr", "add", "10.0.0.7/24", "dev", "eth2")
	args := []string{"--external-ip-target=8.8.8.8", "--external-ip-interfaces=eth0,eth1",
		"--internal-ip-cidrs=10.244.0.0/16,10.0.0.0/8"}

	code, out := harness.RunAgent(t, e.ns, harness.AgentOptions{Kubeconfig: e.kc,
		Args: append([]string{"--node-name=" + e.node, "--run-once"}, args...)}, 60*time.Second)
	if code != 0 {
		t.Fatalf("--run-once exit code = %d:\n%s", code, out)
	}
	want := "[InternalIP=10.0.0.7 ExternalIP=198.51.100.20 Hostname=sticky]"
	n := e.cp.Node(t, e.node)
	if got := harness.FormatAddrs(n.Status.Addresses); got != want || harness.HasTaint(n, harness.Uninitialized.Key) {
		t.Fatalf("after --run-once: addresses %s (want %s), taints %v", got, want, harness.TaintKeys(n))
	}
	writes := e.statusWrites()

	a := e.start(args...)
	waitReady(t, a)
	if v := a.Metric(`nodeaddr_resolutions_total{result="success"}`); v < 1 {
		t.Fatalf("resolutions = %v after ready", v)
	}
	// Ready means reconciled: a wrong first resolution would have been written before.
	if got := harness.FormatAddrs(e.cp.Node(t, e.node).Status.Addresses); got != want {
		t.Fatalf("after the agent started: addresses %s, want %s kept", got, want)
	}
	if w := e.statusWrites(); w != writes {
		t.Fatalf("the restarted agent wrote the status %d times, want 0", w-writes)
	}
}
