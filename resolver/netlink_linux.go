package resolver

import (
	"errors"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Netlink reads kernel state through rtnetlink in the process's network namespace. It needs no
// capability: route lookups and address dumps are open to every process.
type Netlink struct{}

// RouteSource asks the kernel for its route to dst (`ip route get`) and returns the preferred source
// address the kernel filled in.
func (Netlink) RouteSource(dst netip.Addr) (netip.Addr, error) {
	routes, err := netlink.RouteGet(dst.AsSlice())
	if err != nil {
		if noRoute(err) {
			return netip.Addr{}, nil
		}
		return netip.Addr{}, err
	}
	for _, r := range routes {
		if ip, ok := netip.AddrFromSlice(r.Src); ok && ip.IsValid() && !ip.IsUnspecified() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, nil
}

// noRoute reports whether err is the kernel's way of saying "no usable route": unreachable,
// prohibit and blackhole routes, or no route at all.
func noRoute(err error) bool {
	for _, e := range []error{unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EACCES, unix.EPERM, unix.EINVAL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Addresses lists every address of every interface, with the interface's name, prefix length and
// (IPv4) label.
func (Netlink) Addresses() ([]LocalAddr, error) {
	list, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	out := make([]LocalAddr, 0, len(list))
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		la := LocalAddr{IP: ip.Unmap(), LinkIndex: a.LinkIndex, Link: names[a.LinkIndex],
			Flags: a.Flags, Scope: a.Scope, PreferredLft: a.PreferedLft, Label: a.Label}
		if a.IPNet != nil {
			la.PrefixLen, _ = a.Mask.Size()
		}
		out = append(out, la)
	}
	return out, nil
}

// RuleTables returns the routing tables named by policy rules, so the watcher does not drop changes
// to them.
func (Netlink) RuleTables() ([]int, error) {
	rules, err := netlink.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, r := range rules {
		if r.Table > 0 {
			out = append(out, r.Table)
		}
	}
	return out, nil
}
