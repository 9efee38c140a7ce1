package admission

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// AcceptableNodeIP is what the policy must accept as a new InternalIP or ExternalIP: what Go's
// netip.ParseAddr parses, without a zone, and neither unspecified, loopback, link-local,
// multicast nor IPv4-mapped.
func AcceptableNodeIP(s string) bool {
	ip, err := netip.ParseAddr(s)
	return err == nil && ip.Zone() == "" && !ip.IsUnspecified() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() &&
		!ip.IsMulticast() && !ip.Is4In6()
}

// NodeIPInputs are the named inputs of the address syntax (malformed and special-purpose addresses
// and their neighbours).
var NodeIPInputs = []string{
	// What nodeaddr publishes in the tests and the documentation ranges.
	"192.0.2.10", "10.0.0.1", "172.16.0.1", "100.64.0.1", "198.51.100.7", "255.255.255.255", "2001:db8::1", "fd00::2",
	"2001:4860:4860::8888", "2001:DB8::A", "0001:0db8:0000::1", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
	"64:ff9b::192.0.2.1", "1:2:3:4:5:6:192.0.2.1", "1:2:3:4:5::192.0.2.1", "::1.2.3.4", "fec0::1",
	// Malformed: nine groups with an ellipsis, and other malformed ones.
	"1::2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1:2:3:4:5:6::192.0.2.1", "1:2:3:4:5:6:7:192.0.2.1",
	"12345::1", ":::", "1:::2", "::1.2.3", "g::1", "[::1]", ":1::2", "1::2:", "", " 192.0.2.1", "192.0.2.1\n",
	"01.2.3.4", "1.2.3.04", "192.0.2.256", "1.2.3", "1.2.3.4.5", "::ffff:01.2.3.4", "fe80::1%eth0", "2001:db8::1%1",
	// Special-purpose addresses.
	"127.0.0.1", "127.1.2.3", "0.0.0.0", "169.254.169.254", "224.0.0.1", "239.255.255.250", "::", "::1",
	"0:0:0:0:0:0:0:1", "0::0", "::0.0.0.0", "::0.0.0.1", "fe80::1", "FEBF::1", "ff02::1", "ff00::", "::ffff:7f00:1",
	"::ffff:1.2.3.4", "0:0:0:0:0:ffff:102:304", "::ffff:0:0", "0:0::FFFF:0.0.0.0",
}

// GeneratedNodeIPs are IPv6 shapes by number of groups before and after an ellipsis, with and
// without an embedded IPv4 tail, so that the syntax is compared at every count.
func GeneratedNodeIPs() []string {
	groups := func(n, first int) []string {
		var g []string
		for i := range n {
			g = append(g, fmt.Sprintf("%x", first+i))
		}
		return g
	}
	var out []string
	for _, tail := range []string{"", "192.0.2.1"} {
		for k := 0; k <= 9; k++ {
			plain := groups(k, 0x2001)
			if tail != "" {
				plain = append(plain, tail)
			}
			out = append(out, strings.Join(plain, ":"))
			for m := 0; m+k <= 9; m++ {
				right := groups(m, 0xa)
				if tail != "" {
					right = append(right, tail)
				}
				out = append(out, strings.Join(groups(k, 0x2001), ":")+"::"+strings.Join(right, ":"))
			}
		}
	}
	return out
}

// syntaxCases are the address syntax's lines: each named input as InternalIP and as ExternalIP,
// each generated one as one of the two (alternately), allowed exactly when AcceptableNodeIP.
func syntaxCases() []Case {
	var out []Case
	inputs := append(slices.Clone(NodeIPInputs), GeneratedNodeIPs()...)
	seen := map[string]bool{}
	for i, s := range inputs {
		kinds := []string{"InternalIP", "ExternalIP"}
		if i >= len(NodeIPInputs) {
			kinds = kinds[i%2 : i%2+1]
		}
		for _, k := range kinds {
			name := fmt.Sprintf("%s %q", k, s)
			if seen[name] {
				continue
			}
			seen[name] = true
			want := Denied(OwnNode, "")
			if AcceptableNodeIP(s) {
				want = Allowed
			}
			out = append(out, Case{name, Agent, AddAddresses(k + "=" + s), want})
		}
	}
	return out
}
