package inspect

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
)

// Stale kubelet serving certificates, pending kubelet-serving CSRs and the approver's advice.

// CertProbe is what a Node's kubelet port (Endpoint) presented: its serving certificate, or why none
// was read (Err: unreachable, or no TLS; the finding is unknown, not stale).
type CertProbe struct {
	Endpoint string
	Cert     *x509.Certificate
	Err      error
}

// StaleCerts lists the kubelet serving certificates that lack one of their Node's IP addresses:
// clients that verify the kubelet (kube-apiserver with --kubelet-certificate-authority,
// metrics-server) fail against the new address. The address shown is its IP SANs the Node lacks.
func StaleCerts(s Snapshot, addrs map[string][]netip.Addr) []Finding {
	var out []Finding
	for _, n := range s.Nodes {
		p, ok := s.Certs[n.Name]
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
		sans := ips(p.Cert.IPAddresses)
		missing := minus(addrs[n.Name], sans)
		if len(missing) == 0 {
			continue
		}
		if old := minus(sans, addrs[n.Name]); len(old) > 0 {
			f.Address = joinAddrs(old)
		}
		f.Where += ": IP SANs lack " + joinAddrs(missing)
		f.State, f.Fix = StateStale, certFix(s, &n, missing, p.Cert)
		out = append(out, f)
	}
	return out
}

// certFix: approve the Node's newest pending serving CSR with the missing addresses that the rules
// approve (one they refuse is listed on its own, with the reason); else a self-signed certificate
// (no serverTLSBootstrap) is only regenerated when removed; else a restarted kubelet files a CSR.
func certFix(s Snapshot, n *corev1.Node, missing []netip.Addr, cert *x509.Certificate) string {
	var best *certificatesv1.CertificateSigningRequest
	for i := range s.CSRs {
		c := &s.CSRs[i]
		if rules.NodeOf(c) != n.Name || !rules.Pending(c) || len(minus(missing, requestIPs(c))) > 0 {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&c.CreationTimestamp) {
			if fix, _ := s.advice(c); fix == approve+c.Name {
				best = c
			}
		}
	}
	if best != nil {
		return approve + best.Name
	}
	if bytes.Equal(cert.RawIssuer, cert.RawSubject) {
		return fmt.Sprintf("on node %s: remove the kubelet's self-signed kubelet.crt and kubelet.key (its --cert-dir) and restart the kubelet", n.Name)
	}
	return fmt.Sprintf("on node %s: restart the kubelet (it files a new kubelet-serving CSR)", n.Name)
}

// The fixes of a pending CSR.
const (
	approve = "kubectl certificate approve "
	deny    = "kubectl certificate deny "
)

// Advice is what to do with a pending kubelet-serving CSR: the approver's own verdict (rules.Decide)
// on the facts f. Deny, saying why, what it refuses; when a fact could not be read (unknown says
// which), nothing: the facts missing could only add a refusal.
func Advice(csr *certificatesv1.CertificateSigningRequest, f rules.Facts, unknown string) (fix, why string) {
	switch v := rules.Decide(csr, f); {
	case !v.Approve:
		return deny + csr.Name, fmt.Sprintf("refused (%s): %s", v.Reason, v.Message)
	case unknown != "":
		return none, "cannot tell whether the approver would approve it: " + unknown
	}
	return approve + csr.Name, ""
}

// advice is Advice on the facts of s with the approver's flags, as the approver gathers them.
func (s Snapshot) advice(c *certificatesv1.CertificateSigningRequest) (fix, why string) {
	if s.Approval.Nodes == nil {
		s.Approval.Nodes, s.ApprovalUnknown = rules.NodeIndex(nil), "the cluster's facts were not read"
	}
	f := rules.FactsFrom(rules.NodeOf(c), s.Approval, s.Policy)
	f.ServiceCIDRs = append(slices.Clone(s.ServiceCIDRs), f.ServiceCIDRs...)
	return Advice(c, f, s.ApprovalUnknown)
}

// PendingCSRs lists the kubelet-serving CSRs of the Nodes checked pending for longer than
// s.PendingAfter: until one is approved the kubelet keeps serving a certificate for its old address.
func PendingCSRs(s Snapshot, addrs map[string][]netip.Addr) []Finding {
	var out []Finding
	for i := range s.CSRs {
		c := &s.CSRs[i]
		age := s.Now.Sub(c.CreationTimestamp.Time)
		if c.Spec.SignerName != certificatesv1.KubeletServingSignerName || !rules.Pending(c) || age <= s.PendingAfter {
			continue
		}
		node := rules.NodeOf(c)
		if _, checked := addrs[node]; !checked && !s.AllNodes {
			continue
		}
		f := Finding{Kind: KindCSR, Name: c.Name, Node: node, State: StateStale, Address: none,
			Where: fmt.Sprintf("spec.request IP SANs, pending %s", Age(age))}
		if sans := requestIPs(c); len(sans) > 0 {
			f.Address = joinAddrs(sans)
		}
		var why string
		if f.Fix, why = s.advice(c); why != "" {
			f.Where += ", " + why
		}
		out = append(out, f)
	}
	return out
}

// requestIPs are the IP SANs of a CSR's request (none if it does not parse).
func requestIPs(c *certificatesv1.CertificateSigningRequest) []netip.Addr {
	req, err := rules.ParseRequest(c.Spec.Request)
	if err != nil {
		return nil
	}
	return ips(req.IPAddresses)
}

func ips(raw []net.IP) []netip.Addr {
	var out []netip.Addr
	for _, ip := range raw {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// minus is the addresses of a that are not in b.
func minus(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, ip := range a {
		if !slices.Contains(b, ip) {
			out = append(out, ip)
		}
	}
	return out
}
