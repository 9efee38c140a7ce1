package inspect

import (
	"bytes"
	"cmp"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
)

// Finding states: a stale finding makes `kubectl nodeaddr stale` exit 1; an unknown one (a kubelet
// port the operator's machine cannot reach) is shown and changes nothing.
const (
	StateStale   = "stale"
	StateUnknown = "unknown"
)

// Kinds of object a finding names, in the order findings are listed for a Node.
const (
	KindPod           = "pod"
	KindEndpointSlice = "endpointslice"
	KindServingCert   = "node" // the kubelet's serving certificate, which belongs to no API object but its Node
	KindCSR           = "csr"
)

var kinds = map[string]schema.GroupVersionKind{
	KindPod:           corev1.SchemeGroupVersion.WithKind("Pod"),
	KindEndpointSlice: discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"),
	KindServingCert:   nodeKind,
	KindCSR:           certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"),
}

// Finding is one thing that still names an address of a Node's past: one line of `kubectl nodeaddr
// stale`, and its JSON form.
type Finding struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	Where     string `json:"where"`   // where the object names the address
	Address   string `json:"address"` // the old address it names ("-": none to name)
	State     string `json:"state"`
	Fix       string `json:"fix"` // the command (or, when none exists, the action) that fixes it
	// Remediation is, for a stale pod, what the remediator does about it: when it evicts the pod,
	// or why not (verdict.Describe).
	Remediation string `json:"remediation,omitempty"`
}

// APIObject is the API object f names, for -o name.
func (f Finding) APIObject() (schema.GroupVersionKind, string) { return kinds[f.Kind], f.Name }

// Snapshot is what the stale rules read.
type Snapshot struct {
	Nodes  []corev1.Node // to check: [NODE…] on the command line, else every Node
	Pods   []corev1.Pod
	Slices []discoveryv1.EndpointSlice
	CSRs   []certificatesv1.CertificateSigningRequest
	Certs  map[string]CertProbe // by Node
	// AllNodes: no Node was named, so a pending CSR of a Node that no longer exists is listed too.
	AllNodes     bool
	Now          time.Time
	PendingAfter time.Duration
	// Approval is the cluster as the CSR approver reads it (every Node, the kubernetes Service, its
	// EndpointSlices, the ServiceCIDRs), for the verdict on each pending CSR; ApprovalUnknown says
	// what of it could not be read ("" when everything was).
	Approval        rules.Cluster
	ApprovalUnknown string
	// Policy and ServiceCIDRs are the approver's flags, read from its Deployment (the defaults
	// where none is installed).
	Policy       rules.Policy
	ServiceCIDRs []netip.Prefix
	// Remediation is the remediator's installation, for the verdict on each stale pod.
	Remediation Remediation
}

// Stale applies every rule to s, in a stable order: by Node, then kind, then object and address.
func Stale(s Snapshot) []Finding {
	addrs := nodeAddresses(s.Nodes)
	pods := StalePods(s.Pods, addrs)
	remediate(s, pods)
	out := slices.Concat(pods, StaleEndpoints(s.Slices, pods), PendingCSRs(s, addrs), StaleCerts(s, addrs))
	order := map[string]int{KindPod: 0, KindEndpointSlice: 1, KindServingCert: 2, KindCSR: 3}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(order[a.Kind], order[b.Kind]),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Where, b.Where),
			cmp.Compare(a.Address, b.Address))
	})
	return out
}

// CountStale counts the stale findings (any: `kubectl nodeaddr stale` exits 1).
func CountStale(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.State == StateStale {
			n++
		}
	}
	return n
}

// nodeAddresses maps each Node to its current IP addresses (of every type).
func nodeAddresses(nodes []corev1.Node) map[string][]netip.Addr {
	m := make(map[string][]netip.Addr, len(nodes))
	for _, n := range nodes {
		ips := []netip.Addr{}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				ips = append(ips, ip.Unmap())
			}
		}
		m[n.Name] = ips
	}
	return m
}

// StalePods lists the addresses of hostNetwork pods that their Node no longer has: a hostNetwork
// pod keeps the address its Node had when it started. Finished pods, Nodes not checked and Nodes
// with no IP address (nothing to compare with) are skipped.
func StalePods(pods []corev1.Pod, addrs map[string][]netip.Addr) []Finding {
	var out []Finding
	for _, p := range pods {
		node, checked := addrs[p.Spec.NodeName]
		if !p.Spec.HostNetwork || !checked || len(node) == 0 ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ip := range podIPs(&p) {
			if a, err := netip.ParseAddr(ip); err == nil && slices.Contains(node, a.Unmap()) {
				continue
			}
			out = append(out, Finding{Kind: KindPod, Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName,
				Where: "status.podIPs", Address: ip, State: StateStale, Fix: podFix(&p)})
		}
	}
	return out
}

func podIPs(p *corev1.Pod) []string {
	var ips []string
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = append(ips, p.Status.PodIP)
	}
	return ips
}

// podFix deletes the pod so that its controller creates one with the new address. A static pod's
// mirror cannot be fixed through the API: its kubelet must restart it.
func podFix(p *corev1.Pod) string {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return fmt.Sprintf("on node %s: restart the static pod (move its manifest out of the kubelet's manifest directory and back)", p.Spec.NodeName)
	}
	return fmt.Sprintf("kubectl -n %s delete pod %s", p.Namespace, p.Name)
}

// StaleEndpoints lists the EndpointSlice endpoints that carry the stale address of their target pod:
// traffic still goes there until the pod is replaced, which is also the fix.
func StaleEndpoints(eps []discoveryv1.EndpointSlice, stalePods []Finding) []Finding {
	type key struct{ ns, name, ip string }
	stale := map[key]Finding{}
	for _, f := range stalePods {
		stale[key{f.Namespace, f.Name, f.Address}] = f
	}
	var out []Finding
	for _, s := range eps {
		for i, ep := range s.Endpoints {
			ref := ep.TargetRef
			if ref == nil || (ref.Kind != "" && ref.Kind != "Pod") {
				continue
			}
			ns := cmp.Or(ref.Namespace, s.Namespace)
			for _, ip := range ep.Addresses {
				pod, ok := stale[key{ns, ref.Name, ip}]
				if !ok {
					continue
				}
				out = append(out, Finding{Kind: KindEndpointSlice, Namespace: s.Namespace, Name: s.Name, Node: pod.Node,
					Where: fmt.Sprintf("endpoints[%d].addresses (pod %s)", i, ref.Name), Address: ip, State: StateStale,
					Fix: pod.Fix})
			}
		}
	}
	return out
}

func joinAddrs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ",")
}

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
