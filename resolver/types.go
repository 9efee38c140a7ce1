// Package resolver computes the node addresses nodeaddr wants from a fresh snapshot of kernel
// state, through a pipeline of stages (pipeline.go).
package resolver

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// AddressType is a Node address type nodeaddr can manage (same spelling as core/v1).
type AddressType string

// The address types nodeaddr manages.
const (
	InternalIP AddressType = "InternalIP"
	ExternalIP AddressType = "ExternalIP"
)

// Family is an IP family.
type Family uint8

// IP families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// FamilyOf returns the family of ip (IPv4-mapped IPv6 counts as IPv4).
func FamilyOf(ip netip.Addr) Family {
	if ip.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Target asks for the source address the kernel would use toward IP, published as Type.
type Target struct {
	Type AddressType
	IP   netip.Addr
	// APIServer marks the apiserver target (stage_apiserver.go): IP is one of the API server's
	// addresses, or the unspecified address of its family while none of that family is known.
	APIServer bool
}

// Address is one desired Node address.
type Address struct {
	Type AddressType
	IP   netip.Addr
	// Interface is the link the address is on (informational, for logs).
	Interface string
	// PrefixLen is the prefix length on its interface (0 when unknown), for CIDR-form annotations.
	PrefixLen int
}

func (a Address) String() string { return fmt.Sprintf("%s=%s", a.Type, a.IP) }

// Prefix is a's address with its prefix length, the host length when it is unknown (State.Local,
// annotations in CIDR form).
func (a Address) Prefix() netip.Prefix {
	bits := a.PrefixLen
	if bits <= 0 || bits > a.IP.BitLen() {
		bits = a.IP.BitLen()
	}
	return netip.PrefixFrom(a.IP, bits)
}

// State is the desired set of managed addresses: the types nodeaddr manages (even when nothing
// resolved for them) and at most one address per type and family.
type State struct {
	Managed   []AddressType
	Addresses []Address
	// Local lists every address of the host, with its prefix length, with ReportLocal (for the
	// provided-node-ip stage). Equal ignores it, and the fields below.
	Local []netip.Prefix
	// NodeIP is what the kubelet's provided-node-ip annotation did (stage_nodeip.go).
	NodeIP NodeIPOutcome
	// DroppedEqual is set when the equal-ExternalIP rule left an ExternalIP out: the Node then has an
	// address even if the state holds none (the publisher may remove the uninitialized taint).
	DroppedEqual bool
	// Explanation says why each address was chosen or dropped, one line per candidate (--explain).
	Explanation []Explained
	// DADFailed lists the addresses the selection refused because the kernel flags them dadfailed
	// (another host on the link holds them), each of the type that considered it first.
	DADFailed []Address
}

// Normalize sorts the addresses by type (in Managed order) then family (IPv4 first).
func (s State) Normalize() State {
	rank := func(t AddressType) int {
		if i := slices.Index(s.Managed, t); i >= 0 {
			return i
		}
		return len(s.Managed)
	}
	out := s
	out.Managed, out.Addresses = slices.Clone(s.Managed), slices.Clone(s.Addresses)
	slices.SortStableFunc(out.Addresses, func(a, b Address) int {
		return cmp.Or(cmp.Compare(rank(a.Type), rank(b.Type)), cmp.Compare(FamilyOf(a.IP), FamilyOf(b.IP)))
	})
	return out
}

// Equal reports whether s and o hold the same managed types and addresses (prefix lengths count).
func (s State) Equal(o State) bool {
	a, b := s.Normalize(), o.Normalize()
	return slices.Equal(a.Managed, b.Managed) && slices.EqualFunc(a.Addresses, b.Addresses,
		func(x, y Address) bool { return x.Type == y.Type && x.IP == y.IP && x.PrefixLen == y.PrefixLen })
}

// Changed is the one decision of whether a resolved state matters: whether next differs from prev
// (nil: nothing resolved yet) in what would be written (Equal).
func Changed(prev *State, next State) bool { return prev == nil || !prev.Equal(next) }

// Get returns the address of type t and family f, if any.
func (s State) Get(t AddressType, f Family) (Address, bool) {
	return first(s.Addresses, func(a Address) bool { return a.Type == t && FamilyOf(a.IP) == f })
}

// first returns the first element of list that match accepts.
func first[T any](list []T, match func(T) bool) (T, bool) {
	if i := slices.IndexFunc(list, match); i >= 0 {
		return list[i], true
	}
	var none T
	return none, false
}

// String lists the addresses as "[Type=IP ...]", normalized.
func (s State) String() string { return fmt.Sprint(s.Normalize().Addresses) }

// APIServerTarget is the target name that stands for the API server's own addresses
// (stage_apiserver.go).
const APIServerTarget = "apiserver"

// ParseTargets parses a comma-separated, ordered target list for one address type: at most one IP
// per family, and the name apiserver at most once. Per family, the first target with a usable route
// source gives the address; the later ones are fallbacks.
func ParseTargets(t AddressType, s string) ([]Target, error) {
	seen := map[Family]string{}
	var out []Target
	_, err := parseList(s, func(f string) (struct{}, error) {
		f = strings.TrimSpace(f)
		if strings.EqualFold(f, APIServerTarget) {
			if _, dup := seen[0]; dup {
				return struct{}{}, fmt.Errorf("%s is listed twice", APIServerTarget)
			}
			seen[0] = f
			out = append(out, Target{Type: t, IP: netip.IPv4Unspecified(), APIServer: true},
				Target{Type: t, IP: netip.IPv6Unspecified(), APIServer: true})
			return struct{}{}, nil
		}
		ip, err := netip.ParseAddr(f)
		if err != nil || ip.Zone() != "" {
			return struct{}{}, fmt.Errorf("%q is neither an IP address nor %s", f, APIServerTarget)
		}
		ip = ip.Unmap()
		if ip.IsUnspecified() || ip.IsLoopback() || ip.IsMulticast() || ip.IsLinkLocalUnicast() {
			return struct{}{}, fmt.Errorf("%s cannot be a target: it must be a routable unicast address", ip)
		}
		fam := FamilyOf(ip)
		if prev, ok := seen[fam]; ok {
			return struct{}{}, fmt.Errorf("two %s targets (%s and %s): at most one per family", fam, prev, ip)
		}
		seen[fam] = f
		out = append(out, Target{Type: t, IP: ip})
		return struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
