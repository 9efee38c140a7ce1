// Package rulestest is the approval rules' table, for the tests of every package that must agree
// with rules.Decide: the rules themselves, the approver, and `kubectl nodeaddr stale`'s advice.
package rulestest

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

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
)

// CSRSpec describes a kubelet-serving CSR to build; zero fields take the legitimate value for node-a.
type CSRSpec struct {
	Signer, Username, CN string
	Groups, Org, DNS     []string
	Usages               []certv1.KeyUsage
	IPs                  []string
	Emails, URIs         []string
	Conditions           []certv1.RequestConditionType
	Request              []byte // replaces the generated PEM
	Tampered             bool   // a byte of the signed request flipped, as if its SANs were altered after signing
}

var key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

// Build makes the CSR s describes.
func Build(t testing.TB, s CSRSpec) *certv1.CertificateSigningRequest {
	t.Helper()
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&s.Signer, certv1.KubeletServingSignerName)
	def(&s.Username, "system:node:node-a")
	def(&s.CN, "system:node:node-a")
	if s.Groups == nil {
		s.Groups = []string{"system:nodes", "system:authenticated"}
	}
	if s.Org == nil {
		s.Org = []string{"system:nodes"}
	}
	if s.Usages == nil {
		s.Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	}
	if s.IPs == nil && s.DNS == nil {
		s.IPs, s.DNS = []string{"10.0.0.5", "fd00::5"}, []string{"node-a"}
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: s.CN, Organization: s.Org},
		DNSNames: s.DNS, EmailAddresses: s.Emails}
	for _, ip := range s.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range s.URIs {
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
	if s.Tampered {
		der[len(der)-3] ^= 0xff
	}
	req := s.Request
	if req == nil {
		req = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	csr := &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{
		SignerName: s.Signer, Username: s.Username, Groups: s.Groups, Usages: s.Usages, Request: req}}
	for _, c := range s.Conditions {
		csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{Type: c})
	}
	return csr
}

// Addrs parses IP addresses.
func Addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// Facts is node-a's world: it published 10.0.0.5, fd00::5 and 203.0.113.7; node-b has 10.0.0.6 and
// the DNS entry node-b.example.internal; the API server is 10.0.0.1 behind the ClusterIP 10.96.0.1
// in the Service CIDR 10.96.0.0/12; the operator allows the suffix example.internal.
func Facts() rules.Facts {
	others := map[string]string{"10.0.0.6": "node-b"}
	names := map[string]string{"node-b": "node-b", "node-b.example.internal": "node-b"}
	return rules.Facts{
		Node: "node-a", Exists: true,
		Published:         Addrs("10.0.0.5", "fd00::5", "203.0.113.7"),
		OtherNodeWithIP:   func(ip netip.Addr) string { return others[ip.String()] },
		OtherNodeWithName: func(n string) string { return names[n] },
		APIServer:         Addrs("10.96.0.1", "10.0.0.1"),
		ServiceCIDRs:      []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		Policy:            rules.Policy{DNSSuffixes: []string{"example.internal"}},
	}
}

// Case is one row of the table: a CSR, a change to Facts (nil: none) and the verdict.
type Case struct {
	Name  string
	Spec  CSRSpec
	Facts func(*rules.Facts)
	Want  rules.Verdict
}

// Cases is the table: every rule, and the legitimate requests it must let through.
func Cases() []Case {
	pending := func(reason string) rules.Verdict { return rules.Verdict{Reason: reason} }
	approve := rules.Verdict{Approve: true}
	return []Case{
		{"the kubelet's own request", CSRSpec{}, nil, approve},
		{"with key encipherment", CSRSpec{Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature,
			certv1.UsageKeyEncipherment, certv1.UsageServerAuth}}, nil, approve},
		{"IPv4 only, discovered ExternalIP", CSRSpec{IPs: []string{"10.0.0.5", "203.0.113.7"}}, nil, approve},
		{"DNS only: the node's name (first CSR at registration)", CSRSpec{DNS: []string{"node-a"}}, nil, approve},
		{"DNS name with an allowed suffix", CSRSpec{DNS: []string{"node-a.example.internal"}}, nil, approve},
		{"DNS name in upper case", CSRSpec{DNS: []string{"NODE-A"}}, nil, approve},
		{"another node lists our name as its Hostname: no effect", CSRSpec{}, func(f *rules.Facts) {
			f.OtherNodeWithName = func(n string) string { return map[string]string{"node-a": "node-b"}[n] }
		}, approve},
		{"inside the allowed prefixes", CSRSpec{IPs: []string{"10.0.0.5"}}, func(f *rules.Facts) {
			f.IPPrefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
		}, approve},

		{"not in system:nodes", CSRSpec{Groups: []string{"system:authenticated"}}, nil, pending(rules.ReasonNotNodeGroup)},
		{"client auth usage", CSRSpec{Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth,
			certv1.UsageClientAuth}}, nil, pending(rules.ReasonUsages)},
		{"no server auth", CSRSpec{Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature}}, nil, pending(rules.ReasonUsages)},
		{"CN of another node", CSRSpec{CN: "system:node:node-b"}, nil, pending(rules.ReasonSubject)},
		{"requester is another node", CSRSpec{Username: "system:node:node-b"}, nil, pending(rules.ReasonSubject)},
		{"extra organization", CSRSpec{Org: []string{"system:nodes", "system:masters"}}, nil, pending(rules.ReasonSubject)},
		{"URI SAN", CSRSpec{URIs: []string{"spiffe://cluster/ns/kube-system"}}, nil, pending(rules.ReasonEmailOrURI)},
		{"email SAN", CSRSpec{Emails: []string{"admin@example.com"}}, nil, pending(rules.ReasonEmailOrURI)},
		{"no SAN", CSRSpec{IPs: []string{}, DNS: []string{}}, nil, pending(rules.ReasonNoSAN)},
		{"eleven SANs", CSRSpec{DNS: []string{"node-a"}, IPs: []string{"10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5",
			"10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5", "10.0.0.5"}}, nil, pending(rules.ReasonTooManySANs)},
		{"no such Node yet", CSRSpec{}, func(f *rules.Facts) { f.Exists = false }, pending(rules.ReasonNodeUnknown)},
		{"an IP the node does not have", CSRSpec{IPs: []string{"10.0.0.5", "10.0.0.99"}}, nil, pending(rules.ReasonIPNotPublished)},
		{"another node's IP", CSRSpec{IPs: []string{"10.0.0.6"}}, nil, pending(rules.ReasonIPOfAnotherNode)},
		{"an address both published and another Node's", CSRSpec{IPs: []string{"10.0.0.6"}}, func(f *rules.Facts) {
			f.Published = append(f.Published, netip.MustParseAddr("10.0.0.6")) // a compromised host wrote it into its own status
		}, pending(rules.ReasonIPOfAnotherNode)},
		{"the API server's IP", CSRSpec{IPs: []string{"10.0.0.1"}}, nil, pending(rules.ReasonIPOfAPIServer)},
		{"the kubernetes ClusterIP", CSRSpec{IPs: []string{"10.96.0.1"}}, nil, pending(rules.ReasonIPOfAPIServer)},
		{"a Service IP", CSRSpec{IPs: []string{"10.96.4.4"}}, nil, pending(rules.ReasonIPInServiceCIDR)},
		{"published but in the Service CIDR", CSRSpec{IPs: []string{"10.96.4.4"}}, func(f *rules.Facts) {
			f.Published = append(f.Published, netip.MustParseAddr("10.96.4.4"))
		}, pending(rules.ReasonIPInServiceCIDR)},
		{"loopback", CSRSpec{IPs: []string{"127.0.0.1"}}, nil, pending(rules.ReasonIPNotRoutable)},
		{"IPv6 loopback", CSRSpec{IPs: []string{"::1"}}, nil, pending(rules.ReasonIPNotRoutable)},
		{"link-local", CSRSpec{IPs: []string{"fe80::1"}}, nil, pending(rules.ReasonIPNotRoutable)},
		{"IPv4 link-local", CSRSpec{IPs: []string{"169.254.1.1"}}, nil, pending(rules.ReasonIPNotRoutable)},
		{"unspecified", CSRSpec{IPs: []string{"0.0.0.0"}}, nil, pending(rules.ReasonIPNotRoutable)},
		{"multicast", CSRSpec{IPs: []string{"224.0.0.1"}}, nil, pending(rules.ReasonIPNotRoutable)},
		{"outside the allowed prefixes", CSRSpec{IPs: []string{"203.0.113.7"}}, func(f *rules.Facts) {
			f.IPPrefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
		}, pending(rules.ReasonIPNotAllowed)},
		{"another Node's name", CSRSpec{DNS: []string{"node-a", "node-b"}}, nil, pending(rules.ReasonDNSOfAnotherNode)},
		{"another Node's DNS entry", CSRSpec{DNS: []string{"node-b.example.internal"}}, nil, pending(rules.ReasonDNSOfAnotherNode)},
		{"kubernetes", CSRSpec{DNS: []string{"kubernetes"}}, nil, pending(rules.ReasonDNSOfAPIServer)},
		{"kubernetes.default", CSRSpec{DNS: []string{"kubernetes.default"}}, nil, pending(rules.ReasonDNSOfAPIServer)},
		{"kubernetes.default.svc", CSRSpec{DNS: []string{"kubernetes.default.svc"}}, nil, pending(rules.ReasonDNSOfAPIServer)},
		{"kubernetes.default.svc.cluster.local", CSRSpec{DNS: []string{"kubernetes.default.svc.cluster.local"}}, nil, pending(rules.ReasonDNSOfAPIServer)},
		{"a Service's name in another domain", CSRSpec{DNS: []string{"web.prod.svc.corp.example"}}, func(f *rules.Facts) {
			f.ClusterDomain = "corp.example"
		}, pending(rules.ReasonDNSOfAPIServer)},
		{"wildcard", CSRSpec{DNS: []string{"*.default.svc.cluster.local"}}, nil, pending(rules.ReasonDNSWildcard)},
		{"wildcard under the node", CSRSpec{DNS: []string{"*.node-a.example.internal"}}, nil, pending(rules.ReasonDNSWildcard)},
		{"a name that is not the node's", CSRSpec{DNS: []string{"database.corp"}}, nil, pending(rules.ReasonDNSNotNode)},
		{"a suffix not allowed", CSRSpec{DNS: []string{"node-a.evil.example"}}, nil, pending(rules.ReasonDNSNotNode)},
		{"node name as a prefix", CSRSpec{DNS: []string{"node-a2"}}, nil, pending(rules.ReasonDNSNotNode)},
		{"not PEM", CSRSpec{Request: []byte("not a request")}, nil, pending(rules.ReasonMalformedRequest)},
		{"two PEM blocks", CSRSpec{Request: []byte(strings.Repeat(string(pem.EncodeToMemory(
			&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1}})), 2))}, nil, pending(rules.ReasonMalformedRequest)},
		{"a signature that does not verify", CSRSpec{Tampered: true}, nil, pending(rules.ReasonMalformedRequest)},
	}
}

// Make builds c's CSR and facts.
func (c Case) Make(t testing.TB) (*certv1.CertificateSigningRequest, rules.Facts) {
	t.Helper()
	f := Facts()
	if c.Facts != nil {
		c.Facts(&f)
	}
	return Build(t, c.Spec), f
}
