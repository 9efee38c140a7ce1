package inspect

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// CertProbe is what a Node's kubelet port presented: its serving certificate, or why none was read.
type CertProbe struct {
	// Endpoint is the address and port dialed (the Node's InternalIP and kubelet port).
	Endpoint string
	Cert     *x509.Certificate
	// Err: the port could not be reached or spoke no TLS; the finding is unknown, not stale.
	Err error
}

// nodeUserPrefix is how a kubelet's CSR names its requester (spec.username).
const nodeUserPrefix = "system:node:"

// StaleCerts lists the kubelet serving certificates that lack one of their Node's current IP
// addresses: clients that verify the kubelet (kube-apiserver with --kubelet-certificate-authority,
// metrics-server) fail against the new address. The address shown is what the certificate names
// instead (its IP SANs the Node no longer has).
func StaleCerts(nodes []corev1.Node, probes map[string]CertProbe, csrs []certificatesv1.CertificateSigningRequest) []Finding {
	addrs := nodeAddresses(nodes)
	var out []Finding
	for _, n := range nodes {
		p, ok := probes[n.Name]
		if !ok {
			continue
		}
		f := Finding{Kind: KindServingCert, Name: n.Name, Node: n.Name, Address: none,
			Where: "kubelet serving certificate at " + p.Endpoint}
		if p.Err != nil || p.Cert == nil {
			f.State, f.Address, f.Fix = StateUnknown, StateUnknown, "-"
			if p.Err != nil {
				f.Where += " (" + p.Err.Error() + ")"
			}
			out = append(out, f)
			continue
		}
		var sans []netip.Addr
		for _, ip := range p.Cert.IPAddresses {
			if a, ok := netip.AddrFromSlice(ip); ok {
				sans = append(sans, a.Unmap())
			}
		}
		var missing, old []netip.Addr
		for _, a := range addrs[n.Name] {
			if !slices.Contains(sans, a) {
				missing = append(missing, a)
			}
		}
		if len(missing) == 0 {
			continue
		}
		for _, a := range sans {
			if !slices.Contains(addrs[n.Name], a) {
				old = append(old, a)
			}
		}
		if len(old) > 0 {
			f.Address = joinAddrs(old)
		}
		f.Where += ": IP SANs lack " + joinAddrs(missing)
		f.State, f.Fix = StateStale, certFix(&n, addrs[n.Name], missing, p.Cert, csrs)
		out = append(out, f)
	}
	return out
}

// certFix: approve the Node's newest pending serving CSR whose IP SANs are the missing addresses
// and no address the Node lacks; else a self-signed certificate (a kubelet without
// serverTLSBootstrap) is only regenerated when removed; else the kubelet must file a new CSR, which
// it does when restarted. Any other pending CSR of the Node's identity is not advice: one that
// lacks an address would not fix the certificate, and one that names an address the Node does not
// have (another Node's, the API server's) is what an approver must refuse (seen on the real node,
// where the approval attacks leave such CSRs pending beside the kubelet's own).
func certFix(n *corev1.Node, current, missing []netip.Addr, cert *x509.Certificate, csrs []certificatesv1.CertificateSigningRequest) string {
	var best *certificatesv1.CertificateSigningRequest
	for i := range csrs {
		c := &csrs[i]
		if c.Spec.SignerName != certificatesv1.KubeletServingSignerName || !pending(c) || c.Spec.Username != nodeUserPrefix+n.Name ||
			!servesOnly(csrIPs(c.Spec.Request), missing, current) {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&c.CreationTimestamp) {
			best = c
		}
	}
	if best != nil {
		return "kubectl certificate approve " + best.Name
	}
	if bytes.Equal(cert.RawIssuer, cert.RawSubject) {
		return fmt.Sprintf("on node %s: remove the kubelet's self-signed kubelet.crt and kubelet.key (its --cert-dir) and restart the kubelet", n.Name)
	}
	return fmt.Sprintf("on node %s: restart the kubelet (it files a new kubelet-serving CSR)", n.Name)
}

// servesOnly says whether sans hold every address of want and none outside current.
func servesOnly(sans, want, current []netip.Addr) bool {
	for _, a := range want {
		if !slices.Contains(sans, a) {
			return false
		}
	}
	for _, a := range sans {
		if !slices.Contains(current, a) {
			return false
		}
	}
	return true
}

// pending: neither approved, denied nor failed.
func pending(c *certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return true
}

// PendingCSRs lists the kubelet-serving CSRs pending for longer than after: until one is approved
// the kubelet keeps serving with a certificate for its old address. The fix is approval only when
// the requester is a Node and every IP SAN is one of its current addresses (what an approver must
// check: the signer cannot); a CSR naming another address is denied.
func PendingCSRs(csrs []certificatesv1.CertificateSigningRequest, addrs map[string][]netip.Addr, all bool, now time.Time, after time.Duration) []Finding {
	var out []Finding
	for _, c := range csrs {
		age := now.Sub(c.CreationTimestamp.Time)
		if c.Spec.SignerName != certificatesv1.KubeletServingSignerName || !pending(&c) || age <= after {
			continue
		}
		node, isNode := strings.CutPrefix(c.Spec.Username, nodeUserPrefix)
		if !isNode {
			node = ""
		}
		current, known := addrs[node]
		if !known && !all {
			continue
		}
		sans := csrIPs(c.Spec.Request)
		f := Finding{Kind: KindCSR, Name: c.Name, Node: node, State: StateStale, Address: none,
			Where: fmt.Sprintf("spec.request IP SANs, pending %s", Age(age)),
			Fix:   "kubectl certificate approve " + c.Name}
		if len(sans) > 0 {
			f.Address = joinAddrs(sans)
		}
		var foreign []netip.Addr
		for _, a := range sans {
			if !slices.Contains(current, a) {
				foreign = append(foreign, a)
			}
		}
		switch {
		case !isNode:
			f.Where += ", requester is no Node"
			f.Fix = "kubectl certificate deny " + c.Name
		case !known:
			f.Where += fmt.Sprintf(", node %s does not exist", node)
			f.Fix = "kubectl certificate deny " + c.Name
		case len(foreign) > 0:
			f.Where += fmt.Sprintf(", %s not an address of node %s", joinAddrs(foreign), node)
			f.Fix = "kubectl certificate deny " + c.Name
		}
		out = append(out, f)
	}
	return out
}

// csrIPs are the IP SANs of a PEM certificate request (none if it does not parse).
func csrIPs(request []byte) []netip.Addr {
	block, _ := pem.Decode(request)
	if block == nil {
		return nil
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil
	}
	var ips []netip.Addr
	for _, ip := range req.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok {
			ips = append(ips, a.Unmap())
		}
	}
	return ips
}
