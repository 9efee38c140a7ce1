package resolver

import (
	"regexp"
	"slices"
)

// vipReason recognises the addresses keepalived, kube-vip and similar tools float between hosts: a
// host prefix on the loopback, an IPv4 label other than the interface name, and an IPv4 /32 next to
// a wider IPv4 address on its interface. A lone /32 and IPv6 /128s (DHCPv6) stay usable.
func vipReason(la LocalAddr, addrs []LocalAddr) error {
	host := la.PrefixLen == la.IP.BitLen()
	switch {
	case host && la.Link == "lo":
		return errVIPLoopback
	case la.IP.Is4() && la.Label != "" && la.Link != "" && la.Label != la.Link:
		return errVIPLabel
	case host && la.IP.Is4() && slices.ContainsFunc(addrs, func(o LocalAddr) bool {
		return o.LinkIndex == la.LinkIndex && o.IP.Is4() && o.PrefixLen > 0 && o.PrefixLen < 32 &&
			o.Flags&ifaSecondary == 0
	}):
		return errVIPHost
	}
	return nil
}

func matchAny(res []*regexp.Regexp, s string, emptyMatches bool) bool {
	if len(res) == 0 {
		return emptyMatches
	}
	return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(s) })
}
