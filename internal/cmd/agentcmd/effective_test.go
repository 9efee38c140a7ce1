package agentcmd

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// Startup says, per address type and family, what nodeaddr will do: the defaults filled in, one
// family's targets leaving the other without a source, an unmanaged type.
func TestEffectiveConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // one line per type and family, as "key=value ..." without the message
	}{
		{"defaults", nil, []string{
			"type=InternalIP family=IPv4 source=route targets=apiserver,8.8.8.8 exclude_interfaces=" + defaultExcl,
			"type=InternalIP family=IPv6 source=route targets=apiserver,2001:4860:4860::8888 exclude_interfaces=" + defaultExcl,
			"type=ExternalIP family=IPv4 source=route scope=global targets=8.8.8.8 exclude_interfaces=" + defaultExcl,
			"type=ExternalIP family=IPv6 source=route scope=global targets=2001:4860:4860::8888 exclude_interfaces=" + defaultExcl,
		}},
		{"one family's target, external unmanaged", []string{"--internal-ip-target=192.0.2.1", "--external-ip-target=none", "--default-exclusions=false"}, []string{
			"type=InternalIP family=IPv4 source=route targets=192.0.2.1",
			`type=InternalIP family=IPv6 source=none unmanaged="no target of this family: not published; the Node's entry of this type and family is removed"`,
			`type=ExternalIP family=IPv4 source=none unmanaged="--external-ip-target=none: nodeaddr leaves this type's Node entries alone"`,
			`type=ExternalIP family=IPv6 source=none unmanaged="--external-ip-target=none: nodeaddr leaves this type's Node entries alone"`,
		}},
		{"interfaces and CIDRs per family", []string{"--internal-ip-interfaces=eth1,bond.*", "--internal-ip-cidrs=10.0.0.0/8,!fd00::/8,2001:db8::/32",
			"--external-ip-target=8.8.8.8,2001:4860:4860::8888", "--external-ip-interfaces=wan0", "--default-exclusions=false"}, []string{
			"type=InternalIP family=IPv4 source=interfaces interfaces=eth1,bond.* cidrs=10.0.0.0/8",
			"type=InternalIP family=IPv6 source=interfaces interfaces=eth1,bond.* cidrs=!fd00::/8,2001:db8::/32",
			"type=ExternalIP family=IPv4 source=route+interfaces targets=8.8.8.8 interfaces=wan0",
			"type=ExternalIP family=IPv6 source=route+interfaces targets=2001:4860:4860::8888 interfaces=wan0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(append([]string{"--node-name=n"}, tc.args...), env())
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			o.logEffectiveConfig(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				}})))
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				got = append(got, strings.TrimPrefix(l, `level=INFO msg="effective configuration" `))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

const defaultExcl = `cali.*,cilium_.*,flannel.*,cni.*,veth.*,docker.*,kube-ipvs.*,lo`

// --external-ip-scope=global (the default) restricts the ExternalIP of the default targets only:
// an ExternalIP the operator chose, or one STUN discovery replaces, keeps any range.
func TestExternalIPScope(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool // ExternalIP's TypePolicy.GlobalOnly
	}{
		{nil, true},
		{[]string{"--external-ip-target="}, true}, // a chart passing every flag: the default
		{[]string{"--external-ip-scope=global"}, true},
		{[]string{"--external-ip-cidrs=!10.96.0.0/12"}, true}, // exclusions choose nothing
		{[]string{"--external-ip-exclude-interfaces=wg.*"}, true},
		{[]string{"--external-ip-scope=any"}, false},
		{[]string{"--external-ip-target=8.8.8.8,2001:4860:4860::8888"}, false},
		{[]string{"--external-ip-target=10.0.0.1"}, false},
		{[]string{"--external-ip-interfaces=eth0"}, false},
		{[]string{"--external-ip-cidrs=10.0.0.0/8"}, false},
		{[]string{"--external-ip-discovery=stun:192.0.2.1:3478"}, false},
	} {
		o, err := parse(append([]string{"--node-name=n"}, tc.args...), env())
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := o.policy().Types["ExternalIP"].GlobalOnly; got != tc.want {
			t.Errorf("%v: GlobalOnly %v, want %v", tc.args, got, tc.want)
		}
	}
	if _, err := parse([]string{"--node-name=n", "--external-ip-scope=public"}, env()); err == nil ||
		err.Error() != `--external-ip-scope: "public" is not global or any` {
		t.Errorf("--external-ip-scope=public: %v, want a usage error", err)
	}
}
