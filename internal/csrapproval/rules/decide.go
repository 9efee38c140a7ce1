// Package rules is the verdict on a kubelet-serving CSR (Decide) and the facts it reads (FactsFrom),
// and nothing else: the central approver (internal/csrapproval) gathers the facts from its
// informers, `kubectl nodeaddr stale` from what it lists with the operator's credentials, both
// through FactsFrom, and both ask Decide, so the plugin never advises approving what the approver
// refuses. It builds on every platform, as the plugin does.
//
// The signer (kube-controller-manager) checks the form of a kubelet-serving request
// (pkg/apis/certificates/helpers.go, ValidateKubeletServingCSR) but not whose addresses it names,
// and nothing in the cluster but an approver does. The rules below are those the public advisories
// taught: the node's identity comes from who asked (spec.username), never from a SAN (Talos CCM,
// GHSA-87pw-5j2g-6376); DNS SANs are the node's own name only, never another Node's nor an
// in-cluster name (talos-cloud-controller-manager PR 360, cloud-provider-gcp 185, k0s PR 8333); IP
// SANs are addresses nodeaddr published for that Node and nobody else's, never the API server's,
// the Service network's, loopback, link-local or multicast; the number of SANs is capped.
package rules

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/nodeindex"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// Reasons a CSR is left pending, as Event and metric label values.
const (
	ReasonNotNodeGroup     = "NotNodeGroup"         // spec.groups lacks system:nodes
	ReasonSubject          = "SubjectMismatch"      // CN is not spec.username or O is not exactly [system:nodes]
	ReasonUsages           = "UsagesNotServing"     // not {digital signature, server auth} (+ key encipherment)
	ReasonNoSAN            = "NoSubjectAltName"     // neither a DNS nor an IP SAN
	ReasonEmailOrURI       = "EmailOrURISAN"        // an email or URI SAN
	ReasonTooManySANs      = "TooManySANs"          // more SANs than --max-sans
	ReasonNodeUnknown      = "NodeUnknown"          // no Node of that name (yet)
	ReasonIPNotPublished   = "IPNotPublished"       // an IP SAN nodeaddr did not publish for this Node
	ReasonIPOfAnotherNode  = "IPOfAnotherNode"      // an IP SAN another Node lists
	ReasonIPOfAPIServer    = "IPOfAPIServer"        // an IP SAN of the API server (endpoints, kubernetes Service)
	ReasonIPInServiceCIDR  = "IPInServiceCIDR"      // an IP SAN inside the cluster's Service CIDRs
	ReasonIPNotRoutable    = "IPNotRoutable"        // loopback, link-local, unspecified or multicast
	ReasonIPNotAllowed     = "IPNotAllowed"         // outside --allowed-ip-prefixes
	ReasonDNSNotNode       = "DNSNameNotNode"       // a DNS SAN that is neither the node's name nor <name>.<allowed suffix>
	ReasonDNSOfAnotherNode = "DNSNameOfAnotherNode" // a DNS SAN that is another Node's name or DNS entry
	ReasonDNSOfAPIServer   = "DNSNameOfAPIServer"   // kubernetes, kubernetes.default…, or any name under .svc
	ReasonDNSWildcard      = "DNSWildcard"          // a DNS SAN with a wildcard
	ReasonMalformedRequest = "MalformedRequest"     // spec.request is not one PEM CERTIFICATE REQUEST with a valid signature
	nodeUsernamePrefix     = "system:node:"
)

// Reasons lists every reason, for metrics that pre-create a series per reason.
func Reasons() []string {
	return []string{ReasonNotNodeGroup, ReasonSubject, ReasonUsages, ReasonNoSAN, ReasonEmailOrURI,
		ReasonTooManySANs, ReasonNodeUnknown, ReasonIPNotPublished, ReasonIPOfAnotherNode, ReasonIPOfAPIServer,
		ReasonIPInServiceCIDR, ReasonIPNotRoutable, ReasonIPNotAllowed, ReasonDNSNotNode, ReasonDNSOfAnotherNode,
		ReasonDNSOfAPIServer, ReasonDNSWildcard, ReasonMalformedRequest}
}

// Facts are what the approver knows when it decides on a CSR of Node: that Node's record, the
// cluster's view (other Nodes, the API server, the Service network) and the operator's settings.
type Facts struct {
	// Node is the requester's Node name (from spec.username); Exists whether such a Node is known.
	Node   string
	Exists bool
	// Published are the IPs nodeaddr published for Node (see Published).
	Published []netip.Addr
	// OtherNodeWithIP and OtherNodeWithName name another Node that lists the IP in its status, or
	// whose name or Hostname/InternalDNS/ExternalDNS entry is the (lower-case) name; "" for none.
	OtherNodeWithIP   func(netip.Addr) string
	OtherNodeWithName func(string) string
	// APIServer are the API server's addresses (the kubernetes Service's endpoints and ClusterIPs);
	// ServiceCIDRs the cluster's Service network.
	APIServer    []netip.Addr
	ServiceCIDRs []netip.Prefix
	Policy
}

// Policy is the operator's part of the rules (flags of `nodeaddr approver`).
type Policy struct {
	// ClusterDomain is the cluster's DNS domain (cluster.local when empty).
	ClusterDomain string
	// DNSSuffixes: besides the node's name, <name>.<suffix> is allowed for each.
	DNSSuffixes []string
	// IPPrefixes, when not empty, must contain every IP SAN (a second factor).
	IPPrefixes []netip.Prefix
	// MaxSANs caps the DNS and IP SANs of one CSR (10 when 0).
	MaxSANs int
	// MaxPendingPerNode caps the pending CSRs of one node decided in one pass, newest first (10
	// when 0): a node filing thousands delays only its own older ones.
	MaxPendingPerNode int
}

// WithDefaults is p with every zero field at its default.
func (p Policy) WithDefaults() Policy {
	p.ClusterDomain = cmp.Or(p.ClusterDomain, "cluster.local")
	if p.MaxSANs <= 0 {
		p.MaxSANs = 10
	}
	if p.MaxPendingPerNode <= 0 {
		p.MaxPendingPerNode = 10
	}
	return p
}

// Verdict is the decision on one CSR: Approve when every rule holds, else Reason and Message say
// which rule broke and on what.
type Verdict struct {
	Approve         bool
	Reason, Message string
}

// NodeOf is the Node a kubelet-serving CSR asks for: the node name of its requester
// (system:node:NAME), "" when the requester is not a node or the CSR is not kubelet-serving.
func NodeOf(csr *certv1.CertificateSigningRequest) string {
	if name, ok := strings.CutPrefix(csr.Spec.Username, nodeUsernamePrefix); ok &&
		csr.Spec.SignerName == certv1.KubeletServingSignerName {
		return name
	}
	return ""
}

// Pending reports whether the CSR is neither approved, denied nor failed.
func Pending(csr *certv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certv1.CertificateApproved, certv1.CertificateDenied, certv1.CertificateFailed:
			return false
		}
	}
	return true
}

// Decide applies the rules to a pending kubelet-serving CSR of f.Node.
func Decide(csr *certv1.CertificateSigningRequest, f Facts) Verdict {
	f.Policy = f.WithDefaults()
	r, msg := check(csr, f)
	return Verdict{Approve: r == "", Reason: r, Message: msg}
}

// check returns the first rule csr breaks, with a message naming what broke it, or "".
func check(csr *certv1.CertificateSigningRequest, f Facts) (reason, msg string) {
	if !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return ReasonNotNodeGroup, fmt.Sprintf("requester groups %v lack system:nodes", csr.Spec.Groups)
	}
	if !servingUsages(csr.Spec.Usages) {
		return ReasonUsages, fmt.Sprintf("usages %v are not digital signature and server auth (key encipherment allowed)", csr.Spec.Usages)
	}
	req, err := ParseRequest(csr.Spec.Request)
	if err != nil {
		return ReasonMalformedRequest, err.Error()
	}
	want := nodeUsernamePrefix + f.Node
	if cn, o := req.Subject.CommonName, req.Subject.Organization; csr.Spec.Username != want || cn != want || !slices.Equal(o, []string{"system:nodes"}) {
		return ReasonSubject, fmt.Sprintf("requester %q, subject CN=%q O=%v, want CN=%q O=[system:nodes]", csr.Spec.Username, cn, o, want)
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return ReasonEmailOrURI, fmt.Sprintf("email SANs %v, URI SANs %v", req.EmailAddresses, req.URIs)
	}
	if n := len(req.DNSNames) + len(req.IPAddresses); n == 0 {
		return ReasonNoSAN, "no DNS or IP subject alternative name"
	} else if n > f.MaxSANs {
		return ReasonTooManySANs, fmt.Sprintf("%d subject alternative names, at most %d allowed", n, f.MaxSANs)
	}
	if !f.Exists {
		return ReasonNodeUnknown, fmt.Sprintf("no Node %q is known (yet)", f.Node)
	}
	for _, name := range req.DNSNames {
		if r, msg := checkDNS(name, f); r != "" {
			return r, msg
		}
	}
	for _, raw := range req.IPAddresses {
		if r, msg := checkIP(raw, f); r != "" {
			return r, msg
		}
	}
	return "", ""
}

// checkDNS checks one DNS SAN: the node's own name, or <name>.<suffix> for an allowed suffix, and
// never a wildcard, an in-cluster name or another Node's name.
func checkDNS(name string, f Facts) (reason, msg string) {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	node := strings.ToLower(f.Node)
	domain := strings.Trim(strings.ToLower(f.ClusterDomain), ".")
	switch {
	case strings.Contains(n, "*"):
		return ReasonDNSWildcard, fmt.Sprintf("DNS name %q is a wildcard", name)
	case n == "kubernetes" || strings.HasPrefix(n, "kubernetes.default") || strings.HasSuffix(n, ".svc") ||
		strings.HasSuffix(n, ".svc."+domain) || n == domain || strings.HasSuffix(n, "."+domain):
		return ReasonDNSOfAPIServer, fmt.Sprintf("DNS name %q is an in-cluster name (the API server's or a Service's)", name)
	}
	if n == node {
		return "", "" // Node names are unique: another Node listing it in its status claims nothing
	}
	if other := f.OtherNodeWithName(n); other != "" {
		return ReasonDNSOfAnotherNode, fmt.Sprintf("DNS name %q belongs to Node %s", name, other)
	}
	for _, s := range f.DNSSuffixes {
		if s = strings.Trim(strings.ToLower(s), "."); s != "" && n == node+"."+s {
			return "", ""
		}
	}
	return ReasonDNSNotNode, fmt.Sprintf("DNS name %q is not the node's name %q (allowed suffixes %v)", name, f.Node, f.DNSSuffixes)
}

// checkIP checks one IP SAN: routable, nobody else's, allowed, and published by nodeaddr for this
// Node.
func checkIP(raw []byte, f Facts) (reason, msg string) {
	ip, ok := netip.AddrFromSlice(raw)
	if !ok {
		return ReasonMalformedRequest, fmt.Sprintf("IP SAN of %d bytes", len(raw))
	}
	ip = ip.Unmap() // x509 keeps IPv4 SANs as 16-byte IPv4-mapped addresses
	if ip.IsUnspecified() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() {
		return ReasonIPNotRoutable, fmt.Sprintf("IP %s is unspecified, loopback, link-local or multicast", ip)
	}
	if slices.Contains(f.APIServer, ip) {
		return ReasonIPOfAPIServer, fmt.Sprintf("IP %s is an address of the API server", ip)
	}
	for _, p := range f.ServiceCIDRs {
		if p.Contains(ip) {
			return ReasonIPInServiceCIDR, fmt.Sprintf("IP %s is inside the Service CIDR %s", ip, p)
		}
	}
	if other := f.OtherNodeWithIP(ip); other != "" {
		return ReasonIPOfAnotherNode, fmt.Sprintf("IP %s is an address of Node %s", ip, other)
	}
	if len(f.IPPrefixes) > 0 && !slices.ContainsFunc(f.IPPrefixes, func(p netip.Prefix) bool { return p.Contains(ip) }) {
		return ReasonIPNotAllowed, fmt.Sprintf("IP %s is outside the allowed prefixes %v", ip, f.IPPrefixes)
	}
	if !slices.Contains(f.Published, ip) {
		return ReasonIPNotPublished, fmt.Sprintf("IP %s is not an address nodeaddr published for Node %s %v", ip, f.Node, f.Published)
	}
	return "", ""
}

// servingUsages reports whether usages are exactly {digital signature, server auth}, optionally
// with key encipherment: the two sets the kubelet-serving signer accepts.
func servingUsages(usages []certv1.KeyUsage) bool {
	sign, server := certv1.UsageDigitalSignature, certv1.UsageServerAuth
	allowed := []certv1.KeyUsage{sign, server, certv1.UsageKeyEncipherment}
	return !slices.ContainsFunc(usages, func(u certv1.KeyUsage) bool { return !slices.Contains(allowed, u) }) &&
		slices.Contains(usages, sign) && slices.Contains(usages, server)
}

// ParseRequest decodes the one PEM CERTIFICATE REQUEST of a CSR and checks its signature.
func ParseRequest(data []byte) (*x509.CertificateRequest, error) {
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

// The objects the facts come from: kubelet-serving CSRs (the only field selector CSRs support
// besides metadata.name), the kubernetes Service in default and the EndpointSlices labelled with
// its name.
const (
	APIServerNamespace = metav1.NamespaceDefault
	APIServerService   = "kubernetes"
)

var (
	SignerFieldSelector      = fields.OneTermEqualSelector("spec.signerName", certv1.KubeletServingSignerName).String()
	APIServerServiceSelector = fields.OneTermEqualSelector("metadata.name", APIServerService).String()
	APIServerSliceSelector   = discoveryv1.LabelServiceName + "=" + APIServerService
)

// Cluster is the cluster's view the facts come from: the approver's informer caches, or what
// `kubectl nodeaddr stale` listed.
type Cluster struct {
	// Nodes holds every Node by name, with the indexes of NodeIndexers.
	Nodes cache.Indexer
	// Services, EndpointSlices: the kubernetes Service in default and its EndpointSlices (any other
	// is ignored). ServiceCIDRs: the cluster's networking.k8s.io/v1 ServiceCIDRs.
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	ServiceCIDRs   []*networkingv1.ServiceCIDR
}

// NodeIndexers are the indexes FactsFrom reads of Cluster.Nodes (internal/nodeindex).
func NodeIndexers() cache.Indexers { return nodeindex.Indexers() }

// NodeIndex indexes listed Nodes as the approver's informer does.
func NodeIndex(nodes []*corev1.Node) cache.Indexer { return nodeindex.New(nodes) }

// FactsFrom gathers what Decide needs about node from c, with the operator's policy p.
func FactsFrom(node string, c Cluster, p Policy) Facts {
	f := Facts{Node: node, Policy: p}
	if o, _, _ := c.Nodes.GetByKey(node); o != nil {
		if n, ok := o.(*corev1.Node); ok {
			f.Exists, f.Published = true, Published(n)
		}
	}
	other := func(index, key string) string {
		objs, _ := c.Nodes.ByIndex(index, key)
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok && n.Name != node {
				return n.Name
			}
		}
		return ""
	}
	f.OtherNodeWithIP = func(ip netip.Addr) string { return other(nodeindex.IP, ip.String()) }
	f.OtherNodeWithName = func(name string) string { return other(nodeindex.Name, name) }
	var apiServer []string
	for _, s := range c.Services {
		if s.Namespace == APIServerNamespace && s.Name == APIServerService {
			apiServer = append(append(apiServer, s.Spec.ClusterIP), s.Spec.ClusterIPs...)
		}
	}
	for _, s := range c.EndpointSlices {
		if s.Namespace == APIServerNamespace && s.Labels[discoveryv1.LabelServiceName] == APIServerService {
			for _, ep := range s.Endpoints {
				apiServer = append(apiServer, ep.Addresses...)
			}
		}
	}
	for _, raw := range apiServer {
		if ip, err := netip.ParseAddr(raw); err == nil && !slices.Contains(f.APIServer, ip.Unmap()) {
			f.APIServer = append(f.APIServer, ip.Unmap())
		}
	}
	for _, sc := range c.ServiceCIDRs {
		for _, raw := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(raw); err == nil {
				f.ServiceCIDRs = append(f.ServiceCIDRs, p.Masked())
			}
		}
	}
	return f
}

// Published are the IPs of n that nodeaddr published: in its vocab.RecordAnnotation and among its
// InternalIP and ExternalIP entries (the record alone is not enough: an address the agent no longer
// writes is gone from the status first).
func Published(n *corev1.Node) []netip.Addr {
	var record []netip.Addr
	for _, raw := range strings.Split(n.Annotations[vocab.RecordAnnotation], ",") {
		if ip, err := netip.ParseAddr(strings.TrimSpace(raw)); err == nil {
			record = append(record, ip.Unmap())
		}
	}
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		ip, err := netip.ParseAddr(a.Address)
		if (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) && err == nil &&
			slices.Contains(record, ip.Unmap()) && !slices.Contains(out, ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	return out
}
