package csrapproval

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// csrSpec describes a kubelet-serving CSR to build; zero fields take the legitimate value for node-a.
type csrSpec struct {
	signer, username, cn string
	groups, org, dns     []string
	usages               []certv1.KeyUsage
	ips                  []string
	emails, uris         []string
	conditions           []certv1.RequestConditionType
	request              []byte // replaces the generated PEM
}

var key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

func build(t *testing.T, s csrSpec) *certv1.CertificateSigningRequest {
	t.Helper()
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&s.signer, certv1.KubeletServingSignerName)
	def(&s.username, "system:node:node-a")
	def(&s.cn, "system:node:node-a")
	if s.groups == nil {
		s.groups = []string{"system:nodes", "system:authenticated"}
	}
	if s.org == nil {
		s.org = []string{"system:nodes"}
	}
	if s.usages == nil {
		s.usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	}
	if s.ips == nil && s.dns == nil {
		s.ips, s.dns = []string{"10.0.0.5", "fd00::5"}, []string{"node-a"}
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: s.cn, Organization: s.org},
		DNSNames: s.dns, EmailAddresses: s.emails}
	for _, ip := range s.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range s.uris {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, p)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	req := s.request
	if req == nil {
		req = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	csr := &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{
		SignerName: s.signer, Username: s.username, Groups: s.groups, Usages: s.usages, Request: req}}
	for _, c := range s.conditions {
		csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{Type: c})
	}
	return csr
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// facts is node-a's world: it published 10.0.0.5, fd00::5 and 203.0.113.7; node-b has 10.0.0.6 and
// the DNS entry node-b.example.internal; the API server is 10.0.0.1 behind the ClusterIP 10.96.0.1
// in the Service CIDR 10.96.0.0/12; the operator allows the suffix example.internal.
func facts() Facts {
	others := map[string]string{"10.0.0.6": "node-b"}
	names := map[string]string{"node-b": "node-b", "node-b.example.internal": "node-b"}
	return Facts{
		Node: "node-a", Exists: true,
		Published:         addrs("10.0.0.5", "fd00::5", "203.0.113.7"),
		OtherNodeWithIP:   func(ip netip.Addr) string { return others[ip.String()] },
		OtherNodeWithName: func(n string) string { return names[n] },
		APIServer:         addrs("10.0.0.1", "10.96.0.1"),
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		Policy:            Policy{DNSSuffixes: []string{"example.internal"}},
	}
}

func TestDecide(t *testing.T) {
	pending := func(reason string) Verdict { return Verdict{Reason: reason} }
	approve := Verdict{Approve: true}
	for _, tc := range []struct {
		name  string
		spec  csrSpec
		facts func(*Facts)
		want  Verdict
	}{
		{"the kubelet's own request", csrSpec{}, nil, approve},
		{"with key encipherment", csrSpec{usages: []certv1.KeyUsage{certv1.UsageDigitalSignature,
			certv1.UsageKeyEncipherment, certv1.UsageServerAuth}}, nil, approve},
		{"IPv4 only, discovered ExternalIP", csrSpec{ips: []string{"10.0.0.5", "203.0.113.7"}}, nil, approve},
		{"DNS only: the node's name (first CSR at registration)", csrSpec{dns: []string{"node-a"}}, nil, approve},
		{"DNS name with an allowed suffix", csrSpec{dns: []string{"node-a.example.internal"}}, nil, approve},
		{"DNS name in upper case", csrSpec{dns: []string{"NODE-A"}}, nil, approve},
		{"another node lists our name as its Hostname: no effect", csrSpec{}, func(f *Facts) {
			f.OtherNodeWithName = func(n string) string { return map[string]string{"node-a": "node-b"}[n] }
		}, approve},
		{"inside the allowed prefixes", csrSpec{ips: []string{"10.0.0.5"}}, func(f *Facts) {
			f.IPPrefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
		}, approve},

		{"not in system:nodes", csrSpec{groups: []string{"system:authenticated"}}, nil, pending(ReasonNotNodeGroup)},
		{"client auth usage", csrSpec{usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth,
			certv1.UsageClientAuth}}, nil, pending(ReasonUsages)},
		{"no server auth", csrSpec{usages: []certv1.KeyUsage{certv1.UsageDigitalSignature}}, nil, pending(ReasonUsages)},
		{"CN of another node", csrSpec{cn: "system:node:node-b"}, nil, pending(ReasonSubject)},
		{"requester is another node", csrSpec{username: "system:node:node-b"}, nil, pending(ReasonSubject)},
		{"extra organization", csrSpec{org: []string{"system:nodes", "system:masters"}}, nil, pending(ReasonSubject)},
		{"URI SAN", csrSpec{uris: []string{"spiffe://cluster/ns/kube-system"}}, nil, pending(ReasonEmailOrURI)},
		{"email SAN", csrSpec{emails: []string{"admin@example.com"}}, nil, pending(ReasonEmailOrURI)},
		{"no SAN", csrSpec{ips: []string{}, dns: []string{}}, nil, pending(ReasonNoSAN)},
		{"eleven SANs", csrSpec{dns: []string{"node-a"}, ips: []string{"10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5",
			"10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5"}}, nil, pending(ReasonTooManySANs)},
		{"no such Node yet", csrSpec{}, func(f *Facts) { f.Exists = false }, pending(ReasonNodeUnknown)},
		{"an IP the node does not have", csrSpec{ips: []string{"10.0.0.5", "10.0.0.99"}}, nil, pending(ReasonIPNotPublished)},
		{"another node's IP", csrSpec{ips: []string{"10.0.0.6"}}, nil, pending(ReasonIPOfAnotherNode)},
		{"the API server's IP", csrSpec{ips: []string{"10.0.0.1"}}, nil, pending(ReasonIPOfAPIServer)},
		{"the kubernetes ClusterIP", csrSpec{ips: []string{"10.96.0.1"}}, nil, pending(ReasonIPOfAPIServer)},
		{"a Service IP", csrSpec{ips: []string{"10.96.4.4"}}, nil, pending(ReasonIPInServiceCIDR)},
		{"published but in the Service CIDR", csrSpec{ips: []string{"10.96.4.4"}}, func(f *Facts) {
			f.Published = append(f.Published, netip.MustParseAddr("10.96.4.4"))
		}, pending(ReasonIPInServiceCIDR)},
		{"loopback", csrSpec{ips: []string{"127.0.0.1"}}, nil, pending(ReasonIPNotRoutable)},
		{"IPv6 loopback", csrSpec{ips: []string{"::1"}}, nil, pending(ReasonIPNotRoutable)},
		{"link-local", csrSpec{ips: []string{"fe80::1"}}, nil, pending(ReasonIPNotRoutable)},
		{"IPv4 link-local", csrSpec{ips: []string{"169.254.1.1"}}, nil, pending(ReasonIPNotRoutable)},
		{"unspecified", csrSpec{ips: []string{"0.0.0.0"}}, nil, pending(ReasonIPNotRoutable)},
		{"multicast", csrSpec{ips: []string{"224.0.0.1"}}, nil, pending(ReasonIPNotRoutable)},
		{"outside the allowed prefixes", csrSpec{ips: []string{"203.0.113.7"}}, func(f *Facts) {
			f.IPPrefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
		}, pending(ReasonIPNotAllowed)},
		{"another Node's name", csrSpec{dns: []string{"node-a", "node-b"}}, nil, pending(ReasonDNSOfAnotherNode)},
		{"another Node's DNS entry", csrSpec{dns: []string{"node-b.example.internal"}}, nil, pending(ReasonDNSOfAnotherNode)},
		{"kubernetes", csrSpec{dns: []string{"kubernetes"}}, nil, pending(ReasonDNSOfAPIServer)},
		{"kubernetes.default", csrSpec{dns: []string{"kubernetes.default"}}, nil, pending(ReasonDNSOfAPIServer)},
		{"kubernetes.default.svc", csrSpec{dns: []string{"kubernetes.default.svc"}}, nil, pending(ReasonDNSOfAPIServer)},
		{"kubernetes.default.svc.cluster.local", csrSpec{dns: []string{"kubernetes.default.svc.cluster.local"}}, nil, pending(ReasonDNSOfAPIServer)},
		{"a Service's name in another domain", csrSpec{dns: []string{"web.prod.svc.corp.example"}}, func(f *Facts) {
			f.ClusterDomain = "corp.example"
		}, pending(ReasonDNSOfAPIServer)},
		{"wildcard", csrSpec{dns: []string{"*.default.svc.cluster.local"}}, nil, pending(ReasonDNSWildcard)},
		{"wildcard under the node", csrSpec{dns: []string{"*.node-a.example.internal"}}, nil, pending(ReasonDNSWildcard)},
		{"a name that is not the node's", csrSpec{dns: []string{"database.corp"}}, nil, pending(ReasonDNSNotNode)},
		{"a suffix not allowed", csrSpec{dns: []string{"node-a.evil.example"}}, nil, pending(ReasonDNSNotNode)},
		{"node name as a prefix", csrSpec{dns: []string{"node-a2"}}, nil, pending(ReasonDNSNotNode)},
		{"not PEM", csrSpec{request: []byte("not a request")}, nil, pending(ReasonMalformedRequest)},
		{"two PEM blocks", csrSpec{request: []byte(strings.Repeat(string(pem.EncodeToMemory(
			&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1}})), 2))}, nil, pending(ReasonMalformedRequest)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := facts()
			if tc.facts != nil {
				tc.facts(&f)
			}
			got := Decide(build(t, tc.spec), f)
			if got.Approve != tc.want.Approve || got.Reason != tc.want.Reason {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
			if !got.Approve && got.Message == "" {
				t.Errorf("no message for reason %s", got.Reason)
			}
		})
	}
}

// Which CSRs are the approver's at all: kubelet-serving, from a node, and undecided.
func TestNodeOfAndPending(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    csrSpec
		node    string
		pending bool
	}{
		{"a kubelet's serving CSR", csrSpec{}, "node-a", true},
		{"another signer", csrSpec{signer: certv1.KubeAPIServerClientKubeletSignerName}, "", true},
		{"not a node", csrSpec{username: "system:serviceaccount:kube-system:nodeaddr"}, "", true},
		{"approved", csrSpec{conditions: []certv1.RequestConditionType{certv1.CertificateApproved}}, "node-a", false},
		{"denied", csrSpec{conditions: []certv1.RequestConditionType{certv1.CertificateDenied}}, "node-a", false},
		{"failed", csrSpec{conditions: []certv1.RequestConditionType{certv1.CertificateFailed}}, "node-a", false},
	} {
		csr := build(t, tc.spec)
		if got := NodeOf(csr); got != tc.node {
			t.Errorf("%s: NodeOf = %q, want %q", tc.name, got, tc.node)
		}
		if got := Pending(csr); got != tc.pending {
			t.Errorf("%s: Pending = %v, want %v", tc.name, got, tc.pending)
		}
	}
}

// An address that is both published and another Node's (a compromised host wrote it into its own
// status, or two Nodes claim one address) is refused.
func TestDecideOthersWinOverPublished(t *testing.T) {
	f := facts()
	f.Published = append(f.Published, netip.MustParseAddr("10.0.0.6"))
	if got := Decide(build(t, csrSpec{ips: []string{"10.0.0.6"}}), f); got.Approve || got.Reason != ReasonIPOfAnotherNode {
		t.Fatalf("Decide = %+v, want pending %s", got, ReasonIPOfAnotherNode)
	}
}

// A request whose signature does not verify (its SANs altered after signing) is malformed.
func TestDecideBadSignature(t *testing.T) {
	csr := build(t, csrSpec{})
	block, _ := pem.Decode(csr.Spec.Request)
	block.Bytes[len(block.Bytes)-3] ^= 0xff
	csr.Spec.Request = pem.EncodeToMemory(block)
	if got := Decide(csr, facts()); got.Approve || got.Reason != ReasonMalformedRequest {
		t.Fatalf("Decide = %+v, want pending %s", got, ReasonMalformedRequest)
	}
}

// Published is the record and the status together: an IP in only one of them is not published.
func TestPublished(t *testing.T) {
	n := &corev1.Node{}
	n.Annotations = map[string]string{RecordAnnotation: "10.0.0.5, fd00::5,10.0.0.9,garbage"}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: corev1.NodeInternalIP, Address: "fd00::5"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
		{Type: corev1.NodeHostName, Address: "10.0.0.9"}}
	if got := fmt.Sprint(Published(n)); got != "[10.0.0.5 fd00::5]" {
		t.Fatalf("Published = %s", got)
	}
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }
