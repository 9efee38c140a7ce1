package inspect

import (
	"cmp"
	"fmt"
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
