package harness

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGateway is the node's address on its pod network: the gateway address the CNI bridge plugin
// gives cni0 (cniConfig's 10.244.0.0/24), the default route of every pod on the node.
const PodGateway = "10.244.0.1"

// ServeKubernetesService lets the node's ordinary pods reach the API server as in-cluster clients
// do, through the `kubernetes` Service (KUBERNETES_SERVICE_HOST is its ClusterIP, 10.96.0.1, which
// the API server's self-signed certificate names). The test's API server listens on the host's
// loopback and reconciles no endpoints (--endpoint-reconciler-type=none), so the harness does what
// a reachable API server's endpoint reconciler would: a relay inside the node's namespace listens
// on PodGateway at the API server's port and forwards to the API server, and the Service's
// EndpointSlice lists that address. kube-proxy (StartKubeProxy) carries the ClusterIP to it. The
// path stays inside the node's namespace: renumbering the uplink does not touch it. It returns the
// endpoint's address (the API server's address as the cluster sees it).
func (n *RealNode) ServeKubernetesService() string {
	t := n.T
	t.Helper()
	port := n.C.CP.Port
	n.NS.RelayAt(net.JoinHostPort(PodGateway, strconv.Itoa(port)), fmt.Sprintf("127.0.0.1:%d", port))
	n.C.publishAPIServer(PodGateway)
	return PodGateway
}

// publishAPIServer creates the kubernetes Service's EndpointSlice with the one address addr.
func (c *NodeCluster) publishAPIServer(addr string) {
	t := c.T
	t.Helper()
	ready := true
	name, proto, p := "https", corev1.ProtocolTCP, int32(c.CP.Port)
	_, err := c.CP.Admin.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(context.Background(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &p}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the kubernetes Service's EndpointSlice: %v", err)
	}
}

// LocalAPIServer is the kubernetes Service's endpoint in a cluster of several nodes: an address on
// every node's loopback where a relay to the API server listens, as a node-local load balancer in
// front of the API servers does (k3s's and RKE2's agents run one). Each node's pods reach it
// through their own node, so no path crosses the LAN or depends on an address a renumbering moves.
const LocalAPIServer = "198.51.100.1"

// ServeAPIServerLocally adds LocalAPIServer to the node's loopback with the relay behind it; once
// every node serves it, PublishLocalAPIServer makes it the kubernetes Service's endpoint.
func (n *RealNode) ServeAPIServerLocally() {
	n.T.Helper()
	n.NS.IP("addr", "add", LocalAPIServer+"/32", "dev", "lo")
	port := n.C.CP.Port
	n.NS.RelayAt(net.JoinHostPort(LocalAPIServer, strconv.Itoa(port)), fmt.Sprintf("127.0.0.1:%d", port))
}

// PublishLocalAPIServer writes the kubernetes Service's EndpointSlice with LocalAPIServer.
func (c *NodeCluster) PublishLocalAPIServer() {
	c.T.Helper()
	c.publishAPIServer(LocalAPIServer)
}

// ReachKubeletsFrom makes the API server dial kubelets (logs, exec, port-forward) from inside ns,
// a namespace on the nodes' LAN, instead of the last node's own (a hardened cluster only).
func (c *NodeCluster) ReachKubeletsFrom(ns *Netns) {
	if c.egress == nil {
		c.T.Fatal("ReachKubeletsFrom needs a hardened cluster (the egress proxy)")
	}
	c.egress.setNode(ns)
}
