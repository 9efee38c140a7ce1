package rules

import (
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

// The facts Decide reads, gathered from the cluster's objects (FactsFrom), as the approver and kubectl nodeaddr stale both do.

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
