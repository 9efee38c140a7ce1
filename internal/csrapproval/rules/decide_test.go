package rules_test

import (
	"fmt"
	"net/netip"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules/rulestest"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

func TestDecide(t *testing.T) {
	for _, tc := range rulestest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			got := rules.Decide(tc.Make(t))
			if got.Approve != tc.Want.Approve || got.Reason != tc.Want.Reason {
				t.Fatalf("Decide = %+v, want %+v", got, tc.Want)
			}
			if !got.Approve && got.Message == "" {
				t.Errorf("no message for reason %s", got.Reason)
			}
		})
	}
}

// The table has a case for every reason.
func TestDecideCoversEveryReason(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range rulestest.Cases() {
		seen[tc.Want.Reason] = true
	}
	for _, r := range rules.Reasons() {
		if !seen[r] {
			t.Errorf("no case for %s", r)
		}
	}
}

// Which CSRs are the approver's at all: kubelet-serving, from a node, and undecided.
func TestNodeOfAndPending(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    rulestest.CSRSpec
		node    string
		pending bool
	}{
		{"a kubelet's serving CSR", rulestest.CSRSpec{}, "node-a", true},
		{"another signer", rulestest.CSRSpec{Signer: certv1.KubeAPIServerClientKubeletSignerName}, "", true},
		{"not a node", rulestest.CSRSpec{Username: "system:serviceaccount:kube-system:nodeaddr"}, "", true},
		{"approved", rulestest.CSRSpec{Conditions: []certv1.RequestConditionType{certv1.CertificateApproved}}, "node-a", false},
		{"denied", rulestest.CSRSpec{Conditions: []certv1.RequestConditionType{certv1.CertificateDenied}}, "node-a", false},
		{"failed", rulestest.CSRSpec{Conditions: []certv1.RequestConditionType{certv1.CertificateFailed}}, "node-a", false},
	} {
		csr := rulestest.Build(t, tc.spec)
		if got := rules.NodeOf(csr); got != tc.node {
			t.Errorf("%s: NodeOf = %q, want %q", tc.name, got, tc.node)
		}
		if got := rules.Pending(csr); got != tc.pending {
			t.Errorf("%s: Pending = %v, want %v", tc.name, got, tc.pending)
		}
	}
}

// Published is the record and the status together: an IP in only one of them is not published.
func TestPublished(t *testing.T) {
	n := &corev1.Node{}
	n.Annotations = map[string]string{vocab.RecordAnnotation: "10.0.0.5, fd00::5,10.0.0.9,garbage"}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: corev1.NodeInternalIP, Address: "fd00::5"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
		{Type: corev1.NodeHostName, Address: "10.0.0.9"}}
	if got := fmt.Sprint(rules.Published(n)); got != "[10.0.0.5 fd00::5]" {
		t.Fatalf("Published = %s", got)
	}
}

// FactsFrom reads node-a's world of the table (rulestest.Facts) from listed objects: only the
// kubernetes Service in default and its EndpointSlices name the API server.
func TestFactsFrom(t *testing.T) {
	node := func(name, record string, addrs ...corev1.NodeAddress) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{vocab.RecordAnnotation: record}}}
		n.Status.Addresses = addrs
		return n
	}
	ip := func(t corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: t, Address: a}
	}
	svc := func(ns, name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}}}
	}
	slice := func(ns, service, ip string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}}}}
	}
	c := rules.Cluster{
		Nodes: rules.NodeIndex([]*corev1.Node{
			node("node-a", "10.0.0.5,fd00::5,203.0.113.7", ip(corev1.NodeInternalIP, "10.0.0.5"), ip(corev1.NodeInternalIP, "fd00::5"),
				ip(corev1.NodeExternalIP, "203.0.113.7")),
			node("node-b", "", ip(corev1.NodeInternalIP, "10.0.0.6"), ip(corev1.NodeInternalDNS, "node-b.example.internal.")),
		}),
		Services:       []*corev1.Service{svc("default", "kubernetes", "10.96.0.1"), svc("default", "web", "10.96.7.7"), svc("other", "kubernetes", "10.96.8.8")},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("default", "kubernetes", "10.0.0.1"), slice("default", "web", "10.0.0.7")},
		ServiceCIDRs:   []*networkingv1.ServiceCIDR{{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.1/12"}}}},
	}
	p := rules.Policy{DNSSuffixes: []string{"example.internal"}}
	got, want := rules.FactsFrom("node-a", c, p), rulestest.Facts()
	if fmt.Sprint(got.Node, got.Exists, got.Published, got.APIServer, got.ServiceCIDRs, got.Policy) !=
		fmt.Sprint(want.Node, want.Exists, want.Published, want.APIServer, want.ServiceCIDRs, want.Policy) {
		t.Errorf("FactsFrom = %+v\nwant         %+v", got, want)
	}
	for _, a := range []string{"10.0.0.5", "10.0.0.6", "10.0.0.7", "203.0.113.7"} {
		if g, w := got.OtherNodeWithIP(netip.MustParseAddr(a)), want.OtherNodeWithIP(netip.MustParseAddr(a)); g != w {
			t.Errorf("OtherNodeWithIP(%s) = %q, want %q", a, g, w)
		}
	}
	for _, n := range []string{"node-a", "node-b", "node-b.example.internal", "node-c"} {
		if g, w := got.OtherNodeWithName(n), want.OtherNodeWithName(n); g != w {
			t.Errorf("OtherNodeWithName(%s) = %q, want %q", n, g, w)
		}
	}
	if f := rules.FactsFrom("node-z", c, p); f.Exists || f.Published != nil {
		t.Errorf("a Node that does not exist: %+v", f)
	}
}
