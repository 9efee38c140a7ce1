package resolver

// The scope of an ExternalIP (TypePolicy.GlobalOnly): an ExternalIP is by definition reachable from
// outside, so the default one is published only when globally routable.

import (
	"errors"
	"fmt"
	"net/netip"
)

// errNotGlobal rejects an address outside global scope for a type that accepts global ones only.
var errNotGlobal = errors.New("not globally routable, so not an ExternalIP (--external-ip-scope=any publishes it)")

// sharedAddressSpace is RFC 6598's carrier-grade NAT range, which netip's IsPrivate leaves out.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// nonGlobal names the range that keeps ip from being globally routable, or "" when it is global.
// The ranges are those a host may hold as a route source: private-use (RFC 1918), shared address
// space (RFC 6598), unique-local (RFC 4193), link-local and loopback (which the kernel usually
// scopes out already, but an IPv4 link-local added by hand is of universe scope). Documentation
// ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) count as global: tests and
// examples use them as public addresses.
func nonGlobal(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.Is4() && ip.IsPrivate():
		return "private-use (RFC 1918)"
	case ip.IsPrivate():
		return "unique-local (RFC 4193)"
	case sharedAddressSpace.Contains(ip):
		return "shared address space (RFC 6598)"
	case !ip.IsGlobalUnicast():
		return "not unicast"
	}
	return ""
}

// scopeReason is nil when tp accepts ip's scope, else why not.
func scopeReason(tp TypePolicy, ip netip.Addr) error {
	if !tp.GlobalOnly {
		return nil
	}
	if kind := nonGlobal(ip); kind != "" {
		return fmt.Errorf("%w: %s", errNotGlobal, kind)
	}
	return nil
}
