// Package rulestest is the approval rules' table, for the tests of every package that must agree
// with rules.Decide: the rules themselves, the approver, and `kubectl nodeaddr stale`'s advice.
package rulestest

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/netip"
	"net/url"
	"slices"
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
	s.Signer = cmp.Or(s.Signer, certv1.KubeletServingSignerName)
	s.Username = cmp.Or(s.Username, "system:node:node-a")
	s.CN = cmp.Or(s.CN, "system:node:node-a")
	s.Groups = orNil(s.Groups, []string{"system:nodes", "system:authenticated"})
	s.Org = orNil(s.Org, []string{"system:nodes"})
	s.Usages = orNil(s.Usages, []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth})
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

// orNil is v, or d when v is nil (an empty slice is kept: a case without SANs).
func orNil[T any](v, d []T) []T {
	if v == nil {
		return d
	}
	return v
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
	ips := func(ip ...string) CSRSpec { return CSRSpec{IPs: ip} }
	dns := func(name ...string) CSRSpec { return CSRSpec{DNS: name} }
	usages := func(u ...certv1.KeyUsage) CSRSpec { return CSRSpec{Usages: u} }
	// publish: a compromised host wrote ip into its own status and record.
	publish := func(ip string) func(*rules.Facts) {
		return func(f *rules.Facts) { f.Published = append(f.Published, netip.MustParseAddr(ip)) }
	}
	allow10 := func(f *rules.Facts) { f.IPPrefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")} }
	sign, server := certv1.UsageDigitalSignature, certv1.UsageServerAuth
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1}})
	return []Case{
		{"the kubelet's own request", CSRSpec{}, nil, approve},
		{"with key encipherment", usages(sign, certv1.UsageKeyEncipherment, server), nil, approve},
		{"IPv4 only, discovered ExternalIP", ips("10.0.0.5", "203.0.113.7"), nil, approve},
		{"DNS only: the node's name (first CSR at registration)", dns("node-a"), nil, approve},
		{"DNS name with an allowed suffix", dns("node-a.example.internal"), nil, approve},
		{"DNS name in upper case", dns("NODE-A"), nil, approve},
		{"DNS name in capitals with a trailing dot", dns("NODE-A."), nil, approve},
		{"both families, IPv6 first", ips("fd00::5", "10.0.0.5"), nil, approve},
		{"another node lists our name as its Hostname: no effect", CSRSpec{}, func(f *rules.Facts) {
			f.OtherNodeWithName = func(n string) string { return map[string]string{"node-a": "node-b"}[n] }
		}, approve},
		{"inside the allowed prefixes", ips("10.0.0.5"), allow10, approve},

		{"not in system:nodes", CSRSpec{Groups: []string{"system:authenticated"}}, nil, pending(rules.ReasonNotNodeGroup)},
		{"client auth usage", usages(sign, server, certv1.UsageClientAuth), nil, pending(rules.ReasonUsages)},
		{"no server auth", usages(sign), nil, pending(rules.ReasonUsages)},
		{"CN of another node", CSRSpec{CN: "system:node:node-b"}, nil, pending(rules.ReasonSubject)},
		{"requester is another node", CSRSpec{Username: "system:node:node-b"}, nil, pending(rules.ReasonSubject)},
		{"extra organization", CSRSpec{Org: []string{"system:nodes", "system:masters"}}, nil, pending(rules.ReasonSubject)},
		{"URI SAN", CSRSpec{URIs: []string{"spiffe://cluster/ns/kube-system"}}, nil, pending(rules.ReasonEmailOrURI)},
		{"email SAN", CSRSpec{Emails: []string{"admin@example.com"}}, nil, pending(rules.ReasonEmailOrURI)},
		{"no SAN", CSRSpec{IPs: []string{}, DNS: []string{}}, nil, pending(rules.ReasonNoSAN)},
		{"eleven SANs", CSRSpec{DNS: []string{"node-a"}, IPs: slices.Repeat([]string{"10.0.0.5"}, 10)}, nil,
			pending(rules.ReasonTooManySANs)},
		{"no such Node yet", CSRSpec{}, func(f *rules.Facts) { f.Exists = false }, pending(rules.ReasonNodeUnknown)},
		{"an IP the node does not have", ips("10.0.0.5", "10.0.0.99"), nil, pending(rules.ReasonIPNotPublished)},
		{"another node's IP", ips("10.0.0.6"), nil, pending(rules.ReasonIPOfAnotherNode)},
		{"an address both published and another Node's", ips("10.0.0.6"), publish("10.0.0.6"),
			pending(rules.ReasonIPOfAnotherNode)},
		{"the API server's IP", ips("10.0.0.1"), nil, pending(rules.ReasonIPOfAPIServer)},
		{"the kubernetes ClusterIP", ips("10.96.0.1"), nil, pending(rules.ReasonIPOfAPIServer)},
		{"a Service IP", ips("10.96.4.4"), nil, pending(rules.ReasonIPInServiceCIDR)},
		{"published but in the Service CIDR", ips("10.96.4.4"), publish("10.96.4.4"),
			pending(rules.ReasonIPInServiceCIDR)},
		{"loopback", ips("127.0.0.1"), nil, pending(rules.ReasonIPNotRoutable)},
		{"IPv6 loopback", ips("::1"), nil, pending(rules.ReasonIPNotRoutable)},
		{"link-local", ips("fe80::1"), nil, pending(rules.ReasonIPNotRoutable)},
		{"IPv4 link-local", ips("169.254.1.1"), nil, pending(rules.ReasonIPNotRoutable)},
		{"unspecified", ips("0.0.0.0"), nil, pending(rules.ReasonIPNotRoutable)},
		{"multicast", ips("224.0.0.1"), nil, pending(rules.ReasonIPNotRoutable)},
		{"outside the allowed prefixes", ips("203.0.113.7"), allow10, pending(rules.ReasonIPNotAllowed)},
		{"another Node's name", dns("node-a", "node-b"), nil, pending(rules.ReasonDNSOfAnotherNode)},
		{"another Node's DNS entry", dns("node-b.example.internal"), nil, pending(rules.ReasonDNSOfAnotherNode)},
		{"another Node's name in capitals with a trailing dot", dns("node-a", "NODE-B."), nil,
			pending(rules.ReasonDNSOfAnotherNode)},
		{"another Service's name under .svc", dns("node-a", "nodeaddr.kube-system.svc"), nil,
			pending(rules.ReasonDNSOfAPIServer)},
		{"kubernetes", dns("kubernetes"), nil, pending(rules.ReasonDNSOfAPIServer)},
		{"kubernetes.default", dns("kubernetes.default"), nil, pending(rules.ReasonDNSOfAPIServer)},
		{"kubernetes.default.svc", dns("kubernetes.default.svc"), nil, pending(rules.ReasonDNSOfAPIServer)},
		{"kubernetes.default.svc.cluster.local", dns("kubernetes.default.svc.cluster.local"), nil,
			pending(rules.ReasonDNSOfAPIServer)},
		{"a Service's name in another domain", dns("web.prod.svc.corp.example"),
			func(f *rules.Facts) { f.ClusterDomain = "corp.example" }, pending(rules.ReasonDNSOfAPIServer)},
		{"wildcard", dns("*.default.svc.cluster.local"), nil, pending(rules.ReasonDNSWildcard)},
		{"wildcard under the node", dns("*.node-a.example.internal"), nil, pending(rules.ReasonDNSWildcard)},
		{"a name that is not the node's", dns("database.corp"), nil, pending(rules.ReasonDNSNotNode)},
		{"a suffix not allowed", dns("node-a.evil.example"), nil, pending(rules.ReasonDNSNotNode)},
		{"the allowed suffix extended", dns("node-a", "node-a.example.internal.evil.example"), nil,
			pending(rules.ReasonDNSNotNode)},
		{"node name as a prefix", dns("node-a2"), nil, pending(rules.ReasonDNSNotNode)},
		{"not PEM", CSRSpec{Request: []byte("not a request")}, nil, pending(rules.ReasonMalformedRequest)},
		{"two PEM blocks", CSRSpec{Request: slices.Concat(block, block)}, nil, pending(rules.ReasonMalformedRequest)},
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
