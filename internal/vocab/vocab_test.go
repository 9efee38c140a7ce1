package vocab

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// An Event message is kept within 1024 bytes, cut where a UTF-8 character begins.
func TestEventMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int
	}{
		{"short", "ok", 2},
		{"exactly the limit", strings.Repeat("a", 1024), 1024},
		{"longer", strings.Repeat("a", 2000), 1024},
		{"a character across the cut", strings.Repeat("a", 1020) + "€€€", 1023},
	} {
		got := EventMessage(tc.in)
		if len(got) != tc.want || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes (valid UTF-8: %v), want %d", tc.name, len(got), utf8.ValidString(got), tc.want)
		}
	}
}

func TestParseAnnotations(t *testing.T) {
	var (
		internal = []corev1.NodeAddressType{corev1.NodeInternalIP}
		external = []corev1.NodeAddressType{corev1.NodeExternalIP}
		both     = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP}
	)
	tests := []struct {
		name    string
		in      string
		managed []corev1.NodeAddressType
		want    []string // key=format
		err     string
	}{
		{name: "empty", in: " , ", managed: both},
		{name: "nodeaddr preset, both types", in: "nodeaddr", managed: both, want: []string{
			"nodeaddr.io/internal-ipv4=internal-ipv4", "nodeaddr.io/internal-ipv6=internal-ipv6",
			"nodeaddr.io/external-ipv4=external-ipv4", "nodeaddr.io/external-ipv6=external-ipv6"}},
		{name: "preset keys of unmanaged types are left out", in: "nodeaddr,k3s", managed: external, want: []string{
			"nodeaddr.io/external-ipv4=external-ipv4", "nodeaddr.io/external-ipv6=external-ipv6",
			"k3s.io/external-ip=external-ips"}},
		{name: "calico", in: "calico", managed: internal, want: []string{
			"projectcalico.org/IPv4Address=internal-ipv4-cidr", "projectcalico.org/IPv6Address=internal-ipv6-cidr"}},
		{name: "flannel", in: "flannel", managed: both, want: []string{
			"flannel.alpha.coreos.com/public-ip-overwrite=external-ipv4",
			"flannel.alpha.coreos.com/public-ipv6-overwrite=external-ipv6"}},
		{name: "explicit keys, spaces", in: " example.com/ip = internal-ips ,node-ip=external-ipv6-cidr", managed: both, want: []string{
			"example.com/ip=internal-ips", "node-ip=external-ipv6-cidr"}},
		{name: "unknown preset", in: "cilium", managed: both, err: `"cilium" is neither a preset (calico, flannel, k3s, nodeaddr) nor KEY=FORMAT`},
		{name: "preset with nothing managed", in: "flannel", managed: internal, err: "preset flannel writes ExternalIP, which is not managed"},
		{name: "explicit key of an unmanaged type", in: "a.io/x=external-ipv4", managed: internal, err: "a.io/x=external-ipv4: ExternalIP is not managed"},
		{name: "bad format", in: "a.io/x=internal-ip", managed: both, err: `a.io/x: format "internal-ip" is not one of internal-ipv4`},
		{name: "bad key", in: "a b=internal-ipv4", managed: both, err: `"a b" is not a valid annotation key`},
		{name: "empty key", in: "=internal-ipv4", managed: both, err: `"" is not a valid annotation key`},
		{name: "key twice", in: "k3s,k3s.io/internal-ip=internal-ipv4", managed: both, err: "annotation k3s.io/internal-ip given twice (preset k3s and k3s.io/internal-ip=internal-ipv4)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAnnotations(tt.in, tt.managed)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			if !slices.Equal(s, tt.want) {
				t.Errorf("specs:\n got  %v\n want %v", s, tt.want)
			}
		})
	}
}

func TestRecordSpec(t *testing.T) {
	if got := RecordSpec().String(); got != "nodeaddr.io/addresses=ips" {
		t.Fatalf("String %q", got)
	}
}
