// Package resolver computes the node addresses nodeaddr wants from a fresh snapshot of kernel
// state: for each target, the source address of the kernel's route toward it, kept only if it is a
// usable address of a local interface. Debounce and hold-down decide when a new snapshot is taken and
// when a missing address really is gone.
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
}

// Address is one desired Node address.
type Address struct {
	Type AddressType
	IP   netip.Addr
	// Interface is the link the address is on (informational, for logs).
	Interface string
	// PrefixLen is the prefix length the address has on its interface (0 when unknown): consumers
	// such as Calico want the address in CIDR form (publisher annotations).
	PrefixLen int
}

func (a Address) String() string { return fmt.Sprintf("%s=%s", a.Type, a.IP) }

// State is the desired set of managed addresses: the types nodeaddr manages (even when nothing
// resolved for them, so stale entries get removed) and at most one address per type and family.
type State struct {
	Managed   []AddressType
	Addresses []Address
	// Local lists every address assigned to the host, with its prefix length, when the policy asks
	// for it (ReportLocal), so the provided-node-ip stage can check the kubelet's node IP; Equal
	// ignores it.
	Local []netip.Prefix
	// NodeIP is what the kubelet's provided-node-ip annotation did (stage_nodeip.go); the publisher
	// acts on it (the taint, a Warning). Equal ignores it.
	NodeIP NodeIPOutcome
	// DroppedEqual is set when the equal-ExternalIP rule left an ExternalIP out because the Node
	// carries it as an InternalIP: the Node then has an address even if the state holds none, which
	// is what the publisher waits for to remove the uninitialized taint. Equal ignores it.
	DroppedEqual bool
	// Explanation says why each address was chosen or dropped, one line per candidate, as the
	// stages that decided wrote it (--explain). Equal ignores it.
	Explanation []Explained
	// DADFailed lists the addresses the selection would have considered (a route source, an
	// address of an interface a type enumerates) but refused because the kernel flags them
	// dadfailed: duplicate address detection found another host on the link holding them. Each is
	// of the type that considered it first, with its interface. The agent warns about each once
	// (a DuplicateAddress Event). Equal ignores it.
	DADFailed []Address
}

// Normalize sorts the addresses by type (in Managed order) then family (IPv4 first), so two states
// compare equal when they mean the same thing.
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

// Equal reports whether s and o hold the same managed types and addresses (interfaces ignored; a
// changed prefix length counts, annotations in CIDR form carry it).
func (s State) Equal(o State) bool {
	a, b := s.Normalize(), o.Normalize()
	return slices.Equal(a.Managed, b.Managed) && slices.EqualFunc(a.Addresses, b.Addresses,
		func(x, y Address) bool { return x.Type == y.Type && x.IP == y.IP && x.PrefixLen == y.PrefixLen })
}

// Changed is the one decision of whether a resolved state matters: whether next differs from prev
// (nil: nothing resolved yet) in what would be written, the managed types and each address with
// its prefix length, whatever their order (Equal). The loop logs and publishes on it, the publisher
// counts it and restarts its reaction clock on it, --dry-run prints on it. The host's other
// addresses (State.Local) do not matter by themselves.
func Changed(prev *State, next State) bool { return prev == nil || !prev.Equal(next) }

// Get returns the address of type t and family f, if any.
func (s State) Get(t AddressType, f Family) (Address, bool) {
	for _, a := range s.Addresses {
		if a.Type == t && FamilyOf(a.IP) == f {
			return a, true
		}
	}
	return Address{}, false
}

func (s State) String() string {
	parts := make([]string, 0, len(s.Addresses))
	for _, a := range s.Normalize().Addresses {
		parts = append(parts, a.String())
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ParseTargets parses a comma-separated target list for one address type: at most one IP per family.
// An empty string disables the type.
func ParseTargets(t AddressType, s string) ([]Target, error) {
	var out []Target
	seen := map[Family]string{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ip, err := netip.ParseAddr(f)
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%q is not an IP address", f)
		}
		ip = ip.Unmap()
		if ip.IsUnspecified() || ip.IsLoopback() || ip.IsMulticast() || ip.IsLinkLocalUnicast() {
			return nil, fmt.Errorf("%s cannot be a target: it must be a routable unicast address", ip)
		}
		fam := FamilyOf(ip)
		if prev, ok := seen[fam]; ok {
			return nil, fmt.Errorf("two %s targets (%s and %s): at most one per family", fam, prev, ip)
		}
		seen[fam] = f
		out = append(out, Target{Type: t, IP: ip})
	}
	return out, nil
}
