package resolver

import (
	"fmt"
	"testing"
)

// local-ccm's rule: an ExternalIP equal to an InternalIP (ours or the kubelet's) is not published,
// unless kept; another writer's ExternalIP is never dropped when nodeaddr does not manage the type.
func TestWithoutExternalEqualInternal(t *testing.T) {
	ext, in, both := []AddressType{ExternalIP}, []AddressType{InternalIP}, []AddressType{InternalIP, ExternalIP}
	for _, tc := range []struct {
		name      string
		managed   []AddressType
		addrs     []Address
		others    []Address // the Node's entries of unmanaged types
		keep      bool
		want      string
		dropped   bool
		explained string // the ExternalIP IPv4 line after the rule
	}{
		{name: "single-address IPv4 host: ExternalIP equal to InternalIP is dropped", managed: both,
			addrs: []Address{addr(InternalIP, "192.0.2.10"), addr(ExternalIP, "192.0.2.10")},
			want:  "[InternalIP=192.0.2.10]", dropped: true,
			explained: "ExternalIP IPv4 192.0.2.10 (route to 198.51.100.1): dropped: equals an InternalIP (--external-ip-equal-internal=drop)"},
		{name: "kept with --external-ip-equal-internal=keep", managed: both, keep: true,
			addrs:     []Address{addr(InternalIP, "192.0.2.10"), addr(ExternalIP, "192.0.2.10")},
			want:      "[InternalIP=192.0.2.10 ExternalIP=192.0.2.10]",
			explained: "ExternalIP IPv4 192.0.2.10 (route to 198.51.100.1): chosen"},
		{name: "the kubelet's InternalIP counts", managed: ext,
			addrs: []Address{addr(ExternalIP, "10.0.0.5")}, others: []Address{addr(InternalIP, "10.0.0.5")},
			want: "[]", dropped: true,
			explained: "ExternalIP IPv4 10.0.0.5 (route to 198.51.100.1): dropped: equals an InternalIP (--external-ip-equal-internal=drop)"},
		{name: "per family: only the equal IPv4 ExternalIP goes", managed: both,
			addrs: []Address{addr(InternalIP, "10.0.0.5"), addr(InternalIP, "2001:db8::5"), addr(ExternalIP, "10.0.0.5"), addr(ExternalIP, "2001:db8:1::5")},
			want:  "[InternalIP=10.0.0.5 InternalIP=2001:db8::5 ExternalIP=2001:db8:1::5]", dropped: true,
			explained: "ExternalIP IPv4 10.0.0.5 (route to 198.51.100.1): dropped: equals an InternalIP (--external-ip-equal-internal=drop)"},
		{name: "different addresses stay", managed: both,
			addrs:     []Address{addr(InternalIP, "10.0.0.5"), addr(ExternalIP, "203.0.113.7")},
			want:      "[InternalIP=10.0.0.5 ExternalIP=203.0.113.7]",
			explained: "ExternalIP IPv4 203.0.113.7 (route to 198.51.100.1): chosen"},
		{name: "ExternalIP not managed: another writer's equal entry is not ours to drop", managed: in,
			addrs: []Address{addr(InternalIP, "10.0.0.5")}, others: []Address{addr(ExternalIP, "10.0.0.5")},
			want: "[InternalIP=10.0.0.5]"},
		{name: "another spelling of the same address is equal", managed: ext,
			addrs: []Address{addr(ExternalIP, "10.0.0.5")}, others: []Address{addr(InternalIP, "::ffff:10.0.0.5")},
			want: "[]", dropped: true,
			explained: "ExternalIP IPv4 10.0.0.5 (route to 198.51.100.1): dropped: equals an InternalIP (--external-ip-equal-internal=drop)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := State{Managed: tc.managed, Addresses: tc.addrs}
			for _, a := range tc.addrs {
				if a.Type == ExternalIP && FamilyOf(a.IP) == IPv4 {
					in.Explanation = []Explained{{Type: "ExternalIP", Family: "IPv4", Address: a.IP.String(),
						From: "route to 198.51.100.1", Chosen: true, Reason: "chosen"}}
				}
			}
			orig := fmt.Sprint(in.Explanation)
			got := withoutExternalEqualInternal(tc.keep, tc.others, in)
			if got.String() != tc.want || got.DroppedEqual != tc.dropped {
				t.Errorf("state %s (dropped %v), want %s (dropped %v)", got, got.DroppedEqual, tc.want, tc.dropped)
			}
			var line string
			if len(got.Explanation) > 0 {
				line = got.Explanation[0].String()
			}
			if line != tc.explained {
				t.Errorf("explained %q, want %q", line, tc.explained)
			}
			if fmt.Sprint(in.Explanation) != orig {
				t.Errorf("the input's explanation changed to %v", in.Explanation)
			}
		})
	}
}
