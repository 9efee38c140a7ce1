// Package nodeindex indexes Nodes by the IPs and names in their status, for a Node informer's
// indexer: the approver asks which other Node lists a CSR's SAN, the conflict detector which Nodes
// list one address, each in O(1) per question without a LIST.
package nodeindex

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Index names.
const (
	IP   = "ip"   // Nodes by every IP in their status, whatever its type (IPv4-mapped IPv6 unmapped)
	Name = "name" // Nodes by their name and DNS entries, lower case
)

// Indexers are both indexes, for cache.NewSharedIndexInformer or cache.NewIndexer.
func Indexers() cache.Indexers { return cache.Indexers{IP: NodeIPs, Name: NodeNames} }

// New indexes listed Nodes as an informer with Indexers does.
func New(nodes []*corev1.Node) cache.Indexer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers())
	for _, n := range nodes {
		_ = idx.Add(n) // fails only when a Node has no name
	}
	return idx
}

// IPs are the distinct IPs in a Node's status, whatever their type, in the order listed.
func IPs(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil && !contains(out, ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

func contains(s []netip.Addr, ip netip.Addr) bool {
	for _, x := range s {
		if x == ip {
			return true
		}
	}
	return false
}

// NodeIPs indexes a Node by every IP in its status (IPs).
func NodeIPs(o any) ([]string, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, ip := range IPs(n) {
		out = append(out, ip.String())
	}
	return out, nil
}

// NodeNames indexes a Node by its name and its Hostname, InternalDNS and ExternalDNS entries.
func NodeNames(o any) ([]string, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	out := []string{strings.ToLower(n.Name)}
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			out = append(out, strings.TrimSuffix(strings.ToLower(a.Address), "."))
		}
	}
	return out, nil
}

// ByIP are the Nodes of idx (an indexer with Indexers) that list ip.
func ByIP(idx cache.Indexer, ip netip.Addr) []*corev1.Node {
	objs, _ := idx.ByIndex(IP, ip.Unmap().String())
	out := make([]*corev1.Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}
