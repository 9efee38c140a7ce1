package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// shippedConfigMaps is the data of the ConfigMaps deploy/ ships, by name (what the kubelet resolves
// the DaemonSet's configMapKeyRef env from).
func shippedConfigMaps(t *testing.T) map[string]map[string]string {
	t.Helper()
	data, err := os.ReadFile(harness.DeployFile("config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			out[cm.Name] = cm.Data
		}
	}
	return out
}

// freshHost is one host shape: the commands that build its network inside the node namespace.
type freshHost struct {
	name  string
	setup func(ns *harness.Netns)
	// extra are flags added to the shipped DaemonSet's (an operator's configuration); none for
	// the defaults.
	extra []string
	// node is the Node as it exists before the agent starts; nil means as a 1.37 kubelet with
	// --cloud-provider=external and no --node-ip registers it: [Hostname], the uninitialized taint,
	// no provided-node-ip annotation.
	node *harness.NodeSpec
	want string // the Node's addresses at the end, "Type=address" in order
	// statusWrites is the exact number of status (address) writes the agent makes.
	statusWrites int
}

// uplink4 links dev to router with addr4 and, when gw4 is set, a default route through it.
func uplink4(ns, router *harness.Netns, dev, addr4, gw4 string) {
	harness.AddUplink(ns, router, dev, addr4, gw4, 100)
}

func uplink6(ns *harness.Netns, dev, addr6, gw6 string) { harness.AddUplink6(ns, dev, addr6, gw6, 100) }

// The shipped DaemonSet's arguments, resolved as the kubelet would, on Nodes registered as today's
// kubelet registers them with --cloud-provider=external and no --node-ip: the defaults alone give
// every host shape a working Node (an InternalIP per family with a default route), in one status
// write and one taint write.
func TestFreshNodeShippedDefaults(t *testing.T) {
	harness.RequireE2E(t)
	c := harness.ShippedDaemonSet(t).Spec.Template.Spec.Containers[0]
	cms := shippedConfigMaps(t)
	cp := harness.StartControlPlane(t)
	cp.ApplyRBAC(t)

	var router *harness.Netns
	hosts := []freshHost{
		{
			name: "ipv4-only",
			setup: func(ns *harness.Netns) {
				uplink4(ns, router, "eth0", "192.0.2.10/24", "192.0.2.1")
			},
			// The ExternalIP equals the InternalIP and is not published (local-ccm's rule).
			want: "InternalIP=192.0.2.10 Hostname=ipv4-only", statusWrites: 1,
		},
		{
			name: "dual-stack",
			setup: func(ns *harness.Netns) {
				uplink4(ns, router, "eth0", "192.0.2.10/24", "192.0.2.1")
				uplink6(ns, "eth0", "2001:db8::10/64", "2001:db8::1")
			},
			want: "InternalIP=192.0.2.10 InternalIP=2001:db8::10 Hostname=dual-stack", statusWrites: 1,
		},
		{
			name: "ipv6-only",
			setup: func(ns *harness.Netns) {
				ns.Link("eth0", router, "r-eth0")
				uplink6(ns, "eth0", "2001:db8::10/64", "2001:db8::1")
			},
			want: "InternalIP=2001:db8::10 Hostname=ipv6-only", statusWrites: 1,
		},
		{
			// A public uplink with the default route and a private NIC without one: the uplink
			// is the InternalIP (the route source), the private NIC is not used.
			name: "public-uplink",
			setup: func(ns *harness.Netns) {
				uplink4(ns, router, "eth0", "203.0.113.10/24", "203.0.113.1")
				uplink4(ns, router, "eth1", "10.0.0.10/24", "")
			},
			want: "InternalIP=203.0.113.10 Hostname=public-uplink", statusWrites: 1,
		},
		{
			// The same host configured as operators do: InternalIP toward the private network.
			name: "public-uplink-configured",
			setup: func(ns *harness.Netns) {
				uplink4(ns, router, "eth0", "203.0.113.10/24", "203.0.113.1")
				uplink4(ns, router, "eth1", "10.0.0.10/24", "")
			},
			extra: []string{"--internal-ip-target=10.0.0.1"},
			want:  "InternalIP=10.0.0.10 ExternalIP=203.0.113.10 Hostname=public-uplink-configured", statusWrites: 1,
		},
		{
			// An InternalIP someone else set (an older kubelet, --node-ip without external mode) on
			// a secondary uplink, the default route via another: it is local, so it stays; only
			// the ExternalIP is added.
			name: "adopt-internal",
			setup: func(ns *harness.Netns) {
				uplink4(ns, router, "eth0", "192.0.2.10/24", "192.0.2.1")
				uplink4(ns, router, "eth1", "10.88.0.5/24", "")
			},
			node: &harness.NodeSpec{Taints: []corev1.Taint{harness.Uninitialized}, Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.88.0.5"}, {Type: corev1.NodeHostName, Address: "adopt-internal"}}},
			want: "InternalIP=10.88.0.5 ExternalIP=192.0.2.10 Hostname=adopt-internal", statusWrites: 1,
		},
		{
			// The same with ExternalIP unmanaged: not a single address write.
			name: "adopt-internal-only",
			setup: func(ns *harness.Netns) {
				uplink4(ns, router, "eth0", "192.0.2.10/24", "192.0.2.1")
				uplink4(ns, router, "eth1", "10.88.0.5/24", "")
			},
			extra: []string{"--external-ip-target=none"},
			node: &harness.NodeSpec{Taints: []corev1.Taint{harness.Uninitialized}, Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.88.0.5"}, {Type: corev1.NodeHostName, Address: "adopt-internal-only"}}},
			want: "InternalIP=10.88.0.5 Hostname=adopt-internal-only", statusWrites: 0,
		},
		{
			// An InternalIP the host no longer has is replaced by the route source.
			name: "replace-stale-internal",
			setup: func(ns *harness.Netns) {
				uplink4(ns, router, "eth0", "192.0.2.10/24", "192.0.2.1")
			},
			node: &harness.NodeSpec{Taints: []corev1.Taint{harness.Uninitialized}, Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.88.0.5"}, {Type: corev1.NodeHostName, Address: "replace-stale-internal"}}},
			want: "InternalIP=192.0.2.10 Hostname=replace-stale-internal", statusWrites: 1,
		},
	}
	for _, h := range hosts {
		t.Run(h.name, func(t *testing.T) {
			spec := harness.NodeSpec{Taints: []corev1.Taint{harness.Uninitialized},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: h.name}}}
			if h.node != nil {
				spec = *h.node
			}
			spec.Name = h.name
			cp.CreateNode(t, spec)
			ns := harness.NewNetns(t, "fresh")
			router = harness.NewNetns(t, "rtr")
			h.setup(ns)

			env, args := harness.PodEnv(t, c, h.name, cms)
			args = append(args, h.extra...)
			harness.StartAgent(t, ns, harness.AgentOptions{Args: args, Env: env, Kubeconfig: cp.AgentKubeconfig(t, ns, h.name)})
			n := cp.WaitNode(t, h.name, 30*time.Second, "taint removed", func(n *corev1.Node) bool {
				return !slices.Contains(harness.TaintKeys(n), harness.Uninitialized.Key)
			})
			if got := addressString(n.Status.Addresses); got != h.want {
				t.Errorf("addresses = %s, want %s", got, h.want)
			}
			if w := cp.Writes(t, h.name); w["status"] != h.statusWrites || w[""] != 1 {
				t.Errorf("agent writes = %v, want %d status write(s) and one taint write", w, h.statusWrites)
			}
		})
	}
}

func addressString(addrs []corev1.NodeAddress) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		parts = append(parts, string(a.Type)+"="+a.Address)
	}
	return strings.Join(parts, " ")
}
