package publisher

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// parseProvidedNodeIP parses the annotation as k8s.io/component-helpers ParseNodeIPAnnotation does:
// one IP or a dual-stack pair, exact spelling (no spaces).
func parseProvidedNodeIP(v string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range strings.Split(v, ",") {
		ip, err := netip.ParseAddr(f)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("could not parse %q", f)
		}
		out = append(out, ip.Unmap())
	}
	if len(out) > 2 || len(out) == 2 && resolver.FamilyOf(out[0]) == resolver.FamilyOf(out[1]) {
		return nil, fmt.Errorf("must contain either a single IP or a dual-stack pair of IPs")
	}
	for _, ip := range out {
		if ip.IsUnspecified() {
			return nil, fmt.Errorf("%s is not a node IP", ip)
		}
	}
	return out, nil
}

// nodeIPResult is what the provided-node-ip annotation does to a desired state.
type nodeIPResult struct {
	// Addresses are the addresses to write.
	Addresses []resolver.Address
	// Provided are the annotated IPs (nil without annotation, or when it does not apply).
	Provided []netip.Addr
	// Missing are the annotated IPs not assigned to the host: the Node keeps its uninitialized taint.
	Missing []netip.Addr
	// Err is set when the annotation cannot be parsed (it is then ignored).
	Err error
}

// applyProvidedNodeIP honours the kubelet's provided-node-ip annotation as the cloud-provider node
// controller does (k8s.io/cloud-provider node/helpers GetNodeAddressesFromNodeIP): when every
// annotated IP is on the host, they are the InternalIPs, in annotation order, and replace the
// resolved ones; when one is not, the resolved addresses are kept and Missing names it, so the
// caller keeps the uninitialized taint. It applies only when InternalIP is managed; without the
// host's address list (s.Local nil) the annotation is trusted.
func applyProvidedNodeIP(annotation string, s resolver.State) nodeIPResult {
	r := nodeIPResult{Addresses: s.Addresses}
	if annotation == "" || !slices.Contains(s.Managed, resolver.InternalIP) {
		return r
	}
	ips, err := parseProvidedNodeIP(annotation)
	if err != nil {
		r.Err = fmt.Errorf("annotation %s=%q: %w", cloudproviderapi.AnnotationAlphaProvidedIPAddr, annotation, err)
		return r
	}
	r.Provided = ips
	bits := make([]int, len(ips))
	for i, ip := range ips {
		j := slices.IndexFunc(s.Local, func(p netip.Prefix) bool { return p.Addr() == ip })
		switch {
		case j >= 0:
			bits[i] = s.Local[j].Bits()
		case s.Local != nil:
			r.Missing = append(r.Missing, ip)
		}
	}
	if len(r.Missing) > 0 {
		return r
	}
	out := make([]resolver.Address, 0, len(s.Addresses)+len(ips))
	for i, ip := range ips {
		out = append(out, resolver.Address{Type: resolver.InternalIP, IP: ip, PrefixLen: bits[i]})
	}
	for _, a := range s.Addresses {
		if a.Type != resolver.InternalIP {
			out = append(out, a)
		}
	}
	r.Addresses = out
	return r
}

// podCIDRs returns the Node's pod CIDRs (spec.podCIDRs, else spec.podCIDR), skipping bad ones.
func podCIDRs(n *corev1.Node) []netip.Prefix {
	list := n.Spec.PodCIDRs
	if len(list) == 0 && n.Spec.PodCIDR != "" {
		list = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, c := range list {
		if p, err := resolver.ParsePrefix(c); err == nil {
			out = append(out, p)
		}
	}
	return out
}
