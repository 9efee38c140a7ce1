package inspect

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules/rulestest"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

func hostPod(ns, name, node string, phase corev1.PodPhase, ips ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true}, Status: corev1.PodStatus{Phase: phase}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func TestStalePods(t *testing.T) {
	nodes := []corev1.Node{*node("a", "InternalIP", "10.0.0.2", "InternalIP", "fd00::2", "Hostname", "a"), *node("empty")}
	mirror := hostPod("kube-system", "etcd-a", "a", corev1.PodRunning, "10.0.0.1")
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	podNet := hostPod("default", "web", "a", corev1.PodRunning, "10.244.0.5")
	podNet.Spec.HostNetwork = false
	singular := hostPod("default", "old-status", "a", corev1.PodRunning)
	singular.Status.PodIP = "10.0.0.1"
	tests := []struct {
		name string
		pod  corev1.Pod
		want []Finding
	}{
		{"current addresses", hostPod("kube-system", "nodeaddr-x", "a", corev1.PodRunning, "10.0.0.2", "fd00::2"), nil},
		{"the old IPv4 address", hostPod("kube-system", "nodeaddr-x", "a", corev1.PodRunning, "10.0.0.1", "fd00::2"), []Finding{
			{Kind: KindPod, Namespace: "kube-system", Name: "nodeaddr-x", Node: "a", Where: "status.podIPs", Address: "10.0.0.1",
				State: StateStale, Fix: "kubectl -n kube-system delete pod nodeaddr-x"}}},
		{"both families old", hostPod("ns", "p", "a", corev1.PodPending, "10.0.0.9", "fd00::9"), []Finding{
			{Kind: KindPod, Namespace: "ns", Name: "p", Node: "a", Where: "status.podIPs", Address: "10.0.0.9", State: StateStale, Fix: "kubectl -n ns delete pod p"},
			{Kind: KindPod, Namespace: "ns", Name: "p", Node: "a", Where: "status.podIPs", Address: "fd00::9", State: StateStale, Fix: "kubectl -n ns delete pod p"}}},
		{"only status.podIP", singular, []Finding{{Kind: KindPod, Namespace: "default", Name: "old-status", Node: "a", Where: "status.podIPs",
			Address: "10.0.0.1", State: StateStale, Fix: "kubectl -n default delete pod old-status"}}},
		{"a static pod's mirror", mirror, []Finding{{Kind: KindPod, Namespace: "kube-system", Name: "etcd-a", Node: "a", Where: "status.podIPs",
			Address: "10.0.0.1", State: StateStale,
			Fix: "on node a: restart the static pod (move its manifest out of the kubelet's manifest directory and back)"}}},
		{"a pod on the pod network", podNet, nil},
		{"a finished pod", hostPod("ns", "job", "a", corev1.PodSucceeded, "10.0.0.1"), nil},
		{"a failed pod", hostPod("ns", "job", "a", corev1.PodFailed, "10.0.0.1"), nil},
		{"a Node with no address", hostPod("ns", "p", "empty", corev1.PodRunning, "10.0.0.1"), nil},
		{"a Node not checked", hostPod("ns", "p", "other", corev1.PodRunning, "10.0.0.1"), nil},
		{"not yet started", hostPod("ns", "p", "a", corev1.PodPending), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StalePods([]corev1.Pod{tt.pod}, nodeAddresses(nodes))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func slice(ns, name string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
}

func endpoint(ref *corev1.ObjectReference, ips ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: ips, TargetRef: ref}
}

func TestStaleEndpoints(t *testing.T) {
	stalePod := Finding{Kind: KindPod, Namespace: "ingress", Name: "ctrl-1", Node: "a", Where: "status.podIPs", Address: "10.0.0.1",
		State: StateStale, Fix: "kubectl -n ingress delete pod ctrl-1"}
	ref := &corev1.ObjectReference{Kind: "Pod", Namespace: "ingress", Name: "ctrl-1"}
	tests := []struct {
		name  string
		slice discoveryv1.EndpointSlice
		want  []Finding
	}{
		{"the stale pod's old address", slice("ingress", "ctrl-abc", endpoint(&corev1.ObjectReference{Kind: "Pod", Name: "ctrl-2"}, "10.0.0.7"),
			endpoint(ref, "10.0.0.1")), []Finding{{Kind: KindEndpointSlice, Namespace: "ingress", Name: "ctrl-abc", Node: "a",
			Where: "endpoints[1].addresses (pod ctrl-1)", Address: "10.0.0.1", State: StateStale, Fix: "kubectl -n ingress delete pod ctrl-1"}}},
		{"targetRef without namespace: the slice's", slice("ingress", "s", endpoint(&corev1.ObjectReference{Name: "ctrl-1"}, "10.0.0.1")),
			[]Finding{{Kind: KindEndpointSlice, Namespace: "ingress", Name: "s", Node: "a", Where: "endpoints[0].addresses (pod ctrl-1)",
				Address: "10.0.0.1", State: StateStale, Fix: "kubectl -n ingress delete pod ctrl-1"}}},
		{"the pod's endpoint with its new address", slice("ingress", "s", endpoint(ref, "10.0.0.2")), nil},
		{"same address, another pod", slice("ingress", "s", endpoint(&corev1.ObjectReference{Kind: "Pod", Name: "ctrl-2"}, "10.0.0.1")), nil},
		{"same name in another namespace", slice("other", "s", endpoint(&corev1.ObjectReference{Kind: "Pod", Name: "ctrl-1"}, "10.0.0.1")), nil},
		{"no targetRef (a manual slice)", slice("ingress", "s", endpoint(nil, "10.0.0.1")), nil},
		{"a targetRef that is no pod", slice("ingress", "s", endpoint(&corev1.ObjectReference{Kind: "Node", Name: "ctrl-1"}, "10.0.0.1")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StaleEndpoints([]discoveryv1.EndpointSlice{tt.slice}, []Finding{stalePod})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

var testKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

// cert is a serving certificate for ips, self-signed or signed by a CA named "kubernetes".
func cert(t *testing.T, selfSigned bool, ips ...string) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a@1"}, NotBefore: t0, NotAfter: t0.Add(time.Hour)}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	parent := tmpl
	if !selfSigned {
		parent = &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kubernetes"}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &testKey.PublicKey, testKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func csr(t *testing.T, name, user string, created time.Duration, approved bool, ips ...string) certificatesv1.CertificateSigningRequest {
	t.Helper()
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, testKey)
	if err != nil {
		t.Fatal(err)
	}
	groups := []string{"system:authenticated"}
	if strings.HasPrefix(user, "system:node:") {
		groups = append(groups, "system:nodes")
	}
	c := certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: *at(created)},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName, Username: user,
			Groups: groups, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
	if approved {
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	}
	return c
}

// recorded is n with every IP of its status in nodeaddr's approval record, as its agent writes it.
func recorded(n *corev1.Node) *corev1.Node {
	var ips []string
	for _, a := range n.Status.Addresses {
		ips = append(ips, a.Address)
	}
	n.Annotations = map[string]string{vocab.RecordAnnotation: strings.Join(ips, ",")}
	return n
}

// approval is the approver's view of a cluster of nodes and objs (*corev1.Service,
// *discoveryv1.EndpointSlice).
func approval(nodes []corev1.Node, objs ...any) rules.Cluster {
	c := rules.Cluster{Nodes: rules.NodeIndex(ptrs(nodes))}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			c.Services = append(c.Services, o)
		case *discoveryv1.EndpointSlice:
			c.EndpointSlices = append(c.EndpointSlices, o)
		}
	}
	return c
}

func ptrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

func TestStaleCerts(t *testing.T) {
	nodes := []corev1.Node{*recorded(node("a", "InternalIP", "10.0.0.2", "InternalIP", "fd00::2")),
		*node("b", "InternalIP", "10.0.0.3", "Hostname", "b.example")}
	ep := "10.0.0.2:10250"
	pendingCSR := csr(t, "csr-new", "system:node:a", -time.Minute, false, "10.0.0.2", "fd00::2")
	tests := []struct {
		name  string
		probe CertProbe
		csrs  []certificatesv1.CertificateSigningRequest
		want  []Finding
	}{
		{"every current address", CertProbe{Endpoint: ep, Cert: cert(t, false, "10.0.0.2", "fd00::2", "192.0.2.1")}, nil, nil},
		{"the old address, a CSR pending", CertProbe{Endpoint: ep, Cert: cert(t, false, "10.0.0.1", "fd00::2")},
			[]certificatesv1.CertificateSigningRequest{pendingCSR}, []Finding{{Kind: KindServingCert, Name: "a", Node: "a",
				Where: "kubelet serving certificate at 10.0.0.2:10250: IP SANs lack 10.0.0.2", Address: "10.0.0.1", State: StateStale,
				Fix: "kubectl certificate approve csr-new"}}},
		{"the old address, the kubelet's CSR beside ones an approver must refuse", CertProbe{Endpoint: ep, Cert: cert(t, false, "10.0.0.1", "fd00::2")},
			[]certificatesv1.CertificateSigningRequest{
				csr(t, "attack-other-ip", "system:node:a", -time.Second, false, "10.0.0.2", "fd00::2", "10.0.0.77"),
				csr(t, "attack-old-ip", "system:node:a", -time.Second, false, "10.0.0.1"),
				csr(t, "csr-older", "system:node:a", -2*time.Minute, false, "10.0.0.2"),
				pendingCSR,
				csr(t, "csr-approved", "system:node:a", -time.Second, true, "10.0.0.2", "fd00::2"),
			}, []Finding{{Kind: KindServingCert, Name: "a", Node: "a",
				Where: "kubelet serving certificate at 10.0.0.2:10250: IP SANs lack 10.0.0.2", Address: "10.0.0.1", State: StateStale,
				Fix: "kubectl certificate approve csr-new"}}},
		// The newest CSR with the missing address also names another Node: the rules refuse it, the
		// older one is the fix.
		{"the newest CSR refused, an older one approved", CertProbe{Endpoint: ep, Cert: cert(t, false, "10.0.0.1", "fd00::2")},
			[]certificatesv1.CertificateSigningRequest{csrDNS(t, "attack-dns", -time.Second, "b.example", "10.0.0.2"),
				csr(t, "csr-older", "system:node:a", -2*time.Minute, false, "10.0.0.2")}, []Finding{{Kind: KindServingCert, Name: "a", Node: "a",
				Where: "kubelet serving certificate at 10.0.0.2:10250: IP SANs lack 10.0.0.2", Address: "10.0.0.1", State: StateStale,
				Fix: "kubectl certificate approve csr-older"}}},
		{"only a CSR the rules refuse", CertProbe{Endpoint: ep, Cert: cert(t, false, "10.0.0.1", "fd00::2")},
			[]certificatesv1.CertificateSigningRequest{csrDNS(t, "attack-dns", -time.Second, "b.example", "10.0.0.2")}, []Finding{{Kind: KindServingCert,
				Name: "a", Node: "a", Where: "kubelet serving certificate at 10.0.0.2:10250: IP SANs lack 10.0.0.2", Address: "10.0.0.1", State: StateStale,
				Fix: "on node a: restart the kubelet (it files a new kubelet-serving CSR)"}}},
		{"the old address, no CSR", CertProbe{Endpoint: ep, Cert: cert(t, false, "10.0.0.1", "fd00::1")},
			[]certificatesv1.CertificateSigningRequest{csr(t, "csr-other", "system:node:b", -time.Minute, false, "10.0.0.2")}, []Finding{{Kind: KindServingCert, Name: "a", Node: "a",
				Where: "kubelet serving certificate at 10.0.0.2:10250: IP SANs lack 10.0.0.2,fd00::2", Address: "10.0.0.1,fd00::1", State: StateStale,
				Fix: "on node a: restart the kubelet (it files a new kubelet-serving CSR)"}}},
		{"self-signed, without IP SANs", CertProbe{Endpoint: ep, Cert: cert(t, true)}, nil, []Finding{{Kind: KindServingCert, Name: "a", Node: "a",
			Where: "kubelet serving certificate at 10.0.0.2:10250: IP SANs lack 10.0.0.2,fd00::2", Address: "-", State: StateStale,
			Fix: "on node a: remove the kubelet's self-signed kubelet.crt and kubelet.key (its --cert-dir) and restart the kubelet"}}},
		{"unreachable: unknown", CertProbe{Endpoint: ep, Err: errors.New("i/o timeout")}, nil, []Finding{{Kind: KindServingCert, Name: "a", Node: "a",
			Where: "kubelet serving certificate at 10.0.0.2:10250 (i/o timeout)", Address: "unknown", State: StateUnknown, Fix: "-"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StaleCerts(Snapshot{Nodes: nodes[:1], Certs: map[string]CertProbe{"a": tt.probe}, CSRs: tt.csrs,
				Approval: approval(nodes)}, nodeAddresses(nodes[:1]))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if (CountStale(got) > 0) != (len(tt.want) > 0 && tt.want[0].State == StateStale) {
				t.Errorf("CountStale = %v", CountStale(got))
			}
		})
	}
}

// csrDNS is node a's CSR for ips and the DNS name dns.
func csrDNS(t *testing.T, name string, created time.Duration, dns string, ips ...string) certificatesv1.CertificateSigningRequest {
	t.Helper()
	c := csr(t, name, "system:node:a", created, false, ips...)
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}, DNSNames: []string{dns}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, testKey)
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	return c
}

// A pending CSR's fix is the approver's verdict on the facts listed: approve only what it approves,
// deny with its reason what it refuses, and nothing when a fact could not be read.
func TestPendingCSRs(t *testing.T) {
	nodes := []corev1.Node{*recorded(node("a", "InternalIP", "10.0.0.2")), *node("c", "InternalIP", "10.0.0.4")}
	cluster := approval(nodes, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1"}})
	other := csr(t, "csr-client", "system:node:a", -time.Hour, false)
	other.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
	tests := []struct {
		name    string
		csr     certificatesv1.CertificateSigningRequest
		all     bool
		unknown string
		want    []Finding
	}{
		{"pending 6m, the Node's address", csr(t, "csr-1", "system:node:a", -6*time.Minute, false, "10.0.0.2"), false, "",
			[]Finding{{Kind: KindCSR, Name: "csr-1", Node: "a", Where: "spec.request IP SANs, pending 6m", Address: "10.0.0.2", State: StateStale,
				Fix: "kubectl certificate approve csr-1"}}},
		{"pending, an old address", csr(t, "csr-2", "system:node:a", -time.Hour, false, "10.0.0.1", "10.0.0.2"), false, "",
			[]Finding{{Kind: KindCSR, Name: "csr-2", Node: "a",
				Where:   "spec.request IP SANs, pending 1h, refused (IPNotPublished): IP 10.0.0.1 is not an address nodeaddr published for Node a [10.0.0.2]",
				Address: "10.0.0.1,10.0.0.2", State: StateStale, Fix: "kubectl certificate deny csr-2"}}},
		{"the API server's address", csr(t, "csr-api", "system:node:a", -time.Hour, false, "10.0.0.2", "10.96.0.1"), false, "",
			[]Finding{{Kind: KindCSR, Name: "csr-api", Node: "a",
				Where:   "spec.request IP SANs, pending 1h, refused (IPOfAPIServer): IP 10.96.0.1 is an address of the API server",
				Address: "10.0.0.2,10.96.0.1", State: StateStale, Fix: "kubectl certificate deny csr-api"}}},
		// The rule stale had of its own, the IP SANs among status.addresses, advised approving this.
		{"in status.addresses, but not in nodeaddr's record", csr(t, "csr-c", "system:node:c", -time.Hour, false, "10.0.0.4"), false, "",
			[]Finding{{Kind: KindCSR, Name: "csr-c", Node: "c",
				Where:   "spec.request IP SANs, pending 1h, refused (IPNotPublished): IP 10.0.0.4 is not an address nodeaddr published for Node c []",
				Address: "10.0.0.4", State: StateStale, Fix: "kubectl certificate deny csr-c"}}},
		{"another Node's name", csrDNS(t, "csr-dns", -time.Hour, "c", "10.0.0.2"), false, "",
			[]Finding{{Kind: KindCSR, Name: "csr-dns", Node: "a",
				Where:   `spec.request IP SANs, pending 1h, refused (DNSNameOfAnotherNode): DNS name "c" belongs to Node c`,
				Address: "10.0.0.2", State: StateStale, Fix: "kubectl certificate deny csr-dns"}}},
		{"a fact not read: no advice to approve", csr(t, "csr-1", "system:node:a", -time.Hour, false, "10.0.0.2"), false, "list servicecidrs: forbidden",
			[]Finding{{Kind: KindCSR, Name: "csr-1", Node: "a",
				Where:   "spec.request IP SANs, pending 1h, cannot tell whether the approver would approve it: list servicecidrs: forbidden",
				Address: "10.0.0.2", State: StateStale, Fix: "-"}}},
		{"a fact not read, refused anyway", csr(t, "csr-2", "system:node:a", -time.Hour, false, "10.0.0.1"), false, "list servicecidrs: forbidden",
			[]Finding{{Kind: KindCSR, Name: "csr-2", Node: "a",
				Where:   "spec.request IP SANs, pending 1h, refused (IPNotPublished): IP 10.0.0.1 is not an address nodeaddr published for Node a [10.0.0.2]",
				Address: "10.0.0.1", State: StateStale, Fix: "kubectl certificate deny csr-2"}}},
		{"pending 4m", csr(t, "csr-3", "system:node:a", -4*time.Minute, false, "10.0.0.2"), false, "", nil},
		{"approved", csr(t, "csr-4", "system:node:a", -time.Hour, true, "10.0.0.2"), false, "", nil},
		{"another signer", other, false, "", nil},
		{"a Node not checked", csr(t, "csr-5", "system:node:b", -time.Hour, false, "10.0.0.2"), false, "", nil},
		{"a Node that does not exist, all Nodes checked", csr(t, "csr-5", "system:node:b", -time.Hour, false, "10.0.0.2"), true, "",
			[]Finding{{Kind: KindCSR, Name: "csr-5", Node: "b", Where: `spec.request IP SANs, pending 1h, refused (NodeUnknown): no Node "b" is known (yet)`,
				Address: "10.0.0.2", State: StateStale, Fix: "kubectl certificate deny csr-5"}}},
		{"a requester that is no Node", csr(t, "csr-6", "mallory", -time.Hour, false, "10.0.0.2"), true, "",
			[]Finding{{Kind: KindCSR, Name: "csr-6", Node: "",
				Where:   "spec.request IP SANs, pending 1h, refused (NotNodeGroup): requester groups [system:authenticated] lack system:nodes",
				Address: "10.0.0.2", State: StateStale, Fix: "kubectl certificate deny csr-6"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Snapshot{CSRs: []certificatesv1.CertificateSigningRequest{tt.csr}, AllNodes: tt.all, Now: t0, PendingAfter: 5 * time.Minute,
				Approval: cluster, ApprovalUnknown: tt.unknown}
			got := PendingCSRs(s, nodeAddresses(nodes))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestAdviceAgreesWithTheApprover: on every case of the approver's table, stale advises approving
// a CSR exactly when the approver approves it, names the approver's reason when it refuses, and
// never advises approving when a fact is missing.
func TestAdviceAgreesWithTheApprover(t *testing.T) {
	for _, tc := range rulestest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			c, f := tc.Make(t)
			c.Name = "csr-x"
			v := rules.Decide(c, f)
			if v.Approve != tc.Want.Approve {
				t.Fatalf("Decide = %+v, the table wants %+v", v, tc.Want)
			}
			fix, why := Advice(c, f, "")
			if (fix == "kubectl certificate approve csr-x") != v.Approve {
				t.Errorf("advice %q (%s), approver %+v", fix, why, v)
			}
			if !v.Approve && (fix != "kubectl certificate deny csr-x" || !strings.Contains(why, "("+v.Reason+")")) {
				t.Errorf("refused as %s: advice %q, %q", v.Reason, fix, why)
			}
			if fix, why := Advice(c, f, "list servicecidrs: forbidden"); strings.HasPrefix(fix, "kubectl certificate approve") {
				t.Errorf("a fact missing, advice %q (%s)", fix, why)
			}
		})
	}
}

// TestStaleOrder: every rule at once, listed by Node, then pods, slices, certificate, CSRs.
func TestStaleOrder(t *testing.T) {
	s := Snapshot{
		Nodes: []corev1.Node{*node("b", "InternalIP", "10.0.1.2"), *node("a", "InternalIP", "10.0.0.2")},
		Pods: []corev1.Pod{hostPod("z", "p", "a", corev1.PodRunning, "10.0.0.1"), hostPod("y", "q", "b", corev1.PodRunning, "10.0.1.1"),
			hostPod("x", "r", "a", corev1.PodRunning, "10.0.0.1")},
		Slices: []discoveryv1.EndpointSlice{slice("z", "svc", endpoint(&corev1.ObjectReference{Kind: "Pod", Name: "p"}, "10.0.0.1"))},
		CSRs:   []certificatesv1.CertificateSigningRequest{csr(t, "csr-a", "system:node:a", -time.Hour, false, "10.0.0.2")},
		Certs:  map[string]CertProbe{"a": {Endpoint: "10.0.0.2:10250", Cert: cert(t, false, "10.0.0.1")}},
		Now:    t0, PendingAfter: 5 * time.Minute,
	}
	var got []string
	for _, f := range Stale(s) {
		got = append(got, fmt.Sprintf("%s %s/%s/%s", f.Node, f.Kind, f.Namespace, f.Name))
	}
	want := []string{"a pod/x/r", "a pod/z/p", "a endpointslice/z/svc", "a node//a", "a csr//csr-a", "b pod/y/q"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}
