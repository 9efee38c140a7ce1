package agentcmd

import (
	"strings"
	"testing"
)

// A target list that names one family only is taken as given, and warns that the other family's
// address of that type is neither published nor kept; the defaults, "none", a list with both
// families and interface sources do not warn.
func TestOneFamilyTargetsWarn(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings, one warning each
	}{
		{"defaults", nil, nil},
		{"internal IPv4 only", []string{"--internal-ip-target=192.0.2.1"},
			[]string{"--internal-ip-target names IPv4 targets only: nodeaddr publishes no IPv6 InternalIP and removes one the Node has; " +
				"for a dual-stack Node add a target of that family, e.g. --internal-ip-target=192.0.2.1,2001:4860:4860::8888"}},
		{"external IPv6 only", []string{"--external-ip-target=2001:db8::1"},
			[]string{"--external-ip-target names IPv6 targets only: nodeaddr publishes no IPv4 ExternalIP", "--external-ip-target=2001:db8::1,8.8.8.8"}},
		{"both families", []string{"--internal-ip-target=192.0.2.1,2001:db8::1"}, nil},
		{"none", []string{"--external-ip-target=none"}, nil},
		{"interfaces add the other family", []string{"--internal-ip-target=192.0.2.1", "--internal-ip-interfaces=eth0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(append([]string{"--node-name=a"}, tc.args...), env())
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(o.warnings, "\n")
			if tc.want == nil && len(o.warnings) > 0 {
				t.Fatalf("unexpected warnings: %q", o.warnings)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("warnings %q lack %q", o.warnings, w)
				}
			}
			if tc.want != nil && len(o.warnings) != 1 {
				t.Errorf("%d warnings, want 1: %q", len(o.warnings), o.warnings)
			}
		})
	}
}
