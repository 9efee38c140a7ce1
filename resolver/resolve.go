package resolver

import (
	"errors"
	"net/netip"
)

// LocalAddr is an address assigned to a local interface, as the kernel reports it.
type LocalAddr struct {
	IP        netip.Addr
	LinkIndex int
	Link      string
	Flags     int // IFA_F_* flags
	Scope     int // RT_SCOPE_*
	// PreferredLft is the preferred lifetime in seconds; 0 means deprecated, 0xFFFFFFFF forever.
	PreferredLft int
	// PrefixLen is the address's prefix length (32 or 128 for a host address); 0 when unknown.
	PrefixLen int
	// Label is the IPv4 address label (IFA_LABEL): the interface name unless an alias ("eth0:vip").
	Label string
}

// Kernel is the snapshot source a resolution reads (Netlink; a table in tests).
type Kernel interface {
	// RouteSource returns the source address the kernel would use toward dst; zero: no route.
	RouteSource(dst netip.Addr) (netip.Addr, error)
	// Addresses lists the addresses of every local interface.
	Addresses() ([]LocalAddr, error)
}

// Reasons an address is not usable as a node address.
var (
	errTentative  = errors.New("tentative (duplicate address detection running)")
	errDADFailed  = errors.New("duplicate address detection failed")
	errDeprecated = errors.New("deprecated")
	errOptimistic = errors.New("optimistic (duplicate address detection running)")
	errTemporary  = errors.New("temporary (IPv6 privacy) address")
	errScope      = errors.New("not of universe scope")
)

// usable returns nil when a can be published as a node address, else why not (the kernel's flags).
func usable(a LocalAddr) error {
	switch {
	case a.Scope != scopeUniverse:
		return errScope
	case a.Flags&ifaDADFailed != 0:
		return errDADFailed
	case a.Flags&ifaTentative != 0:
		return errTentative
	case a.Flags&ifaOptimistic != 0:
		return errOptimistic
	case a.Flags&ifaDeprecated != 0 || a.PreferredLft == 0:
		return errDeprecated
	case a.IP.Is6() && a.Flags&ifaTemporary != 0:
		// Bit 0x01 is IFA_F_TEMPORARY for IPv6 and IFA_F_SECONDARY for IPv4: only IPv6 is checked.
		return errTemporary
	}
	return nil
}

// Skip records a target whose route source could not be used, for logs.
type Skip struct {
	Target Target
	Source netip.Addr
	Reason string
}

func find(addrs []LocalAddr, ip netip.Addr) (LocalAddr, bool) {
	for _, a := range addrs {
		if a.IP == ip {
			return a, true
		}
	}
	return LocalAddr{}, false
}
