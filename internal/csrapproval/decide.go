// Package csrapproval decides whether a nodeaddr agent may approve a kubelet-serving
// CertificateSigningRequest of its own Node. The decision is a pure function of the CSR and of what
// the agent knows first-hand: the addresses it publishes for its Node from its own resolution, the
// Node's DNS names, and the addresses it must never vouch for (other Nodes', the API server's).
//
// The signer (kube-controller-manager) checks the form of a kubelet-serving request
// (pkg/apis/certificates/helpers.go, ValidateKubeletServingCSR) but not whose addresses it names,
// and nothing in the cluster but an approver does. Approvers that trusted a SAN without checking
// who asked, or the Node's status that a kubelet may write itself, let one node impersonate another
// (Talos CCM, GHSA-87pw-5j2g-6376; k0s PR #8333). So every rule here is checked against the agent's
// own view, never against status.addresses alone.
package csrapproval

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"

	certv1 "k8s.io/api/certificates/v1"
)

// Reasons a CSR is left pending, as Event and metric label values. A CSR that is not this agent's
// business (another signer, another node, already decided) gets no reason: it is ignored silently,
// since another approver may own it.
const (
	ReasonNotNodeGroup     = "NotNodeGroup"     // spec.groups lacks system:nodes
	ReasonSubject          = "SubjectMismatch"  // CN is not system:node:<node> or O is not exactly [system:nodes]
	ReasonUsages           = "UsagesNotServing" // not {digital signature, server auth} (+ key encipherment)
	ReasonNoSAN            = "NoSubjectAltName" // neither a DNS nor an IP SAN
	ReasonEmailOrURI       = "EmailOrURISAN"    // an email or URI SAN
	ReasonIPNotPublished   = "IPNotPublished"   // an IP SAN that nodeaddr does not publish for this Node
	ReasonIPOfAnotherNode  = "IPOfAnotherNode"  // an IP SAN that another Node has
	ReasonIPOfAPIServer    = "IPOfAPIServer"    // an IP SAN of the API server
	ReasonDNSNotNode       = "DNSNameNotNode"   // a DNS SAN that is not one of the Node's names
	ReasonMalformedRequest = "MalformedRequest" // spec.request is not one PEM CERTIFICATE REQUEST with a valid signature
)

// Reasons lists every reason, for metrics that pre-create a series per reason.
func Reasons() []string {
	return []string{ReasonNotNodeGroup, ReasonSubject, ReasonUsages, ReasonNoSAN, ReasonEmailOrURI,
		ReasonIPNotPublished, ReasonIPOfAnotherNode, ReasonIPOfAPIServer, ReasonDNSNotNode, ReasonMalformedRequest}
}

// Facts are what the agent knows about its Node when it decides.
type Facts struct {
	// Node is the agent's Node name.
	Node string
	// Published are the addresses nodeaddr itself publishes for this Node, from its own resolution
	// (kernel-derived or discovered), not read back from status.addresses.
	Published []netip.Addr
	// DNSNames are the Node's Hostname, InternalDNS and ExternalDNS addresses.
	DNSNames []string
	// Forbidden are addresses no SAN may name: other Nodes' and the API server's endpoints. An
	// address in both Published and Forbidden is refused.
	OtherNodes, APIServer []netip.Addr
}

// Verdict is the decision on one CSR.
type Verdict struct {
	// Ours: the CSR is a pending kubelet-serving request of this agent's Node. Only then does the
	// agent act: approve it, or report Reason once.
	Ours bool
	// Approve: every rule holds.
	Approve bool
	// Reason and Message say why an Ours CSR is left pending.
	Reason, Message string
}

// Decide applies the rules to csr.
func Decide(csr *certv1.CertificateSigningRequest, f Facts) Verdict {
	if csr.Spec.SignerName != certv1.KubeletServingSignerName || csr.Spec.Username != "system:node:"+f.Node ||
		decided(csr) {
		return Verdict{}
	}
	if r, msg := check(csr, f); r != "" {
		return Verdict{Ours: true, Reason: r, Message: msg}
	}
	return Verdict{Ours: true, Approve: true}
}

// decided reports whether the CSR was approved, denied or has failed.
func decided(csr *certv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certv1.CertificateApproved, certv1.CertificateDenied, certv1.CertificateFailed:
			return true
		}
	}
	return false
}

// check returns the first rule csr breaks, with a message naming what broke it, or "".
func check(csr *certv1.CertificateSigningRequest, f Facts) (reason, msg string) {
	if !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return ReasonNotNodeGroup, fmt.Sprintf("requester groups %v lack system:nodes", csr.Spec.Groups)
	}
	if !servingUsages(csr.Spec.Usages) {
		return ReasonUsages, fmt.Sprintf("usages %v are not digital signature and server auth (key encipherment allowed)", csr.Spec.Usages)
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return ReasonMalformedRequest, err.Error()
	}
	if cn, o := req.Subject.CommonName, req.Subject.Organization; cn != "system:node:"+f.Node || !slices.Equal(o, []string{"system:nodes"}) {
		return ReasonSubject, fmt.Sprintf("subject CN=%q O=%v, want CN=%q O=[system:nodes]", cn, o, "system:node:"+f.Node)
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return ReasonEmailOrURI, fmt.Sprintf("email SANs %v, URI SANs %v", req.EmailAddresses, req.URIs)
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return ReasonNoSAN, "no DNS or IP subject alternative name"
	}
	for _, ip := range req.IPAddresses {
		if r, msg := checkIP(ip, f); r != "" {
			return r, msg
		}
	}
	for _, name := range req.DNSNames {
		if !slices.Contains(f.DNSNames, name) {
			return ReasonDNSNotNode, fmt.Sprintf("DNS name %q is not one of the Node's names %v", name, f.DNSNames)
		}
	}
	return "", ""
}

// checkIP checks one IP SAN: published by nodeaddr for this Node, and nobody else's.
func checkIP(raw []byte, f Facts) (reason, msg string) {
	ip, ok := netip.AddrFromSlice(raw)
	if !ok {
		return ReasonMalformedRequest, fmt.Sprintf("IP SAN of %d bytes", len(raw))
	}
	ip = ip.Unmap() // x509 keeps IPv4 SANs as 16-byte IPv4-mapped addresses
	switch {
	case slices.Contains(f.APIServer, ip):
		return ReasonIPOfAPIServer, fmt.Sprintf("IP %s is an address of the API server", ip)
	case slices.Contains(f.OtherNodes, ip):
		return ReasonIPOfAnotherNode, fmt.Sprintf("IP %s is an address of another Node", ip)
	case !slices.Contains(f.Published, ip):
		return ReasonIPNotPublished, fmt.Sprintf("IP %s is not an address nodeaddr publishes for this Node %v", ip, f.Published)
	}
	return "", ""
}

// servingUsages reports whether usages are exactly {digital signature, server auth}, optionally
// with key encipherment: the two sets the kubelet-serving signer accepts.
func servingUsages(usages []certv1.KeyUsage) bool {
	seen := map[certv1.KeyUsage]bool{}
	for _, u := range usages {
		switch u {
		case certv1.UsageDigitalSignature, certv1.UsageServerAuth, certv1.UsageKeyEncipherment:
			seen[u] = true
		default:
			return false
		}
	}
	return seen[certv1.UsageDigitalSignature] && seen[certv1.UsageServerAuth]
}

// parseRequest decodes the one PEM CERTIFICATE REQUEST of a CSR and checks its signature.
func parseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("spec.request holds no PEM CERTIFICATE REQUEST")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, fmt.Errorf("spec.request holds more than one PEM block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	return req, nil
}
