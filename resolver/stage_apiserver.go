package resolver

// The apiserver target (--internal-ip-target=apiserver): the source address of the route toward
// the API server's own addresses, which reach the cluster when the default route does not (a NAT
// interface every VM shares, a management network). The addresses are an input, like the Node's:
// internal/agent follows the kubernetes EndpointSlice and the kubeconfig's server
// (NodeInput.APIServer); the resolver only asks the kernel for the route to them.

import (
	"net/netip"
	"slices"
)

// apiServerUnknown is why an apiserver target with no address of its family gave none.
const apiServerUnknown = "no API server address of this family known: the next target, if any, is used"

// WithAPIServer returns p with each apiserver target replaced, in its place in the list, by one
// target per API server address of its family (in the order given), or left as the unspecified
// placeholder of its family when apiServer has none of that family: selection then skips it and
// falls back to the next target.
func (p Policy) WithAPIServer(apiServer []netip.Addr) Policy {
	if !slices.ContainsFunc(p.Targets, func(t Target) bool { return t.APIServer }) {
		return p
	}
	out := make([]Target, 0, len(p.Targets)+len(apiServer))
	for _, t := range p.Targets {
		if !t.APIServer || !t.IP.IsUnspecified() {
			out = append(out, t)
			continue
		}
		n := len(out)
		for _, ip := range apiServer {
			ip = ip.Unmap()
			if ip.IsValid() && !ip.IsUnspecified() && FamilyOf(ip) == FamilyOf(t.IP) &&
				!slices.ContainsFunc(out[n:], func(x Target) bool { return x.IP == ip }) {
				out = append(out, Target{Type: t.Type, IP: ip, APIServer: true})
			}
		}
		if len(out) == n {
			out = append(out, t)
		}
	}
	p.Targets = out
	return p
}

// placeholder reports whether t is an apiserver target with no address (WithAPIServer).
func (t Target) placeholder() bool { return t.APIServer && t.IP.IsUnspecified() }

// Label is how a target is written on the command line: its IP, or apiserver.
func (t Target) Label() string {
	if t.placeholder() {
		return APIServerTarget
	}
	return t.IP.String()
}

// String is "Type=label", as Address's ("InternalIP=apiserver").
func (t Target) String() string { return string(t.Type) + "=" + t.Label() }
