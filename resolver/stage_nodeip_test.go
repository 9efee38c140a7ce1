package resolver

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestWithProvidedNodeIP(t *testing.T) {
	local := func(ips ...string) []netip.Prefix {
		out := []netip.Prefix{}
		for _, s := range ips {
			ip := netip.MustParseAddr(s)
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
		return out
	}
	both := State{Managed: []AddressType{InternalIP, ExternalIP}, Addresses: []Address{
		addr(InternalIP, "192.0.2.10"), addr(InternalIP, "2001:db8::10"), addr(ExternalIP, "203.0.113.7")},
		Local: local("192.0.2.10", "2001:db8::10", "203.0.113.7", "10.0.0.5", "fd00::5"),
		Explanation: []Explained{
			{Type: "InternalIP", Family: "IPv4", Address: "192.0.2.10", From: "route to 192.0.2.1", Chosen: true, Reason: "chosen"},
			{Type: "InternalIP", Family: "IPv6", Address: "2001:db8::10", From: "route to 2001:db8::1", Chosen: true, Reason: "chosen"},
		}}
	selected := []string{
		"InternalIP IPv4 192.0.2.10 (route to 192.0.2.1): chosen",
		"InternalIP IPv6 2001:db8::10 (route to 2001:db8::1): chosen",
	}
	const an = "annotation alpha.kubernetes.io/provided-node-ip"
	tests := []struct {
		name       string
		annotation string
		state      State
		want       []string // type=ip
		missing    string
		err        string
		explained  []string
	}{
		{name: "no annotation", state: both,
			want:      []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			explained: selected},
		{name: "one IP on the host replaces the InternalIPs", annotation: "10.0.0.5", state: both,
			want: []string{"InternalIP=10.0.0.5", "ExternalIP=203.0.113.7"},
			explained: []string{
				"InternalIP IPv4 192.0.2.10 (route to 192.0.2.1): replaced by the kubelet's node IP 10.0.0.5",
				"InternalIP IPv6 2001:db8::10 (route to 2001:db8::1): replaced by the kubelet's node IP 10.0.0.5",
				"InternalIP IPv4 10.0.0.5 (" + an + "): chosen: the kubelet's node IP (--node-ip)",
			}},
		{name: "the resolved address itself", annotation: "192.0.2.10", state: both,
			want: []string{"InternalIP=192.0.2.10", "ExternalIP=203.0.113.7"},
			explained: []string{
				"InternalIP IPv4 192.0.2.10 (route to 192.0.2.1): chosen",
				"InternalIP IPv6 2001:db8::10 (route to 2001:db8::1): replaced by the kubelet's node IP 192.0.2.10",
			}},
		{name: "dual-stack pair, annotation order", annotation: "fd00::5,10.0.0.5", state: both,
			want: []string{"InternalIP=fd00::5", "InternalIP=10.0.0.5", "ExternalIP=203.0.113.7"},
			explained: []string{
				"InternalIP IPv4 192.0.2.10 (route to 192.0.2.1): replaced by the kubelet's node IP fd00::5,10.0.0.5",
				"InternalIP IPv6 2001:db8::10 (route to 2001:db8::1): replaced by the kubelet's node IP fd00::5,10.0.0.5",
				"InternalIP IPv6 fd00::5 (" + an + "): chosen: the kubelet's node IP (--node-ip)",
				"InternalIP IPv4 10.0.0.5 (" + an + "): chosen: the kubelet's node IP (--node-ip)",
			}},
		{name: "not on the host: resolved addresses kept, missing reported", annotation: "10.0.0.99", state: both,
			want:    []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			missing: "[10.0.0.99]",
			explained: append(slices.Clone(selected),
				"InternalIP IPv4 10.0.0.99 ("+an+"): ignored: not assigned to this host; the Node keeps the uninitialized taint")},
		{name: "half of a pair missing", annotation: "10.0.0.5,fd00::99", state: both,
			want:    []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			missing: "[fd00::99]",
			explained: append(slices.Clone(selected),
				"InternalIP IPv6 fd00::99 ("+an+"): ignored: not assigned to this host; the Node keeps the uninitialized taint")},
		{name: "InternalIP not managed: ignored", annotation: "10.0.0.99",
			state: State{Managed: []AddressType{ExternalIP}, Addresses: []Address{addr(ExternalIP, "203.0.113.7")}},
			want:  []string{"ExternalIP=203.0.113.7"}},
		{name: "two IPv4: invalid, ignored", annotation: "10.0.0.5,10.0.0.6", state: both,
			want: []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			err:  "must contain either a single IP or a dual-stack pair",
			explained: append(slices.Clone(selected),
				"InternalIP  ("+an+"): ignored: must contain either a single IP or a dual-stack pair of IPs")},
		{name: "garbage: invalid, ignored", annotation: "node-a", state: both,
			want: []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			err:  `could not parse "node-a"`,
			explained: append(slices.Clone(selected),
				"InternalIP  ("+an+`): ignored: could not parse "node-a"`)},
		{name: "host addresses unknown (--dry-run): trusted", annotation: "10.0.0.99",
			state:     State{Managed: []AddressType{InternalIP}, Addresses: []Address{addr(InternalIP, "192.0.2.10")}},
			want:      []string{"InternalIP=10.0.0.99"},
			explained: []string{"InternalIP IPv4 10.0.0.99 (" + an + "): chosen: the kubelet's node IP (--node-ip)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := withProvidedNodeIP(tt.annotation, tt.state)
			var got []string
			for _, a := range r.Addresses {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("addresses %v, want %v", got, tt.want)
			}
			if m := r.NodeIP.Missing; (tt.missing == "") != (len(m) == 0) || len(m) > 0 && tt.missing != fmtIPs(m) {
				t.Errorf("missing %v, want %s", m, tt.missing)
			}
			if err := r.NodeIP.Err; (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("err %v, want %q", err, tt.err)
			}
			var lines []string
			for _, l := range r.Explanation {
				lines = append(lines, l.String())
			}
			if strings.Join(lines, "\n") != strings.Join(tt.explained, "\n") {
				t.Errorf("explanation:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tt.explained, "\n"))
			}
			if tt.state.Explanation != nil && tt.state.Explanation[0].Reason != "chosen" {
				t.Errorf("the input's explanation changed: %v", tt.state.Explanation)
			}
		})
	}
}

// A host address's prefix length goes with the kubelet's node IP (annotations in CIDR form).
func TestWithProvidedNodeIPPrefixLength(t *testing.T) {
	s := State{Managed: []AddressType{InternalIP}, Local: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}}
	got := withProvidedNodeIP("10.0.0.5", s)
	if len(got.Addresses) != 1 || got.Addresses[0].PrefixLen != 24 {
		t.Errorf("addresses %+v, want 10.0.0.5 with prefix length 24", got.Addresses)
	}
}

func fmtIPs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
