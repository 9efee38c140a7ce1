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
			"type=ExternalIP family=IPv4 source=route targets=8.8.8.8 exclude_interfaces=" + defaultExcl,
			"type=ExternalIP family=IPv6 source=route targets=2001:4860:4860::8888 exclude_interfaces=" + defaultExcl,
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
