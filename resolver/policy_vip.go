package resolver

import (
	"regexp"
	"slices"
)

// vipReason recognises the addresses keepalived, kube-vip and similar tools float between hosts:
// a host prefix (/32, /128) on the loopback (kube-vip BGP mode, anycast), an IPv4 label other than
// the interface name (`ip addr add ... label eth0:vip`, keepalived's `label`), and an IPv4 /32 on an
// interface that also carries a wider IPv4 address (kube-vip ARP mode). A lone /32 (point-to-point
// uplinks at some hosting providers) and IPv6 /128s (DHCPv6) stay usable.
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
