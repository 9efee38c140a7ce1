package agentcmd

import (
	"net/netip"
	"slices"
	"testing"
)

// The kubeconfig's server is an apiserver address only when it says where the API server is: an
// IP, not a node-local proxy on loopback, not the kubernetes Service's ClusterIP.
func TestServerAddress(t *testing.T) {
	service := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
	for _, tc := range []struct{ host, want string }{
		{"https://192.168.56.10:6443", "192.168.56.10"},
		{"https://[fd00::10]:6443", "fd00::10"},
		{"https://[::ffff:192.168.56.10]:6443", "192.168.56.10"},
		{"192.168.56.10:6443", "192.168.56.10"}, // rest.Config's host:port
		{"https://10.96.0.1:443", ""},
		{"https://127.0.0.1:6444", ""},
		{"https://[::1]:6443", ""},
		{"https://control-plane.example:6443", ""},
		{"", ""},
	} {
		var want []netip.Addr
		if tc.want != "" {
			want = []netip.Addr{netip.MustParseAddr(tc.want)}
		}
		if got := serverAddress(tc.host, service); !slices.Equal(got, want) {
			t.Errorf("serverAddress(%q) = %v, want %v", tc.host, got, want)
		}
	}
}
