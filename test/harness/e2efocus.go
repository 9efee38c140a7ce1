package harness

// The focus list of Kubernetes' own e2e tests that depend on Node addresses (issue 52, item 4):
// parts of spec names as e2e.test v1.37.2 spells them (test/e2e/network, test/e2e/common/node), for
// RunE2E. Each entry says what of the Node's addresses the specs use.
var (
	// E2EOneNode pass on a cluster of one node (test/e2ekit), and run on two.
	E2EOneNode = []string{
		// status.hostIP in an env var: the kubelet's view of the Node's first InternalIP at start.
		"[sig-node] Downward API should provide host IP as an env var",
		"[sig-node] Downward API should provide hostIPs as an env var",
		// Pods on the node's first InternalIP, curl and nc from a hostNetwork pod to it.
		"[sig-network] HostPort validates that there is no conflict between pods with same hostPort but different hostIP and protocol",
		// API server -> kubelet by the Node's preferred address (--kubelet-preferred-address-types).
		"[sig-network] Proxy version v1 should proxy logs on node with explicit kubelet port using proxy subresource",
		"[sig-network] Proxy version v1 should proxy logs on node using proxy subresource",
		// The jig dials the Service by name (cluster DNS), its ClusterIP, and the NodePort on the
		// InternalIPs of up to two nodes: one here, both on a two-node cluster.
		"[sig-network] Services should be able to create a functioning NodePort service",
	}
	// E2ETwoNodes need two schedulable nodes.
	E2ETwoNodes = []string{
		// The Granular Checks cases that dial node addresses or cross the nodes' pod network
		// (netserver pods on both nodes); each skips itself with fewer than two nodes
		// (e2enetwork.NetworkingTestConfig's setup), after about 14 s. The other 14 cases of the
		// group (session affinity, large requests, endpoint updates, the [Slow] nodePort updates)
		// test kube-proxy, not addresses, and take about a minute each.
		"[sig-network] Networking Granular Checks: Services should function for pod-Service: http",
		"[sig-network] Networking Granular Checks: Services should function for node-Service: http",
		"[sig-network] Networking Granular Checks: Services should function for node-Service: udp",
		"[sig-network] Networking Granular Checks: Services should function for endpoint-Service: http",
		"[sig-network] Networking Granular Checks: Services should function for service endpoints using hostNetwork",
	}
	// E2EDualStack runs only where the cluster is dual-stack.
	E2EDualStack = []string{
		"[sig-network] [Feature:IPv6DualStack] should have at least one dual-stack node",
	}
	// E2ESkip are focused specs that cannot run here: SCTP needs the sctp module and the
	// SCTPConnectivity feature, which the kit does not claim.
	E2ESkip = []string{"[Feature:SCTPConnectivity]"}
)

// E2EFocus is the whole focus list (one node, two nodes; add E2EDualStack on a dual-stack
// cluster).
func E2EFocus() []string {
	return append(append([]string(nil), E2EOneNode...), E2ETwoNodes...)
}
