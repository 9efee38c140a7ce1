package resolver

// Stage 4, provided-node-ip: the kubelet's --node-ip annotation becomes the InternalIP, as in
// k8s.io/cloud-provider node/helpers GetNodeAddressesFromNodeIP.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	cloudproviderapi "k8s.io/cloud-provider/api"
)

// NodeIPOutcome is what the provided-node-ip annotation did to a state; the publisher acts on it.
type NodeIPOutcome struct {
	// Provided are the annotated IPs (nil without annotation, or when it does not apply).
	Provided []netip.Addr
	// Missing are the annotated IPs not on the host: the Node keeps its uninitialized taint.
	Missing []netip.Addr
	// Err is set when the annotation cannot be parsed (it is then ignored).
	Err error
}

// Equal reports whether n and o say the same.
func (n NodeIPOutcome) Equal(o NodeIPOutcome) bool {
	return slices.Equal(n.Provided, o.Provided) && slices.Equal(n.Missing, o.Missing) &&
		(n.Err == nil) == (o.Err == nil) && (n.Err == nil || n.Err.Error() == o.Err.Error())
}

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
	if len(out) > 2 || len(out) == 2 && FamilyOf(out[0]) == FamilyOf(out[1]) {
		return nil, errors.New("must contain either a single IP or a dual-stack pair of IPs")
	}
	for _, ip := range out {
		if ip.IsUnspecified() {
			return nil, fmt.Errorf("%s is not a node IP", ip)
		}
	}
	return out, nil
}

// fromNodeIP is where the annotated addresses come from, in explanations.
const fromNodeIP = "annotation " + cloudproviderapi.AnnotationAlphaProvidedIPAddr

// withProvidedNodeIP honours the annotation when InternalIP is managed: when every annotated IP is
// on the host (trusted without s.Local), they replace the resolved InternalIPs, in annotation
// order; when one is not, the resolved addresses are kept and NodeIP.Missing names it.
func withProvidedNodeIP(annotation string, s State) State {
	s.NodeIP = NodeIPOutcome{}
	if annotation == "" || !slices.Contains(s.Managed, InternalIP) {
		return s
	}
	w := s.why()
	ips, err := parseProvidedNodeIP(annotation)
	if err != nil {
		s.NodeIP.Err = fmt.Errorf("annotation %s=%q: %w", cloudproviderapi.AnnotationAlphaProvidedIPAddr, annotation, err)
		// A line about the type, of no family.
		s.Explanation = append(w, Explained{Type: string(InternalIP), From: fromNodeIP, Reason: "ignored: " + err.Error()})
		return s
	}
	s.NodeIP.Provided = ips
	out := make([]Address, 0, len(s.Addresses)+len(ips))
	for _, ip := range ips {
		a := Address{Type: InternalIP, IP: ip}
		if j := slices.IndexFunc(s.Local, func(p netip.Prefix) bool { return p.Addr() == ip }); j >= 0 {
			a.PrefixLen = s.Local[j].Bits()
		} else if s.Local != nil {
			s.NodeIP.Missing = append(s.NodeIP.Missing, ip)
			w = append(w, Explained{Type: string(InternalIP), Family: FamilyOf(ip).String(), Address: ip.String(), From: fromNodeIP,
				Reason: "ignored: not assigned to this host; the Node keeps the uninitialized taint"})
		}
		out = append(out, a)
	}
	if len(s.NodeIP.Missing) > 0 {
		s.Explanation = w
		return s
	}
	for _, a := range s.Addresses {
		if a.Type != InternalIP {
			out = append(out, a)
		} else if !slices.Contains(ips, a.IP) {
			w.passOver(InternalIP, FamilyOf(a.IP), "replaced by the kubelet's node IP "+annotation)
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(s.Addresses, func(a Address) bool { return a.Type == InternalIP && a.IP == ip }) {
			w = w.chose(Address{Type: InternalIP, IP: ip}, fromNodeIP, "chosen: the kubelet's node IP (--node-ip)")
		}
	}
	s.Addresses, s.Explanation = out, w
	return s
}
