package csr

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The world of these tests: node-a runs the agent and publishes InternalIP 192.0.2.10; node-b is
// another Node at 192.0.2.77; the API server's endpoint (the kubernetes Service's EndpointSlice) is
// 192.0.2.250.
const (
	self, other     = "node-a", "node-b"
	selfIP, otherIP = "192.0.2.10", "192.0.2.77"
	apiServerIP     = "192.0.2.250"
	policyName      = "nodeaddr-kubelet-serving-csr"
	pendingReason   = "KubeletServingCSRPending"
	approvedReason  = "KubeletServingCSRApproved"
)

// csrSpec is a kubelet-serving request; zero fields take node-a's legitimate values.
type csrSpec struct {
	node   string // whose kubelet files it
	ips    []string
	dns    []string
	uris   []string
	usages []certv1.KeyUsage
}

func (s csrSpec) object(t *testing.T, name string) *certv1.CertificateSigningRequest {
	t.Helper()
	if s.node == "" {
		s.node = self
	}
	if s.ips == nil {
		s.ips = []string{selfIP}
	}
	if s.dns == nil {
		s.dns = []string{s.node}
	}
	csr, err := harness.ServingCSR{Node: s.node, IPs: s.ips, DNS: s.dns, URIs: s.uris, Usages: s.usages}.Object(name)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

// world is a control plane with the base and the component applied, node-b, the API server's
// EndpointSlice, and node-a's agent running with the flag (when args say so).
type world struct {
	t     *testing.T
	cp    *harness.ControlPlane
	h     *harness.Host
	args  []string
	agent *harness.Agent
}

func newWorld(t *testing.T, args ...string) *world {
	h := harness.NewHost(t, self)
	cp := h.CP
	ctx := context.Background()
	if err := cp.ApplyPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	component := filepath.Join(harness.RepoDir(), "deploy", "components", "kubelet-serving-csr")
	for _, f := range []string{"rbac.yaml", "policy.yaml"} {
		if err := cp.ApplyManifest(ctx, filepath.Join(component, f)); err != nil {
			t.Fatal(err)
		}
	}
	cp.CreateNode(t, harness.NodeSpec{Name: self, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: self}}})
	cp.CreateNode(t, harness.NodeSpec{Name: other, Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: otherIP}, {Type: corev1.NodeHostName, Address: other}}})
	ready := true
	if _, err := cp.Admin.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{apiServerIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Uplink("eth0", selfIP+"/24", "192.0.2.1", 100)
	w := &world{t: t, cp: cp, h: h, args: append([]string{"--external-ip-target=none"}, args...)}
	w.agent = h.Start(w.args...)
	cp.WaitNode(t, self, 30*time.Second, "InternalIP "+selfIP, func(n *corev1.Node) bool {
		return len(n.Status.Addresses) > 0 && n.Status.Addresses[0] == corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: selfIP}
	})
	return w
}

// kubelet is node's kubelet: the administrator impersonating system:node:NODE in system:nodes.
func (w *world) kubelet(node string) kubernetes.Interface {
	w.t.Helper()
	cfg := rest.CopyConfig(w.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return cs
}

// file creates the CSR as its node's kubelet.
func (w *world) file(name string, s csrSpec) {
	w.t.Helper()
	node := s.node
	if node == "" {
		node = self
	}
	if _, err := w.kubelet(node).CertificatesV1().CertificateSigningRequests().Create(context.Background(),
		s.object(w.t, name), metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("kubelet of %s files %s: %v", node, name, err)
	}
}

func (w *world) csr(name string) *certv1.CertificateSigningRequest {
	w.t.Helper()
	c, err := w.cp.Admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// waitEvent polls for the Event about node-a with reason whose message names the CSR, and returns it.
func (w *world) waitEvent(reason, csr string) corev1.Event {
	w.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		for _, e := range w.cp.Events(w.t, self, reason) {
			if strings.Contains(e.Message, " "+csr+" ") {
				return e
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("no %s Event naming %s within 20s; agent log:\n%s", reason, csr, w.agent.Logs())
		}
	}
}
