package resolver

import (
	"errors"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Netlink reads kernel state through rtnetlink; route lookups and address dumps need no capability.
type Netlink struct{}

// RouteSource returns the source of the kernel's route to dst (`ip route get`).
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

// noRoute reports whether err means no usable route (unreachable, prohibit, blackhole, none).
func noRoute(err error) bool {
	return slices.ContainsFunc([]error{unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EACCES, unix.EPERM, unix.EINVAL},
		func(e error) bool { return errors.Is(err, e) })
}

// Addresses lists every address of every interface.
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

// RuleTables returns the routing tables named by policy rules.
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
