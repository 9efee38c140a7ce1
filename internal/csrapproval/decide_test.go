package csrapproval

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
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

func TestDecide(t *testing.T) {
	facts := Facts{
		Node:       "node-a",
		Published:  addrs("10.0.0.5", "fd00::5", "203.0.113.7"),
		DNSNames:   []string{"node-a", "node-a.example.internal"},
		OtherNodes: addrs("10.0.0.6"),
		APIServer:  addrs("10.0.0.1"),
	}
	pending := func(reason string) Verdict { return Verdict{Ours: true, Reason: reason} }
	approve := Verdict{Ours: true, Approve: true}
	for _, tc := range []struct {
		name string
		spec csrSpec
		want Verdict
	}{
		{"the kubelet's own request", csrSpec{}, approve},
		{"with key encipherment", csrSpec{usages: []certv1.KeyUsage{certv1.UsageDigitalSignature,
			certv1.UsageKeyEncipherment, certv1.UsageServerAuth}}, approve},
		{"IPv4 only, discovered ExternalIP", csrSpec{ips: []string{"10.0.0.5", "203.0.113.7"}}, approve},
		{"DNS names only", csrSpec{dns: []string{"node-a.example.internal"}}, approve},

		// Not this agent's business: ignored silently, never reported.
		{"another signer", csrSpec{signer: certv1.KubeAPIServerClientKubeletSignerName}, Verdict{}},
		{"another node's identity", csrSpec{username: "system:node:node-b", cn: "system:node:node-b"}, Verdict{}},
		{"already approved", csrSpec{conditions: []certv1.RequestConditionType{certv1.CertificateApproved}}, Verdict{}},
		{"already denied", csrSpec{conditions: []certv1.RequestConditionType{certv1.CertificateDenied}}, Verdict{}},
		{"node name as a prefix", csrSpec{username: "system:node:node-a2"}, Verdict{}},

		// This node's requests that break a rule: left pending, with the reason.
		{"not in system:nodes", csrSpec{groups: []string{"system:authenticated"}}, pending(ReasonNotNodeGroup)},
		{"client auth usage", csrSpec{usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth,
			certv1.UsageClientAuth}}, pending(ReasonUsages)},
		{"no server auth", csrSpec{usages: []certv1.KeyUsage{certv1.UsageDigitalSignature}}, pending(ReasonUsages)},
		{"CN of another node", csrSpec{cn: "system:node:node-b"}, pending(ReasonSubject)},
		{"extra organization", csrSpec{org: []string{"system:nodes", "system:masters"}}, pending(ReasonSubject)},
		{"URI SAN", csrSpec{uris: []string{"spiffe://cluster/ns/kube-system"}}, pending(ReasonEmailOrURI)},
		{"email SAN", csrSpec{emails: []string{"admin@example.com"}}, pending(ReasonEmailOrURI)},
		{"no SAN", csrSpec{ips: []string{}, dns: []string{}}, pending(ReasonNoSAN)},
		{"an IP the node does not have", csrSpec{ips: []string{"10.0.0.5", "10.0.0.99"}}, pending(ReasonIPNotPublished)},
		{"another node's IP", csrSpec{ips: []string{"10.0.0.6"}}, pending(ReasonIPOfAnotherNode)},
		{"the API server's IP", csrSpec{ips: []string{"10.0.0.1"}}, pending(ReasonIPOfAPIServer)},
		{"a DNS name that is not the node's", csrSpec{dns: []string{"kubernetes.default.svc"}}, pending(ReasonDNSNotNode)},
		{"not PEM", csrSpec{request: []byte("not a request")}, pending(ReasonMalformedRequest)},
		{"two PEM blocks", csrSpec{request: []byte(strings.Repeat(string(pem.EncodeToMemory(
			&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1}})), 2))}, pending(ReasonMalformedRequest)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(build(t, tc.spec), facts)
			if got.Ours != tc.want.Ours || got.Approve != tc.want.Approve || got.Reason != tc.want.Reason {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
			if got.Ours && !got.Approve && got.Message == "" {
				t.Errorf("no message for reason %s", got.Reason)
			}
		})
	}
}

// An address that is both published and another Node's (a compromised host wrote it into its own
// status, or two Nodes claim one address) is refused: Forbidden wins over Published.
func TestDecideForbiddenWinsOverPublished(t *testing.T) {
	f := Facts{Node: "node-a", Published: addrs("10.0.0.5", "10.0.0.1"), APIServer: addrs("10.0.0.1")}
	if got := Decide(build(t, csrSpec{ips: []string{"10.0.0.1"}}), f); got.Approve || got.Reason != ReasonIPOfAPIServer {
		t.Fatalf("Decide = %+v, want pending %s", got, ReasonIPOfAPIServer)
	}
}

// A request whose signature does not verify (its SANs altered after signing) is malformed.
func TestDecideBadSignature(t *testing.T) {
	csr := build(t, csrSpec{})
	block, _ := pem.Decode(csr.Spec.Request)
	block.Bytes[len(block.Bytes)-3] ^= 0xff
	csr.Spec.Request = pem.EncodeToMemory(block)
	if got := Decide(csr, Facts{Node: "node-a", Published: addrs("10.0.0.5", "fd00::5"), DNSNames: []string{"node-a"}}); got.Approve || got.Reason != ReasonMalformedRequest {
		t.Fatalf("Decide = %+v, want pending %s", got, ReasonMalformedRequest)
	}
}
